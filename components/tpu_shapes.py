"""TPU v6e (Trillium) slice shapes: the single source of truth for topology → chips, VMs and machine type."""

from __future__ import annotations

from dataclasses import dataclass

ACCELERATOR = "tpu-v6e-slice"
TPU_RESOURCE = "google.com/tpu"
# GKE labels and taint on TPU nodes (https://cloud.google.com/kubernetes-engine/docs/concepts/plan-tpus).
ACCELERATOR_LABEL = "cloud.google.com/gke-tpu-accelerator"
TOPOLOGY_LABEL = "cloud.google.com/gke-tpu-topology"
NODEPOOL_LABEL = "cloud.google.com/gke-nodepool"
HOSTNAME_LABEL = "kubernetes.io/hostname"
TPU_TAINT_KEY = "google.com/tpu"
# v6e node pools need this GKE version or newer (GKE TPU v6e docs).
MIN_GKE_VERSION = "1.31.2-gke.1115000"

MACHINE_1T = "ct6e-standard-1t"
MACHINE_4T = "ct6e-standard-4t"
MACHINE_8T = "ct6e-standard-8t"
CHIPS_PER_MACHINE = {MACHINE_1T: 1, MACHINE_4T: 4, MACHINE_8T: 8}


@dataclass(frozen=True, slots=True)
class SliceShape:
    """One valid v6e slice layout: topology on a machine type."""

    topology: str
    chips: int
    vms: int
    machine_type: str

    @property
    def chips_per_vm(self) -> int:
        return CHIPS_PER_MACHINE[self.machine_type]

    @property
    def multi_host(self) -> bool:
        return self.vms > 1

    @property
    def key(self) -> str:
        """Stable short name, e.g. `4x4` or `2x4-8t`; used in flavor and pool names."""
        suffix = self.machine_type.rsplit("-", 1)[-1]
        return self.topology if not _ambiguous(self.topology) else f"{self.topology}-{suffix}"


# The complete v6e table. 2x4 has two layouts (one 8-chip VM or two 4-chip VMs), so it has no default.
SHAPES: tuple[SliceShape, ...] = (
    SliceShape("1x1", 1, 1, MACHINE_1T),
    SliceShape("2x2", 4, 1, MACHINE_4T),
    SliceShape("2x4", 8, 1, MACHINE_8T),
    SliceShape("2x4", 8, 2, MACHINE_4T),
    SliceShape("4x4", 16, 4, MACHINE_4T),
    SliceShape("4x8", 32, 8, MACHINE_4T),
    SliceShape("8x8", 64, 16, MACHINE_4T),
    SliceShape("8x16", 128, 32, MACHINE_4T),
    SliceShape("16x16", 256, 64, MACHINE_4T),
)

TOPOLOGIES: tuple[str, ...] = tuple(dict.fromkeys(s.topology for s in SHAPES))


def _ambiguous(topology: str) -> bool:
    return sum(1 for s in SHAPES if s.topology == topology) > 1


def shapes_for(topology: str) -> tuple[SliceShape, ...]:
    return tuple(s for s in SHAPES if s.topology == topology)


def resolve_shape(topology: str, machine_type: str | None) -> SliceShape:
    """Return the shape for a topology and optional machine type, or raise ValueError saying what is allowed."""
    candidates = shapes_for(topology)
    if not candidates:
        raise ValueError(f"topology {topology!r} is not a TPU v6e topology; allowed: {', '.join(TOPOLOGIES)}")
    if machine_type is None:
        if len(candidates) > 1:
            options = " or ".join(f"{s.machine_type} ({s.vms} VM{'s' if s.vms > 1 else ''})" for s in candidates)
            raise ValueError(f"topology {topology!r} needs an explicit machineType: {options}")
        return candidates[0]
    for shape in candidates:
        if shape.machine_type == machine_type:
            return shape
    allowed = ", ".join(s.machine_type for s in candidates)
    raise ValueError(f"machineType {machine_type!r} does not fit topology {topology!r}; allowed: {allowed}")
