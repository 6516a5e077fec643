"""Slice priority inversions (docs/planner.md): lower-priority work sharing the slice where a higher-priority JobSet
waits for its followers is held, after `inversionGrace`, as an op for the higher one."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gke_tpu_priority.hotswap.annotations import AnnotationKeys, OpRecord
from gke_tpu_priority.hotswap.config import HotswapConfig
from gke_tpu_priority.hotswap.model import ClusterSnapshot, JobSet, PodPhase
from gke_tpu_priority.hotswap.planner import plan
from gke_tpu_priority.hotswap.planner.actions import ClearOp, EventReason, HoldVictim, RecordOp
from gke_tpu_priority.hotswap.planner.simulate import apply_actions
from testkit.builders import T0, Fleet, JobSetBuilder, PodBuilder, WorkloadBuilder
from tests.planner.invariants import assert_invariants, convergence_violations, idempotence_violations

CONFIG = HotswapConfig()
KEYS = AnnotationKeys(CONFIG.annotation_domain)
GRACE = CONFIG.inversion_grace


def place(fleet: Fleet, js: JobSet, pool: str, hosts: list[int], pending: int, running: bool = True) -> None:
    """Pods of `js`'s current attempt bound to `hosts` of `pool`, and `pending` unscheduled followers."""
    for i, host in enumerate(hosts):
        pod = PodBuilder(js.namespace, f"{js.name}-{pool}-{i}", js.name).job("workers", 0).attempt(js.restarts)
        pod.on(fleet.pools[pool][host], pool).phase(PodPhase.RUNNING if running else PodPhase.PENDING)
        fleet.pods.append(pod.priority(js.pod_priority).obj())
    for i in range(pending):
        pod = PodBuilder(js.namespace, f"{js.name}-pending-{i}", js.name).job("workers", 0).attempt(js.restarts)
        fleet.pods.append(pod.priority(js.pod_priority).obj())


def jobset(fleet: Fleet, name: str, priority: int, admitted: datetime, pod_priority: int | None = None) -> JobSet:
    return fleet.run(
        JobSetBuilder("ml", name).replicated_job("workers", 1),
        [],
        priority,
        admitted_at=admitted,
        pod_priority=pod_priority,
    )


def inversion(
    ago: timedelta = timedelta(minutes=2), high: int = 1000, low: int = 100, low_pod_priority: int | None = None
) -> tuple[Fleet, JobSet, JobSet]:
    """`high`'s leader and `low`'s leader share pool p1; each waits for three followers."""
    fleet = Fleet().slices("p1", "p2")
    h = jobset(fleet, "high", high, T0 - ago)
    lo = jobset(fleet, "low", low, T0 - ago, low_pod_priority)
    place(fleet, h, "p1", [0], pending=3)
    place(fleet, lo, "p1", [1], pending=3)
    return fleet, h, lo


def holds(snapshot: ClusterSnapshot, config: HotswapConfig = CONFIG, now: datetime = T0) -> list[HoldVictim]:
    result = plan(snapshot, now, config)
    assert_invariants(snapshot, result, config)
    return [a for a in result.actions if isinstance(a, HoldVictim)]


def test_inversion_past_grace_holds_the_lower_jobset_as_an_op_for_the_higher() -> None:
    fleet, h, lo = inversion()
    snapshot = fleet.snapshot()
    result = plan(snapshot, T0, CONFIG)
    assert_invariants(snapshot, result, CONFIG)
    held = [a for a in result.actions if isinstance(a, HoldVictim)]
    assert [(a.workload.key, a.preemptor.key) for a in held] == [(fleet.workload_of(lo).key, fleet.workload_of(h).key)]
    record = next(a for a in result.actions if isinstance(a, RecordOp))
    op = record.op
    assert op is not None and op.slices == ("p1",) and op.victims == (fleet.workload_of(lo).key,)
    assert op.since == T0
    reasons = [(e.reason, e.involved.name) for e in result.events]
    assert (EventReason.INVERSION_RESOLVED, "high") in reasons
    assert (EventReason.VICTIM_HELD, "low") in reasons
    assert result.diagnostics.ops_inversion_victims == 1
    assert result.diagnostics.victims_held == 1
    assert idempotence_violations(snapshot, result, CONFIG) == []


def test_inversion_within_grace_is_left_alone_and_wakes_the_planner_when_it_is_due() -> None:
    fleet, _, _ = inversion(ago=GRACE - timedelta(seconds=5))
    snapshot = fleet.snapshot()
    result = plan(snapshot, T0, CONFIG)
    assert result.actions == ()
    assert result.next_wakeup == T0 + timedelta(seconds=5)
    later = plan(snapshot, T0 + timedelta(seconds=5), CONFIG)
    assert [a.workload.name for a in later.actions if isinstance(a, HoldVictim)] == [
        fleet.workload_of(next(j for j in fleet.jobsets.values() if j.name == "low")).name
    ]


def test_inversion_grace_is_configurable_and_zero_acts_at_once() -> None:
    fleet, _, _ = inversion(ago=timedelta(seconds=1))
    assert holds(fleet.snapshot()) == []
    assert len(holds(fleet.snapshot(), CONFIG.model_copy(update={"inversion_grace": timedelta(0)}))) == 1


def test_equal_priority_sharing_a_slice_is_not_an_inversion() -> None:
    fleet, _, _ = inversion(high=500, low=500)
    result = plan(fleet.snapshot(), T0, CONFIG)
    assert result.actions == () and result.events == ()


def test_lower_kueue_priority_with_equal_pod_priority_is_not_held() -> None:
    fleet, _, _ = inversion(low_pod_priority=1000)  # I1 needs strictly lower under both priorities
    assert holds(fleet.snapshot()) == []


def test_a_higher_priority_occupant_is_never_a_victim() -> None:
    fleet, h, lo = inversion()
    # A third, lower still JobSet also squats in p1; the placed high-priority one in p2 is untouched.
    low2 = jobset(fleet, "lowest", 10, T0 - timedelta(minutes=2))
    place(fleet, low2, "p1", [2], pending=3)
    top = fleet.run(JobSetBuilder("ml", "top").replicated_job("workers", 1), ["p2"], 5000)
    held = {a.workload.key for a in holds(fleet.snapshot())}
    assert held == {fleet.workload_of(lo).key, fleet.workload_of(low2).key}
    assert fleet.workload_of(h).key not in held and fleet.workload_of(top).key not in held


def test_a_placed_higher_jobset_is_no_inversion() -> None:
    fleet = Fleet().slices("p1")
    fleet.run(JobSetBuilder("ml", "high").replicated_job("workers", 1), ["p1"], 1000)
    lo = jobset(fleet, "low", 100, T0 - timedelta(minutes=5))
    place(fleet, lo, "p1", [], pending=4)  # nothing of low is bound: it just waits
    assert holds(fleet.snapshot()) == []


def test_protected_victim_blocks_the_inversion_with_a_warning_and_no_hold() -> None:
    fleet, _, lo = inversion()
    wl = fleet.workload_of(lo)
    fleet.set_workload(WorkloadBuilder.from_obj(wl).annotation(KEYS.protect, "true").obj())
    result = plan(fleet.snapshot(), T0, CONFIG)
    assert result.actions == ()
    blocked = [e for e in result.events if e.reason is EventReason.BLOCKED]
    assert len(blocked) == 1 and "protected" in blocked[0].message and blocked[0].involved.name == "high"


def test_rate_limited_victim_is_not_held() -> None:
    fleet, _, lo = inversion()
    wl = fleet.workload_of(lo)
    history = ",".join(f"2026-09-01T{11 - i:02d}:30:00Z" for i in range(CONFIG.max_holds_per_window))
    fleet.set_workload(WorkloadBuilder.from_obj(wl).annotation(KEYS.hold_history, history).obj())
    result = plan(fleet.snapshot(), T0, CONFIG)
    assert result.actions == ()
    assert any(e.reason is EventReason.BLOCKED and "rate limit" in e.message for e in result.events)


def test_victims_beyond_max_victims_per_pass_block_the_whole_inversion() -> None:
    fleet, _, _ = inversion()
    low2 = jobset(fleet, "lowest", 10, T0 - timedelta(minutes=2))
    place(fleet, low2, "p1", [2], pending=3)
    config = CONFIG.model_copy(update={"max_victims_per_pass": 1})
    result = plan(fleet.snapshot(), T0, config)
    assert result.actions == ()
    assert any(e.reason is EventReason.BLOCKED and "maxVictimsPerPass" in e.message for e in result.events)


def test_a_lower_preemptor_of_an_open_op_is_taken_over_and_its_op_aborted() -> None:
    fleet, _, lo = inversion()
    wl = fleet.workload_of(lo)
    op = OpRecord("op-x", 0, ("p2",), (), T0 - timedelta(seconds=30))
    fleet.set_workload(WorkloadBuilder.from_obj(wl).annotation(KEYS.op, op.encode()).obj())
    result = plan(fleet.snapshot(), T0, CONFIG)
    assert_invariants(fleet.snapshot(), result, CONFIG)
    held = [a for a in result.actions if isinstance(a, HoldVictim)]
    assert [(a.workload.key, a.remove_annotations) for a in held] == [(wl.key, (KEYS.op,))]
    assert [(e.involved.name, e.op_id) for e in result.events if e.reason is EventReason.ABORTED] == [("low", "op-x")]
    assert idempotence_violations(fleet.snapshot(), result, CONFIG) == []


def test_the_op_is_done_once_the_higher_jobset_runs_and_the_victim_is_then_released() -> None:
    fleet, h, lo = inversion()
    first = plan(fleet.snapshot(), T0, CONFIG)
    after = apply_actions(fleet.snapshot(), first.actions, T0)
    # Kueue evicted low (pods gone); high's followers bound and everything of high runs on p1.
    pods = tuple(p for p in after.pods if p.jobset_name != "low" and p.node_name is not None)
    running = [
        PodBuilder("ml", f"high-f{i}", "high")
        .job("workers", 0)
        .attempt(h.restarts)
        .on(fleet.pools["p1"][i], "p1")
        .priority(h.pod_priority)
        .obj()
        for i in (1, 2, 3)
    ]
    done_snapshot = replace(after, pods=(*pods, *running))
    later = T0 + timedelta(seconds=40)
    done = plan(done_snapshot, later, CONFIG)
    assert_invariants(done_snapshot, done, CONFIG)
    assert any(isinstance(a, ClearOp) for a in done.actions)
    assert any(e.reason is EventReason.DONE and e.involved.name == "high" for e in done.events)
    # p2 is free: the held low JobSet is released by capacity in the same pass.
    released = [e for e in done.events if e.reason is EventReason.VICTIM_RELEASED]
    assert [e.involved.name for e in released] == [lo.name]


@st.composite
def shared_slices(draw: st.DrawFn) -> ClusterSnapshot:
    """Random JobSets whose leaders share slices, with random priorities, ages, phases and protections."""
    pools = [f"s{i}" for i in range(draw(st.integers(1, 4)))]
    fleet = Fleet().slices(*pools)
    host_free = {pool: [0, 1, 2, 3] for pool in pools}
    for j in range(draw(st.integers(2, 6))):
        priority = draw(st.sampled_from([10, 100, 1000]))
        ago = timedelta(seconds=draw(st.integers(0, 120)))
        js = jobset(fleet, f"job{j}", priority, T0 - ago)
        pool = draw(st.sampled_from(pools))
        count = min(draw(st.integers(0, 2)), len(host_free[pool]))
        hosts, host_free[pool] = host_free[pool][:count], host_free[pool][count:]
        place(fleet, js, pool, hosts, pending=4 - count, running=draw(st.booleans()))
        if draw(st.integers(0, 4)) == 0:
            fleet.set_workload(WorkloadBuilder.from_obj(fleet.workload_of(js)).annotation(KEYS.protect, "true").obj())
    return fleet.snapshot()


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshot=shared_slices(), victims=st.integers(1, 4), later=st.integers(0, 60))
def test_inversion_plans_keep_the_invariants_and_are_idempotent(
    snapshot: ClusterSnapshot, victims: int, later: int
) -> None:
    config = CONFIG.model_copy(update={"max_victims_per_pass": victims})
    result = plan(snapshot, T0, config)
    assert_invariants(snapshot, result, config)
    # When maxVictimsPerPass binds, the next pass holds the rest by design (see the budget matrix tests).
    assert convergence_violations(snapshot, result, config) == []
    assert plan(snapshot, T0, config) == result
    priorities = {w.key: w.priority or 0 for w in snapshot.workloads}
    for hold in (a for a in result.actions if isinstance(a, HoldVictim)):
        assert priorities[hold.workload.key] < priorities[hold.preemptor.key]
    # A later pass on the applied snapshot keeps them too (the op continues; nothing is held twice).
    after = apply_actions(snapshot, result.actions, T0)
    again = plan(after, T0 + timedelta(seconds=later), config)
    assert_invariants(after, again, config)
