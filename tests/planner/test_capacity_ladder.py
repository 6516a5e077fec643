"""On a capacity ladder a JobSet runs on the rung Kueue admitted it to: the ResourceFlavor's nodeLabels
(`gke-tpu-priority.io/capacity`) are in its pods' nodeSelector, so only slices of that capacity can take it back.

Freeing a spot slice for a JobSet admitted to the reservation flavor would evict a victim for nothing. Each case
has a control (the same fleet with the matching rung, or with a template that names no capacity) so the tests fail
when the planner ignores capacity.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from gke_tpu_priority.hotswap.config import HotswapConfig
from gke_tpu_priority.hotswap.kube.snapshot import node_from, shape_from_pod_spec
from gke_tpu_priority.hotswap.model import SliceShape
from gke_tpu_priority.hotswap.planner import plan
from gke_tpu_priority.hotswap.planner.actions import HoldVictim, Plan, RecordOp
from gke_tpu_priority.hotswap.slices import CAPACITY_LABEL
from testkit.builders import SHAPE_4X4, T0, Fleet, JobSetBuilder
from tests.planner.invariants import assert_invariants, idempotence_violations

CFG = HotswapConfig()
FAILED_AT = T0 - timedelta(minutes=1)


def rung(fleet: Fleet, capacity: str, *pools: str) -> Fleet:
    for pool in pools:
        for name in fleet.pools[pool]:
            fleet.nodes[name] = replace(fleet.nodes[name], capacity=capacity)
    return fleet


def run(fleet: Fleet) -> Plan:
    snapshot = fleet.snapshot()
    result = plan(snapshot, T0, CFG)
    assert_invariants(snapshot, result, CFG)
    assert idempotence_violations(snapshot, result, CFG) == []
    return result


def held(result: Plan) -> list[str]:
    return sorted(a.workload.name.split("-")[1] for a in result.actions if isinstance(a, HoldVictim))


def reserved(result: Plan) -> list[str]:
    return sorted(p for a in result.actions if isinstance(a, RecordOp) and a.op is not None for p in a.op.slices)


def ladder(preemptor_capacity: str | None, victim_rung: str, spare_rung: str | None = None) -> Fleet:
    """H (admitted to `preemptor_capacity`) on reservation slices r0+r1, r0 failed; L (lower) on `victim_rung`
    slice v0; optionally an idle slice s0 on `spare_rung`."""
    fleet = Fleet().slices("r0", "r1", "v0")
    rung(fleet, "reservation", "r0", "r1")
    rung(fleet, victim_rung, "v0")
    shape = replace(SHAPE_4X4, capacity=preemptor_capacity)
    high = fleet.run(JobSetBuilder("ml", "high").replicated_job("w", 2, shape), ["r0", "r1"], 1000)
    fleet.fail("r0", FAILED_AT).evict_pods(high, "r0", FAILED_AT)
    fleet.run(JobSetBuilder("ml", "low").replicated_job("w", 1, replace(SHAPE_4X4, capacity=victim_rung)), ["v0"], 10)
    if spare_rung is not None:
        rung(fleet.slices("s0"), spare_rung, "s0")
    return fleet


@pytest.mark.parametrize(
    ("preemptor", "victim", "takes"),
    [
        ("reservation", "spot", False),  # its pods select reservation nodes: the spot victim frees nothing it can use
        ("reservation", "reservation", True),  # control: the same rung
        (None, "spot", True),  # control: a flavor that does not split by capacity selects no capacity label
    ],
)
def test_victims_only_on_the_rung_the_preemptor_was_admitted_to(
    preemptor: str | None, victim: str, takes: bool
) -> None:
    result = run(ladder(preemptor, victim))
    assert held(result) == (["low"] if takes else [])
    assert reserved(result) == (["v0"] if takes else [])


@pytest.mark.parametrize(("spare", "taken"), [("spot", False), ("reservation", True)])
def test_a_spare_slice_on_another_rung_is_not_spare_for_it(spare: str, taken: bool) -> None:
    result = run(ladder("reservation", "spot", spare_rung=spare))
    assert reserved(result) == (["s0"] if taken else [])
    assert held(result) == []


def test_shape_matching_on_capacity() -> None:
    reservation = replace(SHAPE_4X4, capacity="reservation")
    spot = replace(SHAPE_4X4, capacity="spot")
    assert reservation.matches(reservation) and reservation.matches(SHAPE_4X4) and SHAPE_4X4.matches(spot)
    assert not reservation.matches(spot) and not spot.matches(reservation)
    assert reservation.key == spot.key  # grouping ignores capacity; matches refines


def test_the_io_layer_reads_capacity_from_node_labels_and_the_admitted_template() -> None:
    node = node_from({"metadata": {"name": "n", "labels": {CAPACITY_LABEL: "spot"}}, "spec": {}, "status": {}})
    assert node is not None and node.capacity == "spot"
    selector = {
        "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
        "cloud.google.com/gke-tpu-topology": "4x4",
        CAPACITY_LABEL: "reservation",
    }
    pod_spec = {"nodeSelector": selector, "containers": [{"resources": {"limits": {"google.com/tpu": "4"}}}]}
    assert shape_from_pod_spec(pod_spec) == SliceShape("tpu-v6e-slice", "4x4", 4, "reservation")
    del selector[CAPACITY_LABEL]
    assert shape_from_pod_spec(pod_spec) == SliceShape("tpu-v6e-slice", "4x4", 4, None)
