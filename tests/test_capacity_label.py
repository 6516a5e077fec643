"""The capacity label is one contract read in several places: the node pools write it, the reconciler reads it from
nodes, the admission rules and the off-spot rule read it from pod templates. Each restates the key and values
(the reconciler image and the rule set must not import the Pulumi components), so this checks that every reader
understands what the pools actually write, for every capacity mode."""

from __future__ import annotations

from typing import Any

import pytest

from gke_tpu_priority.components.config import tpu as pools
from gke_tpu_priority.components.workloads.jobset import not_on_spot_affinity
from gke_tpu_priority.hotswap import slices
from gke_tpu_priority.hotswap.kube.snapshot import node_from
from gke_tpu_priority.policies.rules import admission_checks, spot_tiers, tpu_workloads
from testkit.stacks import stack_run

CAPACITIES: list[dict[str, Any]] = [
    {"mode": "on-demand"},
    {"mode": "spot"},
    {"mode": "reservation", "reservation": {"name": "tpu-v6e"}},
    {"mode": "flex-start"},
    {"mode": "flex-start", "queuedProvisioning": True},
]


def pool_labels(capacity: dict[str, Any]) -> dict[str, str]:
    """The capacity label as `components.cluster.node_pools.build_tpu_pool` puts it on a pool's nodes (checked
    against the real program below)."""
    return {pools.CAPACITY_LABEL: pools.Capacity.model_validate(capacity).capacity_class}


def test_the_node_pools_write_the_capacity_class_the_readers_are_checked_against() -> None:
    """The ladder stack's pools, as the program registers them: reservation, spot and queued flex-start."""
    written = {
        pool.inputs["nodeConfig"]["labels"][pools.CAPACITY_LABEL]
        for pool in stack_run("ladder").resources
        if pool.type == "gcp:container/nodePool:NodePool"
        and pools.CAPACITY_LABEL in pool.inputs["nodeConfig"]["labels"]
    }
    expected = [c for c in CAPACITIES if c["mode"] in ("reservation", "spot") or c.get("queuedProvisioning")]
    assert written == {pool_labels(c)[pools.CAPACITY_LABEL] for c in expected}


def test_every_restatement_names_the_same_key_and_values() -> None:
    assert {
        pools.CAPACITY_LABEL,
        slices.CAPACITY_LABEL,
        tpu_workloads.CAPACITY_LABEL,
        admission_checks.CAPACITY_LABEL,
    } == {"gke-tpu-priority.io/capacity"}
    assert {pools.QUEUED_CAPACITY, slices.QUEUED_CAPACITY, admission_checks.QUEUED_CAPACITY} == {"flex-start-queued"}
    assert {pools.CapacityMode.SPOT.value, slices.SPOT_CAPACITY, tpu_workloads.SPOT_CAPACITY} == {"spot"}
    assert pools.GKE_QUEUED_KEY == admission_checks.GKE_QUEUED_KEY


@pytest.mark.parametrize(
    "capacity", CAPACITIES, ids=lambda c: c["mode"] + ("-queued" if c.get("queuedProvisioning") else "")
)
def test_every_reader_understands_what_the_pools_write(capacity: dict[str, Any]) -> None:
    labels = pool_labels(capacity)
    value = labels[pools.CAPACITY_LABEL]
    queued = bool(capacity.get("queuedProvisioning"))
    node = node_from({"metadata": {"name": "n", "labels": labels}, "spec": {}, "status": {}})
    assert node is not None and node.capacity == value  # the reconciler's slice shape refines on it
    assert slices.request_owned_labels(labels) is queued  # only queued pools' capacity belongs to a request
    # A JobSet pinned to this capacity by nodeSelector is off spot exactly when the capacity is not spot.
    assert spot_tiers.off_spot({"nodeSelector": labels}) is (value != tpu_workloads.SPOT_CAPACITY)


def test_the_jobset_builders_off_spot_affinity_is_what_the_rule_accepts() -> None:
    assert spot_tiers.off_spot({"affinity": not_on_spot_affinity()})
    assert not spot_tiers.off_spot({})
