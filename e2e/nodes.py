"""Fake GKE nodes for the local cluster: TPU v6e slices as GKE labels, taints and capacity them, plus a system node.

No kubelet runs; kwok keeps each node's lease and Ready condition and runs the pods bound to it. The shapes come from
components/tpu_shapes.py, the package's single table of v6e layouts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gke_tpu_priority.components.cluster.node_pools import SYSTEM_LABEL
from gke_tpu_priority.components.tpu_shapes import (
    ACCELERATOR,
    ACCELERATOR_LABEL,
    HOSTNAME_LABEL,
    NODEPOOL_LABEL,
    SHAPES,
    TOPOLOGY_LABEL,
    TPU_RESOURCE,
    TPU_TAINT_KEY,
    SliceShape,
)

# kwok manages the nodes that carry this annotation and no others, so a real cluster's nodes are never touched.
KWOK_ANNOTATION = "kwok.x-k8s.io/node"
KWOK_SELECTOR = f"{KWOK_ANNOTATION}=fake"
ZONE = "us-east5-b"
SYSTEM_POOL = "system"

JsonObj = dict[str, Any]


@dataclass(frozen=True)
class SliceSpec:
    """One TPU node pool: a multi-host slice of `shape.vms` hosts, or `hosts` single-host slices."""

    pool: str
    shape: SliceShape
    hosts: int | None = None

    def node_names(self) -> list[str]:
        return [f"{self.pool}-{host}" for host in range(self.hosts or self.shape.vms)]


def shape(topology: str, machine_type: str | None = None) -> SliceShape:
    matches = [s for s in SHAPES if s.topology == topology and (machine_type is None or s.machine_type == machine_type)]
    if len(matches) != 1:
        raise ValueError(f"no single v6e shape for topology {topology!r} and machine type {machine_type!r}")
    return matches[0]


def default_fleet() -> list[SliceSpec]:
    """Four 4x4 slices (4 hosts each), one 2x4 on two hosts, two single-host 2x2 slices."""
    return [
        *(SliceSpec(f"tpu-4x4-{i}", shape("4x4")) for i in range(4)),
        SliceSpec("tpu-2x4-0", shape("2x4", "ct6e-standard-4t")),
        *(SliceSpec(f"tpu-2x2-{i}", shape("2x2")) for i in range(2)),
    ]


def _node(name: str, labels: dict[str, str], taints: list[JsonObj], capacity: dict[str, str]) -> JsonObj:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {KWOK_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {
                HOSTNAME_LABEL: name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "topology.kubernetes.io/zone": ZONE,
                "topology.kubernetes.io/region": ZONE.rsplit("-", 1)[0],
                "type": "kwok",
                **labels,
            },
        },
        "spec": {"taints": taints},
        "status": {"capacity": capacity, "allocatable": capacity},
    }


def tpu_nodes(spec: SliceSpec) -> list[JsonObj]:
    """The nodes GKE makes for one slice: every host labelled with the pool, accelerator and topology, tainted
    `google.com/tpu=present:NoSchedule`, with `google.com/tpu` chips per host."""
    labels = {
        NODEPOOL_LABEL: spec.pool,
        ACCELERATOR_LABEL: ACCELERATOR,
        TOPOLOGY_LABEL: spec.shape.topology,
        "node.kubernetes.io/instance-type": spec.shape.machine_type,
        "cloud.google.com/machine-family": "ct6e",
    }
    taints = [{"key": TPU_TAINT_KEY, "value": "present", "effect": "NoSchedule"}]
    capacity = {
        TPU_RESOURCE: str(spec.shape.chips_per_vm),
        "cpu": str(45 * spec.shape.chips_per_vm),
        "memory": f"{180 * spec.shape.chips_per_vm}Gi",
        "pods": "110",
        "ephemeral-storage": "100Gi",
    }
    return [_node(name, labels, taints, capacity) for name in spec.node_names()]


def system_nodes(count: int = 2) -> list[JsonObj]:
    """CPU nodes for everything that is not TPU work (controllers' pods, the reconciler)."""
    # The label the package's created clusters put on their system pool, where its controllers are pinned.
    labels = {NODEPOOL_LABEL: SYSTEM_POOL, SYSTEM_LABEL: "true", "node.kubernetes.io/instance-type": "e2-standard-8"}
    capacity = {"cpu": "8", "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi"}
    return [_node(f"{SYSTEM_POOL}-{i}", labels, [], capacity) for i in range(count)]


def fleet_nodes(fleet: list[SliceSpec] | None = None) -> list[JsonObj]:
    return [*system_nodes(), *(node for spec in fleet or default_fleet() for node in tpu_nodes(spec))]
