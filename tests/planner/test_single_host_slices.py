"""A GKE pool of single-host shapes holds one slice per VM; multi-host pools are one slice each."""

from __future__ import annotations

from datetime import timedelta

import pytest

from gke_tpu_priority.hotswap.annotations import HOSTNAME_LABEL, NODEPOOL_LABEL
from gke_tpu_priority.hotswap.config import HotswapConfig
from gke_tpu_priority.hotswap.model import SliceShape, TaintEffect
from gke_tpu_priority.hotswap.planner import plan
from gke_tpu_priority.hotswap.planner.actions import HoldVictim, Plan
from gke_tpu_priority.hotswap.planner.world import NOT_EXCLUSIVE
from gke_tpu_priority.hotswap.slices import SliceHealth, classify_slices, slice_key
from testkit.builders import SHAPE_4X4, T0, V6E, Fleet, JobSetBuilder, NodeBuilder, slice_nodes
from tests.planner.invariants import assert_invariants

CFG = HotswapConfig()
SHAPE_2X2 = SliceShape(V6E, "2x2", 4)


def test_single_host_pool_nodes_are_separate_slices() -> None:
    nodes = [NodeBuilder(f"small-{i}").pool("small").tpu("2x2").obj() for i in range(3)]
    assert [slice_key(n) for n in nodes] == ["small/small-0", "small/small-1", "small/small-2"]
    eight = NodeBuilder("wide-0").pool("wide").tpu("2x4", "ct6e-standard-8t").obj()
    assert slice_key(eight) == "wide/wide-0"


def test_multi_host_pool_is_one_slice() -> None:
    nodes = [b.obj() for b in slice_nodes("big", "4x4")]
    assert {slice_key(n) for n in nodes} == {"big"}
    two_vm = [b.obj() for b in slice_nodes("pair", "2x4", "ct6e-standard-4t")]
    assert len(two_vm) == 2 and {slice_key(n) for n in two_vm} == {"pair"}


def test_one_bad_single_host_vm_does_not_take_its_pool_mates_down() -> None:
    bad_since = T0 - timedelta(minutes=5)
    nodes = [NodeBuilder(f"small-{i}").pool("small").tpu("2x2") for i in range(3)]
    nodes[1].unreachable(bad_since)
    slices = classify_slices(
        [n.obj() for n in nodes], T0, timedelta(seconds=20), timedelta(seconds=120), ["google.com/tpu"]
    )
    assert {k: s.health for k, s in slices.items()} == {
        "small/small-0": SliceHealth.HEALTHY,
        "small/small-1": SliceHealth.UNHEALTHY,
        "small/small-2": SliceHealth.HEALTHY,
    }
    assert all(s.expected_hosts == 1 for s in slices.values())


def test_one_bad_host_takes_a_whole_multi_host_slice_down() -> None:
    builders = slice_nodes("big", "4x4")
    builders[2].taint("example.com/broken", TaintEffect.NO_SCHEDULE)
    slices = classify_slices(
        [b.obj() for b in builders], T0, timedelta(seconds=20), timedelta(seconds=120), ["google.com/tpu"]
    )
    assert list(slices) == ["big"] and slices["big"].health is SliceHealth.UNHEALTHY


# --- exclusive placement per VM on single-host slices ------------------------------------------------------------


def _disrupted_single_host(victim_topology_key: str, victim_shape: SliceShape = SHAPE_2X2) -> Plan:
    """H on two 2x2 slices (one fails); a lower JobSet on a third slice with exclusive placement on `key`."""
    topology = "4x4" if victim_shape is SHAPE_4X4 else "2x2"
    fleet = Fleet().slices("p0", "p1", topology="2x2").slices("v0", topology=topology)
    high = fleet.run(JobSetBuilder("ml", "high").replicated_job("w", 2, SHAPE_2X2), ["p0", "p1"], 1000)
    low = JobSetBuilder("ml", "low").replicated_job("w", 1, victim_shape).exclusive(victim_topology_key)
    fleet.run(low, ["v0"], 10)
    fleet.fail("p0", T0 - timedelta(minutes=1)).evict_pods(high, "p0", T0 - timedelta(minutes=1))
    snapshot = fleet.snapshot()
    result = plan(snapshot, T0, CFG)
    assert_invariants(snapshot, result, CFG)
    return result


def _held(result: Plan) -> list[str]:
    return sorted(a.workload.name.split("-")[1] for a in result.actions if isinstance(a, HoldVictim))


@pytest.mark.parametrize("key", [NODEPOOL_LABEL, HOSTNAME_LABEL])
def test_single_host_jobsets_exclusive_per_vm_or_per_pool_are_victims(key: str) -> None:
    # Per VM is what the workload template writes for single-host shapes: per pool would let one slice of one
    # JobSet keep every other VM of its pool idle. Both give each Job whole slices, so both may be moved.
    assert _held(_disrupted_single_host(key)) == ["low"]


def test_exclusive_per_vm_is_not_per_slice_for_a_multi_host_shape() -> None:
    result = _disrupted_single_host(HOSTNAME_LABEL, SHAPE_4X4)
    assert _held(result) == []
    assert [count for reason, count, _ in result.diagnostics.exclusions if reason == NOT_EXCLUSIVE] == [1]
