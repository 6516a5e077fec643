"""Slices made for a GKE ProvisioningRequest (flex-start with queued provisioning) belong to that request.

Evicting the workload admitted through the request gives the nodes back to GKE (Kueue deletes the request on
eviction), so such a slice is never spare capacity, its occupant is never a victim, and a JobSet running on one
is never a preemptor (its pods select the request's capacity; its restart is Kueue's and GKE's business). Each
scenario is checked against its control twin on ordinary slices, so the tests fail when the rule is dropped.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from gke_tpu_priority.hotswap.config import HotswapConfig
from gke_tpu_priority.hotswap.kube.snapshot import node_from
from gke_tpu_priority.hotswap.model import ClusterSnapshot, JobSet, PodPhase, Taint, TaintEffect
from gke_tpu_priority.hotswap.planner import plan
from gke_tpu_priority.hotswap.planner.actions import HoldVictim, Plan, RecordOp
from gke_tpu_priority.hotswap.planner.priority_inversions import find_inversions
from gke_tpu_priority.hotswap.planner.victims import why_not_victim
from gke_tpu_priority.hotswap.planner.world import build_world
from gke_tpu_priority.hotswap.slices import (
    CAPACITY_LABEL,
    FLEX_START_LABEL,
    PROVISIONING_REQUEST_LABEL,
    QUEUED_CAPACITY,
    QUEUED_LABEL,
    QUEUED_TAINT,
    SliceHealth,
    classify_slices,
    request_owned_labels,
)
from testkit.builders import T0, Fleet, JobSetBuilder, PodBuilder
from tests.planner.invariants import assert_invariants, idempotence_violations

CFG = HotswapConfig()
FAILED_AT = T0 - timedelta(minutes=1)
_MARKER = Taint(QUEUED_TAINT, TaintEffect.NO_SCHEDULE, "true")


def queued(fleet: Fleet, *pools: str) -> Fleet:
    """Turn `pools` into queued-provisioning slices, as `node_from` sees GKE's nodes: marked, with the taint."""
    for pool in pools:
        for name in fleet.pools[pool]:
            node = fleet.nodes[name]
            fleet.nodes[name] = replace(node, request_owned=True, taints=(*node.taints, _MARKER))
    return fleet


def run(snapshot: ClusterSnapshot) -> Plan:
    result = plan(snapshot, T0, CFG)
    assert_invariants(snapshot, result, CFG)
    assert idempotence_violations(snapshot, result, CFG) == []
    return result


def held(result: Plan) -> list[str]:
    return sorted(a.workload.name.split("-")[1] for a in result.actions if isinstance(a, HoldVictim))


def reserved(result: Plan) -> list[str]:
    return sorted(p for a in result.actions if isinstance(a, RecordOp) and a.op is not None for p in a.op.slices)


def disrupted(fleet: Fleet) -> JobSet:
    """H on p0+p1 at priority 1000; p0 failed and H's pods there were evicted."""
    fleet.slices("p0", "p1")
    high = fleet.run(JobSetBuilder("ml", "high").replicated_job("w", 2), ["p0", "p1"], 1000)
    fleet.fail("p0", FAILED_AT).evict_pods(high, "p0", FAILED_AT)
    return high


def low(fleet: Fleet, name: str, pool: str, priority: int = 10) -> JobSet:
    return fleet.run(JobSetBuilder("ml", name).replicated_job("w", 1), [pool], priority)


# --- labels and classification --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("labels", "owned"),
    [
        ({QUEUED_LABEL: "true"}, True),
        ({CAPACITY_LABEL: QUEUED_CAPACITY}, True),
        ({PROVISIONING_REQUEST_LABEL: "ml/train-42"}, True),
        ({FLEX_START_LABEL: "true"}, False),  # flex-start without queued provisioning: an ordinary pool
        ({CAPACITY_LABEL: "flex-start", FLEX_START_LABEL: "true"}, False),
        ({QUEUED_LABEL: "false"}, False),
        ({CAPACITY_LABEL: "reservation"}, False),
        ({}, False),
    ],
)
def test_which_labels_mark_request_owned_nodes(labels: dict[str, str], owned: bool) -> None:
    assert request_owned_labels(labels) is owned
    node = node_from({"metadata": {"name": "n", "labels": labels}, "spec": {}, "status": {}})
    assert node is not None and node.request_owned is owned


def test_the_queued_taint_alone_marks_a_node_and_is_no_health_problem() -> None:
    taint = {"key": QUEUED_TAINT, "value": "true", "effect": "NoSchedule"}
    node = node_from(
        {
            "metadata": {"name": "n", "labels": {"cloud.google.com/gke-nodepool": "q"}},
            "spec": {"taints": [taint]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]},
        }
    )
    assert node is not None and node.request_owned
    fleet = queued(Fleet().slices("q0", "r0"), "q0")
    slices = classify_slices(
        fleet.nodes.values(), T0, timedelta(seconds=20), timedelta(seconds=120), ["google.com/tpu"]
    )
    assert slices["q0"].health is SliceHealth.HEALTHY and slices["q0"].request_owned and not slices["q0"].usable
    assert slices["r0"].usable and not slices["r0"].request_owned


def test_the_world_knows_request_owned_slices_and_keeps_them_out_of_idle() -> None:
    fleet = queued(Fleet().slices("q0", "r0"), "q0")
    world = build_world(fleet.snapshot(), T0, CFG)
    assert world.request_owned == {"q0"} and world.idle == ["r0"]
    assert world.slices["q0"].health is SliceHealth.HEALTHY  # the marker taint is tolerated without config


# --- spare capacity -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("request_owned", [True, False])
def test_a_healthy_empty_queued_slice_is_not_spare_for_a_preemptor(request_owned: bool) -> None:
    fleet = Fleet()
    disrupted(fleet)
    fleet.slices("q0")
    if request_owned:
        queued(fleet, "q0")
    result = run(fleet.snapshot())
    assert reserved(result) == ([] if request_owned else ["q0"])
    assert held(result) == []


def test_a_victim_is_held_rather_than_a_queued_slice_taken() -> None:
    fleet = Fleet()
    disrupted(fleet)
    queued(fleet.slices("q0", "v0"), "q0")
    low(fleet, "low", "v0")
    result = run(fleet.snapshot())
    assert held(result) == ["low"] and reserved(result) == ["v0"]


# --- victims ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("request_owned", [True, False])
def test_a_low_jobset_on_queued_slices_is_never_a_victim_even_as_the_only_candidate(request_owned: bool) -> None:
    fleet = Fleet()
    disrupted(fleet)
    fleet.slices("q0")
    if request_owned:
        queued(fleet, "q0")
    low(fleet, "low", "q0")
    result = run(fleet.snapshot())
    assert held(result) == ([] if request_owned else ["low"])
    assert reserved(result) == ([] if request_owned else ["q0"])


def test_reservation_and_spot_victims_next_to_queued_slices_work_as_before() -> None:
    fleet = Fleet()
    disrupted(fleet)
    fleet.slices("q0", "v0")
    queued(fleet, "q0")
    low(fleet, "lowest", "q0", priority=1)  # the preferred victim on ordinary slices
    low(fleet, "spot", "v0", priority=10)
    result = run(fleet.snapshot())
    assert held(result) == ["spot"] and reserved(result) == ["v0"]


# --- preemptors on request capacity ---------------------------------------------------------------------------


@pytest.mark.parametrize("request_owned", [True, False])
def test_a_jobset_on_queued_slices_that_loses_one_gets_no_hotswap(request_owned: bool) -> None:
    fleet = Fleet().slices("q0", "q1", "r0")
    if request_owned:
        queued(fleet, "q0", "q1")
    high = fleet.run(JobSetBuilder("ml", "high").replicated_job("w", 2), ["q0", "q1"], 1000)
    fleet.fail("q0", FAILED_AT).evict_pods(high, "q0", FAILED_AT)
    if request_owned:
        queued(fleet, "q0")  # `fail` rebuilt q0's failing host
    result = run(fleet.snapshot())
    assert reserved(result) == ([] if request_owned else ["r0"])


def test_a_jobset_whose_pods_departed_from_a_queued_slice_gets_no_hotswap() -> None:
    fleet = Fleet().slices("q0", "r0")
    queued(fleet, "q0")
    high = fleet.run(JobSetBuilder("ml", "high").replicated_job("w", 1), ["q0"], 1000)
    fleet.fail("q0", FAILED_AT)
    queued(fleet, "q0")
    fleet.depart_pods(high, "q0", FAILED_AT, failed=True)
    world = build_world(fleet.snapshot(), T0, CFG)
    assert world.slices["q0"].health is SliceHealth.UNHEALTHY and world.slices["q0"].request_owned
    assert reserved(run(fleet.snapshot())) == []


@pytest.mark.parametrize("request_owned", [True, False])
def test_a_starved_jobset_on_queued_slices_is_no_starvation_preemptor(request_owned: bool) -> None:
    fleet = Fleet().slices("q0", "v0")
    if request_owned:
        queued(fleet, "q0")
    waited = T0 - CFG.starvation_grace - timedelta(seconds=30)
    high = fleet.run(JobSetBuilder("ml", "high").replicated_job("w", 2), ["q0"], 1000, admitted_at=waited)
    fleet.wait(high, waited, pods=1)
    low(fleet, "low", "v0")
    result = run(fleet.snapshot())
    assert held(result) == ([] if request_owned else ["low"])


def test_why_not_victim_names_request_capacity_for_every_caller() -> None:
    """The fence, op extensions and inversions ask `why_not_victim` directly, without `candidate_pools`."""
    fleet = queued(Fleet().slices("q0", "v0"), "q0")
    on_queued, ordinary = low(fleet, "queued", "q0"), low(fleet, "ordinary", "v0")
    world = build_world(fleet.snapshot(), T0, CFG)
    assert why_not_victim(world, world.units[on_queued.uid], set(), set()) == "runs on ProvisioningRequest capacity"
    assert why_not_victim(world, world.units[ordinary.uid], set(), set()) is None


@pytest.mark.parametrize("request_owned", [True, False])
def test_an_inversion_on_a_queued_slice_is_not_resolved_by_evicting_its_occupant(request_owned: bool) -> None:
    fleet = Fleet().slices("q0", "p2")
    if request_owned:
        queued(fleet, "q0")
    admitted = T0 - timedelta(minutes=2)
    high = fleet.run(JobSetBuilder("ml", "high").replicated_job("workers", 1), [], 1000, admitted_at=admitted)
    lower = fleet.run(JobSetBuilder("ml", "lower").replicated_job("workers", 1), [], 100, admitted_at=admitted)
    for js, host in ((high, 0), (lower, 1)):
        pod = PodBuilder(js.namespace, f"{js.name}-q0", js.name).job("workers", 0).attempt(js.restarts)
        fleet.pods.append(pod.on(fleet.pools["q0"][host], "q0").phase(PodPhase.RUNNING).priority(js.pod_priority).obj())
        for i in range(3):
            waiting = PodBuilder(js.namespace, f"{js.name}-pending-{i}", js.name).job("workers", 0)
            fleet.pods.append(waiting.attempt(js.restarts).priority(js.pod_priority).obj())
    world = build_world(fleet.snapshot(), T0, CFG)
    assert [i.pool for i in find_inversions(world)] == ([] if request_owned else ["q0"])
    assert held(plan(fleet.snapshot(), T0, CFG)) == ([] if request_owned else ["lower"])


# --- tiers that may not preempt (priorities[].preempts: false -> preemptorMinPriority) ----------------------------


@pytest.mark.parametrize("floor", [None, 500, 1000, 1001])
def test_a_tier_below_the_preemptor_floor_takes_no_victims(floor: int | None) -> None:
    """H (Workload priority 1000) lost p0; a lower JobSet on v0 is the only way back. Below the floor, H waits."""
    fleet = Fleet()
    disrupted(fleet)
    fleet.slices("v0")
    low(fleet, "low", "v0")
    cfg = HotswapConfig(preemptor_min_priority=floor)
    snapshot = fleet.snapshot()
    result = plan(snapshot, T0, cfg)
    assert_invariants(snapshot, result, cfg)
    may_preempt = floor is None or floor <= 1000
    assert held(result) == (["low"] if may_preempt else [])
    assert reserved(result) == (["v0"] if may_preempt else [])
