"""The TPU v6e slice shapes, as the rules need them.

A copy of ``components/tpu_shapes.py``'s table: the policy pack runs in Pulumi's policy host with only this
directory importable, so it cannot import ``components``. tests/policies/test_rule_layout.py fails if the two differ.
"""

from __future__ import annotations

from typing import NamedTuple

ACCELERATOR = "tpu-v6e-slice"


class Shape(NamedTuple):
    topology: str
    chips: int
    vms: int
    machine_type: str
    chips_per_vm: int

    @property
    def multi_host(self) -> bool:
        return self.vms > 1


SHAPES: tuple[Shape, ...] = (
    Shape("1x1", 1, 1, "ct6e-standard-1t", 1),
    Shape("2x2", 4, 1, "ct6e-standard-4t", 4),
    Shape("2x4", 8, 1, "ct6e-standard-8t", 8),
    Shape("2x4", 8, 2, "ct6e-standard-4t", 4),
    Shape("4x4", 16, 4, "ct6e-standard-4t", 4),
    Shape("4x8", 32, 8, "ct6e-standard-4t", 4),
    Shape("8x8", 64, 16, "ct6e-standard-4t", 4),
    Shape("8x16", 128, 32, "ct6e-standard-4t", 4),
    Shape("16x16", 256, 64, "ct6e-standard-4t", 4),
)
TOPOLOGIES: tuple[str, ...] = tuple(dict.fromkeys(s.topology for s in SHAPES))


def shapes_for(topology: str, machine_type: str | None = None) -> tuple[Shape, ...]:
    """Shapes of a topology, narrowed to a machine type when the pod selects one."""
    return tuple(s for s in SHAPES if s.topology == topology and machine_type in (None, s.machine_type))
