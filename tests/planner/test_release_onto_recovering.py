"""A held victim may go back onto a slice that is Recovering (repaired less than
`recoveryStabilization` ago). Waiting for Healthy left every repaired slice of a storm empty for the whole
stabilization while its victims waited. Preemptors still wait for
Healthy, and what admitted JobSets already wait for is theirs first. Each case has a control that differs in one
thing, so the tests fail when the rule is missing or too loose.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from gke_tpu_priority.hotswap.annotations import AnnotationKeys, format_time
from gke_tpu_priority.hotswap.config import HotswapConfig
from gke_tpu_priority.hotswap.model import JobSet
from gke_tpu_priority.hotswap.planner.actions import Plan, ReleaseReason, ReleaseVictim
from testkit.builders import T0, Fleet, JobSetBuilder, NodeBuilder, WorkloadBuilder
from tests.planner.test_capacity_ladder import run, rung  # run: plan at T0, default config, invariants checked

CFG = HotswapConfig()
KEYS = AnnotationKeys(CFG.annotation_domain)


def releases(result: Plan) -> dict[str, ReleaseReason]:
    return {a.workload.name.split("-")[1]: a.reason for a in result.actions if isinstance(a, ReleaseVictim)}


def hold(fleet: Fleet, js: JobSet, high: JobSet) -> None:
    """`js` held for `high` five minutes ago, its op done; Kueue evicted it (no admission)."""
    builder = WorkloadBuilder.from_obj(fleet.workload_of(js)).active(False)
    for key, value in {
        KEYS.held_by: f"ml/{high.name}/{high.uid}/0",
        KEYS.op_id: "op-1",
        KEYS.held_since: format_time(T0 - timedelta(minutes=5)),
    }.items():
        builder.annotation(key, value)
    fleet.set_workload(replace(builder.obj(), cluster_queue=None, conditions=()))


def repaired_fleet(back_s: float) -> tuple[Fleet, JobSet]:
    """A high JobSet runs on a0 and a1; r0, empty, was repaired `back_s` seconds ago; a low JobSet is held for
    the high one."""
    fleet = Fleet().slices("a0", "a1", "r0")
    for name in fleet.pools["r0"]:
        fleet.node(name, NodeBuilder(name).pool("r0").tpu().ready_since(T0 - timedelta(seconds=back_s)))
    high = fleet.run(JobSetBuilder("ml", "high").replicated_job("w", 2), ["a0", "a1"], 1000)
    hold(fleet, fleet.run(JobSetBuilder("ml", "low").replicated_job("w", 1), [], 10), high)
    return fleet, high


def test_a_held_victim_goes_back_onto_a_recovering_slice() -> None:
    fleet, _ = repaired_fleet(back_s=30)
    result = run(fleet)
    assert result.diagnostics.slices_recovering == 1
    assert releases(result) == {"low": ReleaseReason.CAPACITY}
    (release,) = (a for a in result.actions if isinstance(a, ReleaseVictim))
    assert KEYS.held_by in release.remove_annotations


def test_control_a_slice_still_down_releases_nobody() -> None:
    fleet, _ = repaired_fleet(back_s=30)
    fleet.fail("r0", T0 - timedelta(seconds=10))
    assert releases(run(fleet)) == {}


def test_what_an_admitted_jobset_waits_for_is_not_given_to_a_victim() -> None:
    """A JobSet Kueue admitted whose pods wait for a node binds on the repaired slice by itself: the victim would
    take it from under it."""
    fleet, _ = repaired_fleet(back_s=30)
    waiting = fleet.run(JobSetBuilder("ml", "mid").replicated_job("w", 1), [], 500)
    fleet.wait(waiting, T0 - timedelta(seconds=20))
    assert releases(run(fleet)) == {}


def test_control_a_jobset_waiting_for_another_shape_does_not_book_it() -> None:
    """The same waiting JobSet, but its pods already sit on a slice of their own: nothing is missing, nothing is
    booked, the victim goes back."""
    fleet, _ = repaired_fleet(back_s=30)
    fleet.slices("b0")
    fleet.run(JobSetBuilder("ml", "mid").replicated_job("w", 1), ["b0"], 500)
    assert releases(run(fleet)) == {"low": ReleaseReason.CAPACITY}


def test_a_recovering_spot_slice_is_left_to_spot_preemptors() -> None:
    """Spot VMs back from a reclamation are what JobSets starved on the spot rung take victims for at once: a victim
    released there would soon be held again. The victim runs on any capacity (its template names none), so only
    the rule keeps it off."""
    fleet, _ = repaired_fleet(back_s=30)
    rung(fleet, "spot", "r0")
    assert releases(run(fleet)) == {}


def test_control_a_recovering_reservation_slice_takes_the_victim() -> None:
    fleet, _ = repaired_fleet(back_s=30)
    rung(fleet, "reservation", "r0")
    assert releases(run(fleet)) == {"low": ReleaseReason.CAPACITY}
