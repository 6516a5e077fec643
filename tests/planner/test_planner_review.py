"""Table tests of the planner against its invariants and Kueue: minimality across shapes
(I7), release order (B.7(a)), held Workloads outside the view (I10) and `reclaimWithinCohort: Any`."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from gke_tpu_priority.hotswap.annotations import AnnotationKeys, format_time
from gke_tpu_priority.hotswap.config import HotswapConfig, ReleaseOnPreemptorGone, Scope
from gke_tpu_priority.hotswap.model import ClusterQueue, ClusterSnapshot, ConditionStatus, JobSet
from gke_tpu_priority.hotswap.planner import plan
from gke_tpu_priority.hotswap.planner.actions import HoldVictim, Plan, RecordOp, ReleaseReason, ReleaseVictim
from gke_tpu_priority.hotswap.planner.simulate import apply_actions
from gke_tpu_priority.hotswap.planner.world import (
    NO_OWNER,
    NODE_SELECTOR,
    NODE_WITHOUT_TPU_LABELS,
    NOT_ADMITTED,
    NOT_EXCLUSIVE,
)
from testkit.builders import SHAPE_2X4, T0, Fleet, JobSetBuilder, WorkloadBuilder
from tests.planner.invariants import assert_invariants, idempotence_violations
from tests.planner.test_planner_matrix import _fresh

CFG = HotswapConfig()
KEYS = AnnotationKeys(CFG.annotation_domain)
FAILED_AT = T0 - timedelta(minutes=1)


def run(snapshot: ClusterSnapshot, config: HotswapConfig = CFG) -> Plan:
    result = plan(snapshot, T0, config)
    assert_invariants(snapshot, result, config)
    assert idempotence_violations(snapshot, result, config) == []
    return result


def hold_annotations(preemptor: str = "ml/high/js-high/0", op_id: str = "op-1", since: object = None) -> dict[str, str]:
    at = T0 - timedelta(minutes=5) if since is None else since
    return {KEYS.held_by: preemptor, KEYS.op_id: op_id, KEYS.held_since: format_time(at)}  # type: ignore[arg-type]


def held_by_us(fleet: Fleet, js: JobSet, **kwargs: object) -> None:
    builder = WorkloadBuilder.from_obj(fleet.workload_of(js)).active(False)
    for key, value in hold_annotations(**kwargs).items():  # type: ignore[arg-type]
        builder.annotation(key, value)
    fleet.set_workload(builder.obj())


def releases(result: Plan) -> dict[str, ReleaseReason]:
    return {a.workload.key: a.reason for a in result.actions if isinstance(a, ReleaseVictim)}


# --- 8. held Workloads outside the view -------------------------------------------------------------------------


def test_held_workload_of_a_namespace_no_longer_configured_is_released() -> None:
    fleet = Fleet().slices("a0", "b0")
    fleet.run(JobSetBuilder("ml", "high").replicated_job("w", 1), ["a0"], 1000)
    old = fleet.run(JobSetBuilder("old", "low").replicated_job("w", 1), ["b0"], 10)
    held_by_us(fleet, old)
    config = CFG.model_copy(update={"namespaces": ("ml",)})
    result = run(fleet.snapshot(), config)
    wl = fleet.workload_of(old)
    assert releases(result) == {wl.key: ReleaseReason.OUT_OF_SCOPE}
    (release,) = (a for a in result.actions if isinstance(a, ReleaseVictim))
    assert set(release.remove_annotations) >= {KEYS.held_by, KEYS.op_id, KEYS.held_since}
    assert result.diagnostics.victims_released == 1 and result.diagnostics.held_workloads == 0


def test_held_workload_whose_jobset_is_gone_is_released() -> None:
    fleet = Fleet().slices("a0")
    fleet.run(JobSetBuilder("ml", "high").replicated_job("w", 1), ["a0"], 1000)
    stray = WorkloadBuilder("ml", "jobset-gone").priority(10).admitted("cq").active(False)
    for key, value in hold_annotations().items():
        stray.annotation(key, value)
    fleet.set_workload(stray.obj())
    result = run(fleet.snapshot())
    assert releases(result) == {"ml/jobset-gone": ReleaseReason.OUT_OF_SCOPE}


def test_held_workload_in_view_keeps_the_normal_rules() -> None:
    """Control: a held victim of an open op in a configured namespace stays held (E3)."""
    fleet = Fleet().slices("a0")
    low = fleet.run(JobSetBuilder("ml", "low").replicated_job("w", 1), ["a0"], 10)
    held_by_us(fleet, low)
    config = CFG.model_copy(update={"namespaces": ("ml",)})
    result = run(fleet.snapshot(), config)
    assert ReleaseReason.OUT_OF_SCOPE not in releases(result).values()
    assert not any(isinstance(a, HoldVictim) for a in result.actions)


# --- 5. reclaimWithinCohort: Any ------------------------------------------------------------------------------


def reclaim_fleet(any_queue: bool, borrowing: bool, admission_known: bool) -> Fleet:
    """`high` (1000) runs on a0 in queue `b`; `low` (10, queue `a`) is held for it with no pod; v0 is free."""
    fleet = Fleet().slices("a0", "v0")
    fleet.queues["a"] = ClusterQueue("a", "tpu", reclaim_any=any_queue)
    fleet.queues["b"] = ClusterQueue("b", "tpu", borrowing=borrowing)
    high = fleet.run(JobSetBuilder("ml", "high").replicated_job("w", 1), ["a0"], 1000, cluster_queue="b")
    low = fleet.run(JobSetBuilder("ml", "low").replicated_job("w", 1), [], 10, cluster_queue="a")
    held_by_us(fleet, low, preemptor=f"ml/high/{high.uid}/0")
    if not admission_known:  # Kueue evicted the held Workload: no admission, no queue
        fleet.set_workload(replace(fleet.workload_of(low), cluster_queue=None, conditions=()))
    return fleet


@pytest.mark.parametrize("admission_known", [True, False])
def test_release_is_deferred_while_reclaim_any_could_evict_a_higher_borrower(admission_known: bool) -> None:
    """`low`'s queue reclaims with `Any`; `high` borrows in the same cohort. Released onto free v0,
    `low` fits its queue's nominal quota and Kueue would evict `high` for it, irrespective of priority."""
    result = run(reclaim_fleet(any_queue=True, borrowing=True, admission_known=admission_known).snapshot())
    assert releases(result) == {}
    assert result.diagnostics.releases_deferred == 1


@pytest.mark.parametrize(("any_queue", "borrowing"), [(False, True), (True, False)])
def test_release_by_capacity_when_reclaim_cannot_evict_higher_work(any_queue: bool, borrowing: bool) -> None:
    fleet = reclaim_fleet(any_queue=any_queue, borrowing=borrowing, admission_known=True)
    result = run(fleet.snapshot())
    assert list(releases(result).values()) == [ReleaseReason.CAPACITY]
    assert result.diagnostics.releases_deferred == 0


def test_max_hold_still_releases_a_deferred_victim() -> None:
    fleet = reclaim_fleet(any_queue=True, borrowing=True, admission_known=False)
    low = fleet.workload_of(next(j for j in fleet.jobsets.values() if j.name == "low"))
    expired = format_time(T0 - CFG.max_hold - timedelta(seconds=1))
    fleet.set_workload(replace(low, annotations={**low.annotations, KEYS.held_since: expired}))
    assert list(releases(run(fleet.snapshot())).values()) == [ReleaseReason.MAX_HOLD]


def test_release_when_the_preemptor_is_gone_is_deferred_too() -> None:
    """`releaseOnPreemptorGone: Immediate`: the released victim would still reclaim from the higher borrower."""
    fleet = reclaim_fleet(any_queue=True, borrowing=True, admission_known=False)
    low = fleet.workload_of(next(j for j in fleet.jobsets.values() if j.name == "low"))
    fleet.set_workload(replace(low, annotations={**low.annotations, KEYS.held_by: "ml/gone/js-gone/0"}))
    config = CFG.model_copy(update={"release_on_preemptor_gone": ReleaseOnPreemptorGone.IMMEDIATE})
    result = run(fleet.snapshot(), config)
    assert releases(result) == {} and result.diagnostics.releases_deferred == 1


# --- 1. minimality across shapes (I7 per operation) -----------------------------------------------------------


def held_names(result: Plan) -> list[str]:
    return sorted(a.workload.name.split("-")[1] for a in result.actions if isinstance(a, HoldVictim))


def multi_shape_fleet() -> Fleet:
    """`high` spans two 4x4 slices and one 2x4 and loses one of each (p0, q0). `v` (10) runs on one 4x4 and one
    2x4 slice; `w` (10, started more recently, so preferred alone) on one 2x4 slice."""
    fleet = Fleet().slices("p0", "p1", "v4").slices("q0", "v2", "w2", topology="2x4")
    high = fleet.run(
        JobSetBuilder("ml", "high").replicated_job("big", 2).replicated_job("small", 1, SHAPE_2X4),
        ["p0", "p1", "q0"],
        1000,
    )
    fleet.run(JobSetBuilder("ml", "v").replicated_job("big", 1).replicated_job("small", 1, SHAPE_2X4), ["v4", "v2"], 10)
    fleet.run(
        JobSetBuilder("ml", "w").replicated_job("small", 1, SHAPE_2X4),
        ["w2"],
        10,
        admitted_at=T0 - timedelta(minutes=10),
    )
    fleet.fail("p0", FAILED_AT).evict_pods(high, "p0", FAILED_AT)
    fleet.fail("q0", FAILED_AT).evict_pods(high, "q0", FAILED_AT)
    return fleet


def test_victims_are_minimal_over_the_whole_operation_not_per_shape() -> None:
    """Per shape, `w` alone is the best 2x4 victim and `v` the only 4x4 one; but `v` frees a 2x4
    slice too, so `{v}` covers the deficit and holding `w` as well evicts a JobSet for nothing."""
    result = run(multi_shape_fleet().snapshot())
    assert held_names(result) == ["v"]
    (record,) = (a for a in result.actions if isinstance(a, RecordOp))
    assert (record.op.slices, record.op.kept) == (("v2", "v4"), ("p1",))


def test_per_shape_choice_stands_when_it_is_minimal() -> None:
    """Control: `w` is needed when `v` occupies no 2x4 slice."""
    fleet = Fleet().slices("p0", "p1", "v4").slices("q0", "w2", topology="2x4")
    high = fleet.run(
        JobSetBuilder("ml", "high").replicated_job("big", 2).replicated_job("small", 1, SHAPE_2X4),
        ["p0", "p1", "q0"],
        1000,
    )
    fleet.run(JobSetBuilder("ml", "v").replicated_job("big", 1), ["v4"], 10)
    fleet.run(JobSetBuilder("ml", "w").replicated_job("small", 1, SHAPE_2X4), ["w2"], 10)
    fleet.fail("p0", FAILED_AT).evict_pods(high, "p0", FAILED_AT)
    fleet.fail("q0", FAILED_AT).evict_pods(high, "q0", FAILED_AT)
    assert held_names(run(fleet.snapshot())) == ["v", "w"]


# --- 2. release order (B.7(a)) ---------------------------------------------------------------------------------


def release_order_fleet(free: int) -> tuple[Fleet, dict[str, str]]:
    """Held victims vb (50, one slice), vc (30, two), va (10, one), each held for `high` (placed, op done);
    `free` healthy 4x4 slices are free."""
    pools = [f"f{i}" for i in range(free)]
    fleet = Fleet().slices("h0", *pools)
    high = fleet.run(JobSetBuilder("ml", "high").replicated_job("w", 1), ["h0"], 1000)
    keys = {}
    for name, priority, replicas in (("vb", 50, 1), ("vc", 30, 2), ("va", 10, 1)):
        js = fleet.run(JobSetBuilder("ml", name).replicated_job("w", replicas), [], priority)
        held_by_us(fleet, js, preemptor=f"ml/high/{high.uid}/0")
        keys[name] = fleet.workload_of(js).key
    return fleet, keys


def test_a_lower_victim_never_takes_capacity_a_higher_held_victim_waits_for() -> None:
    """Two free slices; vb takes one. vc needs two and cannot be placed yet, so the last slice is
    booked for it: va, lower than vc, must not take it (README: released in priority order)."""
    fleet, keys = release_order_fleet(free=2)
    result = run(fleet.snapshot())
    assert releases(result) == {keys["vb"]: ReleaseReason.CAPACITY}


@pytest.mark.parametrize(("free", "released"), [(3, ["vb", "vc"]), (4, ["va", "vb", "vc"])])
def test_releases_go_in_priority_order_as_capacity_allows(free: int, released: list[str]) -> None:
    fleet, keys = release_order_fleet(free)
    result = run(fleet.snapshot())
    assert sorted(releases(result)) == sorted(keys[name] for name in released)


# --- 6. the admission fence is bounded per operation -----------------------------------------------------------


def _cascade(config: HotswapConfig, rounds: int) -> tuple[list[str], list[str]]:
    """Kueue admits one queued workload after another into the quota each fence hold frees (the slices stay at
    risk: the preemptor's pods have not bound). Returns who was fenced, in order, and the bound warnings."""
    fleet, _ = _fresh(priority=5, name="n0", config=config)
    fenced: list[str] = []
    notes: list[str] = []
    for i in range(rounds):
        now = T0 + timedelta(seconds=3 + 10 * i)
        snap = fleet.snapshot()
        result = plan(snap, now, config)
        assert_invariants(snap, result, config)
        holds = [a for a in result.actions if isinstance(a, HoldVictim)]
        assert all(h.fenced for h in holds)
        fenced += [h.workload.name.split("-")[1] for h in holds]
        notes += [e.message for e in result.events if "its bound" in e.message]
        state = apply_actions(snap, result.actions, now)
        fleet.workloads = {w.uid: w for w in state.workloads}
        for hold in holds:  # Kueue evicts the fenced workload: its quota is free for the next queue head
            wl = next(w for w in fleet.workloads.values() if w.uid == hold.workload.uid)
            fleet.set_workload(
                WorkloadBuilder.from_obj(wl)
                .condition("QuotaReserved", ConditionStatus.FALSE, "Pending", now)
                .condition("Admitted", ConditionStatus.FALSE, "Pending", now)
                .condition("Evicted", ConditionStatus.TRUE, "Deactivated", now)
                .obj()
            )
            fleet.run(JobSetBuilder("ml", f"n{i + 1}").replicated_job("w", 1), [], 5, admitted_at=now)
    return fenced, notes


def test_the_admission_fence_cascade_is_bounded_per_operation() -> None:
    """Each fence hold frees quota Kueue gives the next queued workload, which the next pass fenced
    again for as long as the reserved slices stayed at risk. The op now stops at `fenceHoldsPerSlice` per
    reserved slice (2 x {p1, v0} = 4), says so once, and records the count."""
    fenced, notes = _cascade(CFG, rounds=8)
    assert len(fenced) == 2 * 2
    assert fenced == sorted(fenced, key=lambda n: int(n[1:]))  # in admission order, one newcomer after another
    assert len(notes) == 1


def test_the_fence_bound_is_recorded_in_the_op_and_announced_once() -> None:
    config = CFG.model_copy(update={"fence_holds_per_slice": 1})
    fleet, _ = _fresh(priority=5, name="n0", config=config)
    snap = fleet.snapshot()
    result = plan(snap, T0 + timedelta(seconds=3), config)
    (record,) = (a for a in result.actions if isinstance(a, RecordOp))
    assert record.op.fenced == 1 and "fenced=1;" in record.annotations()[KEYS.op]
    fenced, notes = _cascade(config, rounds=5)
    assert len(fenced) == 2
    assert len(notes) == 1  # announced in the pass that reached the bound, not in every later one


def test_fence_bound_zero_turns_the_fence_off() -> None:
    fenced, _ = _cascade(CFG.model_copy(update={"fence_holds_per_slice": 0}), rounds=3)
    assert fenced == []


# --- Also: silent snapshot exclusions are counted ---------------------------------------------------------------


def test_silent_snapshot_exclusions_are_counted_with_examples() -> None:
    fleet = Fleet().slices("a0", "b0", "c0")
    fleet.run(JobSetBuilder("ml", "ok").replicated_job("w", 1), ["a0"], 10)
    fleet.run(JobSetBuilder("ml", "plain").replicated_job("w", 1).not_exclusive(), ["b0"], 10)
    fleet.run(JobSetBuilder("ml", "static").replicated_job("w", 1).node_selector_strategy(), [], 10)
    queued = fleet.run(JobSetBuilder("ml", "stale").replicated_job("w", 1), ["c0"], 10)
    fleet.set_workload(replace(fleet.workload_of(queued), conditions=()))  # pods run, Workload not Admitted
    fleet.set_workload(WorkloadBuilder("ml", "ownerless").priority(5).obj())
    unlabeled = replace(fleet.nodes["a0-0"], name="bare-0", node_pool="bare", accelerator=None, topology=None)
    fleet.nodes["bare-0"] = unlabeled
    exclusions = {reason: (n, examples) for reason, n, examples in run(fleet.snapshot()).diagnostics.exclusions}
    assert exclusions == {
        NOT_EXCLUSIVE: (1, ("ml/plain",)),
        NODE_SELECTOR: (1, ("ml/static",)),
        NOT_ADMITTED: (1, ("ml/stale",)),
        NO_OWNER: (1, ("ml/ownerless",)),
        NODE_WITHOUT_TPU_LABELS: (1, ("bare-0",)),
    }


def test_a_clean_snapshot_reports_no_exclusions() -> None:
    fleet = Fleet().slices("a0")
    fleet.run(JobSetBuilder("ml", "ok").replicated_job("w", 1), ["a0"], 10)
    assert run(fleet.snapshot()).diagnostics.exclusions == ()


def test_a_scope_shrink_leaves_held_victims_under_the_release_rules() -> None:
    """Control for 11.8: `scope` (unlike `namespaces`) filters victims, not units, so a victim held for a
    preemptor of another ClusterQueue before `scope: ClusterQueue` is still released on capacity."""
    fleet = Fleet().slices("a0", "v0")
    fleet.queue("qa", "tpu").queue("qb", "tpu")
    high = fleet.run(JobSetBuilder("ml", "high").replicated_job("w", 1), ["a0"], 1000, cluster_queue="qa")
    low = fleet.run(JobSetBuilder("ml", "low").replicated_job("w", 1), [], 10, cluster_queue="qb")
    held_by_us(fleet, low, preemptor=f"ml/high/{high.uid}/0")
    config = CFG.model_copy(update={"scope": Scope.CLUSTER_QUEUE})
    assert releases(run(fleet.snapshot(), config)) == {fleet.workload_of(low).key: ReleaseReason.CAPACITY}
