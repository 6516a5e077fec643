"""Two open ops in one slice (docs/benchmarks.md "Storm tails" 4): a strictly higher preemptor takes the slice
over from a lower preemptor of an open op, aborting that op and holding it (I9), all or nothing."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gke_tpu_priority.hotswap.annotations import AnnotationKeys, OpRecord, format_time
from gke_tpu_priority.hotswap.config import HotswapConfig, Scope
from gke_tpu_priority.hotswap.model import ClusterSnapshot, DepartedPod, JobSet, PodPhase, ReplicatedJob, Workload
from gke_tpu_priority.hotswap.planner import plan
from gke_tpu_priority.hotswap.planner.actions import EventReason, FastFailPod, HoldVictim, Plan, RecordOp, ReleaseVictim
from gke_tpu_priority.hotswap.planner.simulate import apply_actions
from testkit.builders import SHAPE_4X4, T0, Fleet, JobSetBuilder, PodBuilder, WorkloadBuilder
from tests.planner.invariants import assert_invariants, idempotence_violations

CFG = HotswapConfig()
KEYS = AnnotationKeys(CFG.annotation_domain)
FAILED_AT = T0 - timedelta(minutes=2)
OP_SINCE = T0 - timedelta(seconds=90)
RESTARTED = T0 - timedelta(seconds=60)


def _held(fleet: Fleet, victim: JobSet, preemptor: JobSet, op_id: str) -> None:
    """`victim` was held for `preemptor`'s op and its pods are gone."""
    wl = WorkloadBuilder.from_obj(fleet.workload_of(victim))
    for key, value in {
        KEYS.held_by: f"{preemptor.namespace}/{preemptor.name}/{preemptor.uid}/0",
        KEYS.op_id: op_id,
        KEYS.held_since: format_time(OP_SINCE),
        KEYS.hold_count: "1",
        KEYS.hold_history: format_time(OP_SINCE),
    }.items():
        wl.annotation(key, value)
    fleet.set_workload(wl.active(False).obj())
    fleet.pods = [p for p in fleet.pods if p.jobset_name != victim.name]


def _departed(fleet: Fleet, js: JobSet, pool: str) -> None:
    """The first attempt's pods on failed `pool` were deleted by the restart (infra evidence, B.3 (a))."""
    for node in fleet.pools[pool]:
        fleet.departed.append(DepartedPod(js.namespace, js.name, 0, node, pool, RESTARTED, js.pod_priority))


def _record(fleet: Fleet, js: JobSet, op: OpRecord) -> None:
    fleet.set_workload(WorkloadBuilder.from_obj(fleet.workload_of(js)).annotation(KEYS.op, op.encode()).obj())


def _bind(fleet: Fleet, js: JobSet, job: int, pool: str, hosts: list[int], pending: int) -> None:
    """Pods of `js`'s current attempt for replicated job index `job`: bound to `hosts` of `pool`, and `pending`."""
    for host in hosts:
        pod = PodBuilder(js.namespace, f"{js.name}-w-{job}-{host}-a{js.restarts}", js.name).job("w", job)
        fleet.pods.append(pod.attempt(js.restarts).on(fleet.pools[pool][host], pool).priority(js.pod_priority).obj())
    for i in range(pending):
        pod = PodBuilder(js.namespace, f"{js.name}-w-{job}-p{i}-a{js.restarts}", js.name).job("w", job)
        fleet.pods.append(pod.attempt(js.restarts).phase(PodPhase.PENDING).priority(js.pod_priority).obj())


def storm_shape(
    via: str,
    medium: int = 500,
    medium_pod: int | None = None,
    names: tuple[str, str] = ("high", "medium"),
    spare: bool = False,
) -> tuple[Fleet, JobSet, JobSet, JobSet]:
    """The trace's shape. `medium` restarted after its slice m0 failed; its op reserves slice s and holds `low`,
    whose pods have left s. `high`'s leader then bound on s's free host, next to medium's three pods.

    via="extension": `high` (2 slices) lost h0 too and has an open op keeping h1 (where its job 0 runs again)
    and reserving v (freed by its held victim `low0`). via="inversion": `high` (1 slice) restarted after a
    transient fault, has no op and no infra evidence: only the slice priority inversion on s involves it.
    `spare` adds a free slice f, where the held `low` may go once its preemptor's op is aborted.
    """
    pools = ["s", "m0", *(["h0", "h1", "v"] if via == "extension" else []), *(["f"] if spare else [])]
    fleet = Fleet().slices(*pools)
    high_name, medium_name = names
    replicas = 2 if via == "extension" else 1
    high = fleet.run(JobSetBuilder("ml", high_name).replicated_job("w", replicas).restarts(1), [], 1000)
    med = fleet.run(
        JobSetBuilder("ml", medium_name).replicated_job("w", 1).restarts(1),
        [],
        medium,
        pod_priority=medium_pod,
        admitted_at=RESTARTED,
    )
    low = fleet.run(JobSetBuilder("ml", "low").replicated_job("w", 1), [], 10)
    fleet.fail("m0", FAILED_AT, hosts=4)
    _departed(fleet, med, "m0")
    _held(fleet, low, med, "op-medium")
    _record(fleet, med, OpRecord("op-medium", 0, ("s",), (fleet.workload_of(low).key,), OP_SINCE))
    _bind(fleet, med, 0, "s", [0, 1, 2], pending=1)
    if via == "extension":
        low0 = fleet.run(JobSetBuilder("ml", "low0").replicated_job("w", 1), [], 10)
        fleet.fail("h0", FAILED_AT, hosts=4)
        _departed(fleet, high, "h0")
        _held(fleet, low0, high, "op-high")
        _record(fleet, high, OpRecord("op-high", 0, ("v",), (fleet.workload_of(low0).key,), OP_SINCE, ("h1",)))
        _bind(fleet, high, 0, "h1", [0, 1, 2, 3], pending=0)
        _bind(fleet, high, 1, "s", [3], pending=3)
    else:
        fleet.set_workload(WorkloadBuilder.from_obj(fleet.workload_of(high)).admitted("cq", RESTARTED).obj())
        _bind(fleet, high, 0, "s", [3], pending=3)
    return fleet, high, med, low


def run(snapshot: ClusterSnapshot, config: HotswapConfig = CFG) -> Plan:
    result = plan(snapshot, T0, config)
    assert_invariants(snapshot, result, config)
    assert idempotence_violations(snapshot, result, config) == []
    return result


def _op(result: Plan, js: JobSet) -> OpRecord:
    record = next(a for a in result.actions if isinstance(a, RecordOp) and a.workload.name.endswith(js.uid[-5:]))
    op = record.op
    assert op is not None
    return op


def _wl(fleet: Fleet, js: JobSet) -> Workload:
    return fleet.workload_of(js)


VIAS = ["extension", "inversion"]


@pytest.mark.parametrize("via", VIAS)
@pytest.mark.parametrize("names", [("high", "medium"), ("z-high", "a-medium")], ids=["high-first", "medium-first"])
def test_a_higher_preemptor_takes_a_shared_slice_over_from_a_lower_open_op(via: str, names: tuple[str, str]) -> None:
    fleet, high, med, low = storm_shape(via, names=names)
    result = run(fleet.snapshot())
    holds = [a for a in result.actions if isinstance(a, HoldVictim)]
    assert [(h.workload.key, h.preemptor.key) for h in holds] == [(_wl(fleet, med).key, _wl(fleet, high).key)]
    assert holds[0].remove_annotations == (KEYS.op,)  # the op is aborted in the hold's own write
    op = _op(result, high)
    assert "s" in op.slices and _wl(fleet, med).key in op.victims
    aborted = [e for e in result.events if e.reason is EventReason.ABORTED]
    assert [(e.involved.name, e.op_id) for e in aborted] == [(med.name, "op-medium")]
    assert f"higher-priority ml/{high.name} needs slice(s) s" in aborted[0].message
    assert result.diagnostics.ops_aborted == 1
    # Medium's own victim stays held: the only free slice (v) is reserved for high (extension) or none is free.
    assert not any(isinstance(a, ReleaseVictim) for a in result.actions)
    assert _wl(fleet, low).key not in op.victims
    if via == "extension":
        assert op.op_id == "op-high" and op.slices == ("s", "v") and op.kept == ("h1",)
        assert result.diagnostics.ops_extended_victims == 1
    else:
        assert op.slices == ("s",)
        assert result.diagnostics.ops_inversion_victims == 1
        assert any(e.reason is EventReason.INVERSION_RESOLVED for e in result.events)


@pytest.mark.parametrize("via", VIAS)
def test_the_aborted_ops_victim_is_released_on_capacity_but_never_into_the_takers_slices(via: str) -> None:
    fleet, _, med, low = storm_shape(via, spare=True)
    first = run(fleet.snapshot())
    released = [a for a in first.actions if isinstance(a, ReleaseVictim)]
    assert [r.workload.key for r in released] == [_wl(fleet, low).key]
    note = next(e for e in first.events if e.reason is EventReason.VICTIM_RELEASED).message
    assert "capacity on f" in note
    # Next pass: medium is held (Kueue evicted it), its op gone; nothing else to write.
    after = apply_actions(fleet.snapshot(), first.actions, T0)
    held_medium = next(w for w in after.workloads if w.key == _wl(fleet, med).key)
    assert KEYS.op not in held_medium.annotations and not held_medium.active
    later = plan(after, T0 + timedelta(seconds=10), CFG)
    assert_invariants(after, later, CFG)
    assert later.actions == ()


@pytest.mark.parametrize("via", VIAS)
@pytest.mark.parametrize(("medium", "medium_pod"), [(1000, None), (500, 1000), (500, 2000)])
def test_an_equal_or_higher_preemptor_under_either_priority_is_not_taken_over(
    via: str, medium: int, medium_pod: int | None
) -> None:
    fleet, _, med, _ = storm_shape(via, medium=medium, medium_pod=medium_pod)
    result = run(fleet.snapshot())
    assert not any(isinstance(a, HoldVictim) for a in result.actions)
    assert not any(a.workload.key == _wl(fleet, med).key for a in result.actions if not isinstance(a, FastFailPod))
    assert not any(e.reason is EventReason.ABORTED for e in result.events)


def _protect(fleet: Fleet, js: JobSet) -> None:
    fleet.set_workload(WorkloadBuilder.from_obj(fleet.workload_of(js)).annotation(KEYS.protect, "true").obj())


def _rate_limit(fleet: Fleet, js: JobSet) -> None:
    history = ",".join(format_time(T0 - timedelta(hours=h)) for h in range(1, CFG.max_holds_per_window + 1))
    fleet.set_workload(WorkloadBuilder.from_obj(fleet.workload_of(js)).annotation(KEYS.hold_history, history).obj())


def _other_queue(fleet: Fleet, js: JobSet) -> None:
    fleet.queue("elsewhere", "other-cohort")
    wl = fleet.workload_of(js)
    fleet.set_workload(replace(wl, cluster_queue="elsewhere"))


@pytest.mark.parametrize("via", VIAS)
@pytest.mark.parametrize(
    ("spoil", "why"),
    [(_protect, "protected"), (_rate_limit, "hold rate limit"), (_other_queue, "out of scope")],
    ids=["protected", "rate-limited", "out-of-scope"],
)
def test_a_lower_preemptor_that_may_not_be_held_blocks_the_takeover_without_any_write(
    via: str, spoil: object, why: str
) -> None:
    fleet, high, med, _ = storm_shape(via)
    spoil(fleet, med)  # type: ignore[operator]
    result = run(fleet.snapshot())
    assert result.actions == ()  # all or nothing: medium keeps its op, nothing is held
    blocked = [e for e in result.events if e.reason is EventReason.BLOCKED and e.involved.name == high.name]
    assert len(blocked) == 1
    assert why in blocked[0].message and "ml/medium" in blocked[0].message
    assert not any(e.reason is EventReason.ABORTED for e in result.events)


@pytest.mark.parametrize("via", VIAS)
def test_the_takeover_respects_the_victim_budget_all_or_nothing(via: str) -> None:
    fleet, high, med, _ = storm_shape(via)
    # A second, lower intruder: its leader on v (reserved for high's op), or on s next to medium's two pods.
    lowest = fleet.run(JobSetBuilder("ml", "lowest").replicated_job("w", 1), [], 5, admitted_at=RESTARTED)
    pool = "v" if via == "extension" else "s"
    if via == "inversion":
        fleet.pods = [p for p in fleet.pods if not (p.jobset_name == med.name and p.node_name == "s-2")]
    _bind(fleet, lowest, 0, pool, [2], pending=3)
    config = CFG.model_copy(update={"max_victims_per_pass": 1})
    result = run(fleet.snapshot(), config)
    assert not any(isinstance(a, HoldVictim) for a in result.actions)
    assert not any(e.reason is EventReason.ABORTED for e in result.events)
    blocked = [e for e in result.events if e.reason is EventReason.BLOCKED and e.involved.name == high.name]
    assert len(blocked) == 1 and "maxVictimsPerPass" in blocked[0].message
    holds = [a for a in run(fleet.snapshot()).actions if isinstance(a, HoldVictim)]
    assert {h.workload.key for h in holds} == {_wl(fleet, med).key, _wl(fleet, lowest).key}


def test_scope_cluster_lets_an_out_of_scope_lower_preemptor_be_taken_over() -> None:
    fleet, _, med, _ = storm_shape("inversion")
    _other_queue(fleet, med)
    config = CFG.model_copy(update={"scope": Scope.CLUSTER})
    holds = [a for a in run(fleet.snapshot(), config).actions if isinstance(a, HoldVictim)]
    assert [h.workload.key for h in holds] == [_wl(fleet, med).key]


def test_a_preemptor_whose_inversion_op_opens_among_the_ops_is_no_victim_of_a_new_op() -> None:
    """high's inversion op is opened in `advance_ops` (it takes medium over), before new ops are planned: a
    higher, infra-disrupted `top` does not pick high, which has no op in the snapshot yet, as its victim (its
    slice h1 is kept for it, and a preemptor of this pass is no victim, I9)."""
    fleet, high, med, _ = storm_shape("inversion")
    fleet.slices("h1", "t0")
    high = replace(high, replicated_jobs=(ReplicatedJob("w", 2, SHAPE_4X4),))
    fleet.jobsets[high.uid] = high
    _bind(fleet, high, 1, "h1", [0, 1, 2, 3], pending=0)
    top = fleet.run(JobSetBuilder("ml", "top").replicated_job("w", 1), ["t0"], 5000)
    fleet.fail("t0", FAILED_AT, hosts=4).evict_pods(top, "t0", FAILED_AT)
    result = run(fleet.snapshot())
    holds = [(a.workload.key, a.preemptor.key) for a in result.actions if isinstance(a, HoldVictim)]
    assert holds == [(_wl(fleet, med).key, _wl(fleet, high).key)]
    assert any(e.reason is EventReason.BLOCKED and e.involved.name == "top" for e in result.events)


@st.composite
def shared_slices_with_ops(draw: st.DrawFn) -> ClusterSnapshot:
    """JobSets whose leaders share slices, some of them preemptors of open ops reserving the slice they sit in
    (and maybe holding a victim), with random priorities, ages, protections and hold histories."""
    pools = [f"s{i}" for i in range(draw(st.integers(1, 3)))]
    fleet = Fleet().slices(*pools)
    free = {pool: [0, 1, 2, 3] for pool in pools}
    reserved: set[str] = set()
    for j in range(draw(st.integers(2, 5))):
        priority, pod_priority = draw(st.sampled_from([10, 100, 1000])), draw(st.sampled_from([None, 10, 100, 1000]))
        ago = timedelta(seconds=draw(st.integers(0, 120)))
        js = fleet.run(
            JobSetBuilder("ml", f"job{j}").replicated_job("w", 1).restarts(1),
            [],
            priority,
            pod_priority=pod_priority,
            admitted_at=T0 - ago,
        )
        pool = draw(st.sampled_from(pools))
        count = min(draw(st.integers(0, 3)), len(free[pool]))
        hosts, free[pool] = free[pool][:count], free[pool][count:]
        _bind(fleet, js, 0, pool, hosts, pending=4 - count)
        if pool not in reserved and draw(st.booleans()):
            reserved.add(pool)
            victims: tuple[str, ...] = ()
            if draw(st.booleans()):
                low = fleet.run(JobSetBuilder("ml", f"victim{j}").replicated_job("w", 1), [], 1)
                _held(fleet, low, js, f"op-{j}")
                victims = (fleet.workload_of(low).key,)
            _record(fleet, js, OpRecord(f"op-{j}", 0, (pool,), victims, T0 - ago))
        spoil = draw(st.sampled_from([None, _protect, _rate_limit]))
        if spoil is not None:
            spoil(fleet, js)
    return fleet.snapshot()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshot=shared_slices_with_ops(), victims=st.integers(1, 4))
def test_takeovers_keep_the_invariants_and_are_idempotent(snapshot: ClusterSnapshot, victims: int) -> None:
    config = CFG.model_copy(update={"max_victims_per_pass": victims, "scope": Scope.CLUSTER})
    result = plan(snapshot, T0, config)
    assert_invariants(snapshot, result, config)
    assert plan(snapshot, T0, config) == result
    # A taken-over preemptor is held in the write that removes its op, and is told so.
    for hold in (a for a in result.actions if isinstance(a, HoldVictim) and a.remove_annotations):
        assert any(e.reason is EventReason.ABORTED and e.involved.name in hold.workload.name for e in result.events)
    # I11 (as convergence when the victim budget binds: the next pass holds the rest by design).
    current, last = snapshot, result
    for _ in range(10):
        current = apply_actions(current, last.actions, T0)
        last = plan(current, T0, config)
        assert_invariants(current, last, config)
        if not last.actions:
            break
    assert not last.actions, "passes did not converge"
    if sum(isinstance(a, HoldVictim) for a in result.actions) < victims:
        assert idempotence_violations(snapshot, result, config) == []


def test_a_contested_preemptor_blocked_by_an_op_another_takes_over_is_served_in_the_same_pass() -> None:
    """I11, found by Hypothesis. `medium` (500, cq) keeps an op reserving s and has pods on s and t. `a-high` (1000,
    cq-c, a queue with no cohort) bound its leader on t, next to medium's pod and `lowc`'s (5, cq-c); `b-high`
    (1000, cq) on s. a-high is tried first: medium is out of its scope, so it is blocked; then b-high takes
    medium's op over and holds it. Medium's pods are going, so a-high's other occupant, lowc, is a victim it may
    take in this pass, not only in the next."""
    fleet = Fleet().slices("s", "t", "m0")
    fleet.queue("cq-c", None)
    a_high = fleet.run(JobSetBuilder("ml", "a-high").replicated_job("w", 1).restarts(1), [], 1000, "cq-c")
    b_high = fleet.run(JobSetBuilder("ml", "b-high").replicated_job("w", 1).restarts(1), [], 1000)
    med = fleet.run(JobSetBuilder("ml", "medium").replicated_job("w", 2).restarts(1), [], 500, admitted_at=RESTARTED)
    low = fleet.run(JobSetBuilder("ml", "low").replicated_job("w", 1), [], 10)
    lowc = fleet.run(JobSetBuilder("ml", "lowc").replicated_job("w", 1), [], 5, "cq-c")
    fleet.pods = [p for p in fleet.pods if p.jobset_name != lowc.name]
    fleet.fail("m0", FAILED_AT, hosts=4)
    _departed(fleet, med, "m0")
    _held(fleet, low, med, "op-medium")
    _record(fleet, med, OpRecord("op-medium", 0, ("s",), (fleet.workload_of(low).key,), OP_SINCE))
    _bind(fleet, med, 0, "s", [0, 1, 2], pending=1)
    _bind(fleet, med, 1, "t", [0], pending=3)
    _bind(fleet, lowc, 0, "t", [1, 2], pending=2)
    for js, queue, pool in ((a_high, "cq-c", "t"), (b_high, "cq", "s")):
        fleet.set_workload(WorkloadBuilder.from_obj(fleet.workload_of(js)).admitted(queue, RESTARTED).obj())
        _bind(fleet, js, 0, pool, [3], pending=3)
    result = run(fleet.snapshot())
    held = {a.workload.key for a in result.actions if isinstance(a, HoldVictim)}
    assert held == {fleet.workload_of(med).key, fleet.workload_of(lowc).key}
    assert not any(e.reason is EventReason.BLOCKED for e in result.events)
