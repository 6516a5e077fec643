"""On a capacity ladder, a held victim whose own rung has no free slice goes back to Kueue when its
ClusterQueue has queued-provisioning quota free for it (`ReleaseReason.QUEUED_CAPACITY`).

Waiting for a reservation or spot slice kept the victim out of Kueue's queue while the queued flex-start rung's
quota stood idle (docs/benchmarks.md measures the difference). Each case has a control that
differs in one thing, so the tests fail when the rule is missing or too loose.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from gke_tpu_priority.hotswap.annotations import AnnotationKeys, format_time
from gke_tpu_priority.hotswap.config import HotswapConfig
from gke_tpu_priority.hotswap.model import ClusterQueue, ConditionStatus, JobSet
from gke_tpu_priority.hotswap.planner import plan
from gke_tpu_priority.hotswap.planner.actions import HoldVictim, Plan, ReleaseReason, ReleaseVictim
from gke_tpu_priority.hotswap.planner.simulate import apply_actions
from testkit.builders import T0, Fleet, JobSetBuilder, WorkloadBuilder
from tests.planner.invariants import assert_invariants
from tests.planner.test_capacity_ladder import run  # plan at T0 with the default config, invariants checked
from tests.planner.test_planner_matrix import disrupted_fleet

CFG = HotswapConfig()
KEYS = AnnotationKeys(CFG.annotation_domain)
SLICE_CHIPS = 16  # a v6e 4x4 slice


def releases(result: Plan) -> dict[str, ReleaseReason]:
    return {a.workload.name.split("-")[1]: a.reason for a in result.actions if isinstance(a, ReleaseVictim)}


def hold(fleet: Fleet, js: JobSet, high: JobSet, queue: str | None = "cq") -> None:
    """`js` held for `high` five minutes ago (its op done: no open op keeps it, E3); Kueue evicted it, so
    its Workload has no admission; `queue` is the ClusterQueue the hold recorded."""
    builder = WorkloadBuilder.from_obj(fleet.workload_of(js)).active(False)
    annotations = {
        KEYS.held_by: f"ml/{high.name}/{high.uid}/0",
        KEYS.op_id: "op-1",
        KEYS.held_since: format_time(T0 - timedelta(minutes=5)),
    }
    if queue is not None:
        annotations[KEYS.held_queue] = queue
    for key, value in annotations.items():
        builder.annotation(key, value)
    fleet.set_workload(replace(builder.obj(), cluster_queue=None, conditions=()))


def full_fleet(room_slices: int, *lows: tuple[str, int], queue: str | None = "cq") -> Fleet:
    """Two slices, both busy with a running high JobSet; each (name, priority) of `lows` held for it; the
    ClusterQueue `cq` has `room_slices` slices' worth of queued-provisioning quota free."""
    fleet = Fleet().slices("a0", "a1")
    fleet.queues["cq"] = ClusterQueue("cq", "tpu", queued_room_chips=room_slices * SLICE_CHIPS)
    high = fleet.run(JobSetBuilder("ml", "high").replicated_job("w", 2), ["a0", "a1"], 1000)
    for name, priority in lows:
        hold(fleet, fleet.run(JobSetBuilder("ml", name).replicated_job("w", 1), [], priority), high, queue)
    return fleet


def test_a_held_victim_goes_back_to_kueue_when_its_queue_has_queued_provisioning_room() -> None:
    result = run(full_fleet(1, ("low", 10)))
    assert releases(result) == {"low": ReleaseReason.QUEUED_CAPACITY}
    (release,) = (a for a in result.actions if isinstance(a, ReleaseVictim))
    assert KEYS.held_queue in release.remove_annotations and KEYS.held_by in release.remove_annotations


def test_without_room_it_waits_for_a_slice_as_before() -> None:
    assert releases(run(full_fleet(0, ("low", 10)))) == {}


def test_room_smaller_than_the_victim_does_not_release_it() -> None:
    fleet = Fleet().slices("a0", "a1")
    fleet.queues["cq"] = ClusterQueue("cq", "tpu", queued_room_chips=SLICE_CHIPS)
    high = fleet.run(JobSetBuilder("ml", "high").replicated_job("w", 2), ["a0", "a1"], 1000)
    hold(fleet, fleet.run(JobSetBuilder("ml", "wide").replicated_job("w", 2), [], 10), high)
    assert releases(run(fleet)) == {}


def test_a_hold_that_recorded_no_queue_is_not_released_into_one() -> None:
    assert releases(run(full_fleet(4, ("low", 10), queue=None))) == {}


def test_a_hold_that_recorded_an_unknown_queue_is_not_released() -> None:
    assert releases(run(full_fleet(4, ("low", 10), queue="gone"))) == {}


def test_room_for_one_releases_the_higher_priority_victim_first() -> None:
    result = run(full_fleet(1, ("low", 10), ("mid", 500)))
    assert releases(result) == {"mid": ReleaseReason.QUEUED_CAPACITY}
    both = run(full_fleet(2, ("low", 10), ("mid", 500)))
    assert releases(both) == {"low": ReleaseReason.QUEUED_CAPACITY, "mid": ReleaseReason.QUEUED_CAPACITY}


def test_a_recent_release_kueue_has_not_admitted_yet_counts_against_the_room() -> None:
    fleet = full_fleet(1, ("low", 10))
    settling = fleet.run(JobSetBuilder("ml", "back").replicated_job("w", 1), [], 10)
    wl = WorkloadBuilder.from_obj(fleet.workload_of(settling)).annotation(
        KEYS.released_at, format_time(T0 - timedelta(seconds=5))
    )
    fleet.set_workload(replace(wl.obj(), cluster_queue=None, conditions=()))
    assert releases(run(fleet)) == {}
    # Control: once Kueue reserved its quota (QuotaReserved), the room the ClusterQueue reports is what is left.
    admitted = WorkloadBuilder.from_obj(fleet.workload_of(settling)).condition(
        "QuotaReserved", ConditionStatus.TRUE, "QuotaReserved"
    )
    fleet.set_workload(admitted.obj())
    assert releases(run(fleet)) == {"low": ReleaseReason.QUEUED_CAPACITY}


def test_a_victim_of_an_open_operation_stays_held_until_its_preemptor_is_placed() -> None:
    """E3 comes first: until the preemptor runs, a released victim could take the slice it was held for."""
    fleet, _high = disrupted_fleet({"low": 10})
    fleet.queues["cq"] = ClusterQueue("cq", "tpu", queued_room_chips=4 * SLICE_CHIPS)
    snapshot = fleet.snapshot()
    state = apply_actions(snapshot, plan(snapshot, T0, CFG).actions, T0)
    (low,) = (w for w in state.workloads if w.name.split("-")[1] == "low")
    assert not low.active and low.annotations[KEYS.held_queue] == "cq"
    later = plan(state, T0 + timedelta(minutes=10), CFG)
    assert_invariants(state, later, CFG)
    assert not any(isinstance(a, ReleaseVictim) for a in later.actions)


def test_a_hold_records_the_queue_the_victim_was_admitted_to() -> None:
    fleet = Fleet().slices("a0", "a1", "b0")
    fleet.queues["cq"] = ClusterQueue("cq", "tpu")
    high = fleet.run(JobSetBuilder("ml", "high").replicated_job("w", 2), ["a0", "a1"], 1000)
    fleet.fail("a0", T0 - timedelta(minutes=1)).evict_pods(high, "a0", T0 - timedelta(minutes=1))
    fleet.run(JobSetBuilder("ml", "low").replicated_job("w", 1), ["b0"], 10, cluster_queue="cq")
    (held,) = (a for a in run(fleet).actions if isinstance(a, HoldVictim))
    assert held.set_annotations[KEYS.held_queue] == "cq"
