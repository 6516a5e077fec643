"""Property tests: random fleets, workloads and failures; every plan satisfies I1-I12, is deterministic and
idempotent."""

from __future__ import annotations

from datetime import timedelta

from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from gke_tpu_priority.hotswap.annotations import AnnotationKeys
from gke_tpu_priority.hotswap.config import HotswapConfig, Scope
from gke_tpu_priority.hotswap.model import ClusterSnapshot, PodPhase
from gke_tpu_priority.hotswap.planner import plan
from gke_tpu_priority.hotswap.planner.actions import HoldVictim, RecordOp
from gke_tpu_priority.hotswap.planner.simulate import apply_actions
from testkit.builders import SHAPE_2X4, T0, Fleet, JobSetBuilder
from tests.planner.invariants import assert_invariants, convergence_violations, idempotence_violations

FAIL_MODES = ("unreachable", "not-ready", "cordon", "deleted")
KEYS = AnnotationKeys(HotswapConfig().annotation_domain)


@st.composite
def fleets(draw: st.DrawFn) -> ClusterSnapshot:
    slice_count = draw(st.integers(2, 14))
    pools = [f"s{i:02d}" for i in range(slice_count)]
    fleet = Fleet().slices(*pools)
    fleet.queue("cq-a", "cohort").queue("cq-b", "cohort").queue("cq-c", None)
    free = list(pools)
    jobs = []
    for j in range(draw(st.integers(1, 8))):
        size = draw(st.integers(1, 3))
        if len(free) < size:
            break
        on, free = free[:size], free[size:]
        priority = draw(st.sampled_from([10, 100, 500, 1000]))
        queue = draw(st.sampled_from(["cq-a", "cq-b", "cq-c"]))
        js = fleet.run(JobSetBuilder("ml", f"job{j}").replicated_job("w", size), on, priority, queue)
        jobs.append((js, on))
    for js, on in jobs:
        if draw(st.booleans()) and draw(st.booleans()):
            pool = draw(st.sampled_from(on))
            ago = timedelta(seconds=draw(st.integers(1, 900)))
            fleet.fail(pool, T0 - ago, how=draw(st.sampled_from(FAIL_MODES)), hosts=draw(st.integers(1, 4)))
            if draw(st.booleans()):
                fleet.evict_pods(js, pool, T0 - ago)
            elif draw(st.booleans()):
                fleet.depart_pods(js, pool, T0 - ago)
    # Admitted JobSets whose leaders never bound: starvation preemptors once past starvationGrace.
    for w in range(draw(st.integers(0, 2))):
        priority = draw(st.sampled_from([10, 100, 500, 1000, 2000]))
        queue = draw(st.sampled_from(["cq-a", "cq-b", "cq-c"]))
        ago = timedelta(seconds=draw(st.sampled_from([0, 30, 60, 90, 900])))
        js = JobSetBuilder("ml", f"wait{w}").replicated_job("w", draw(st.integers(1, 3)))
        fleet.wait(fleet.run(js, [], priority, queue, admitted_at=T0 - ago), T0 - ago)
    return fleet.snapshot()


CONFIGS = st.builds(
    HotswapConfig,
    scope=st.sampled_from(list(Scope)),
    max_victims_per_pass=st.integers(1, 8),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshot=fleets(), config=CONFIGS)
def test_every_plan_satisfies_the_invariants_and_is_idempotent(
    snapshot: ClusterSnapshot, config: HotswapConfig
) -> None:
    result = plan(snapshot, T0, config)
    assert_invariants(snapshot, result, config)
    assert convergence_violations(snapshot, result, config) == []
    assert plan(snapshot, T0, config) == result  # determinism


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshot=fleets(), steps=st.lists(st.integers(1, 3600), min_size=1, max_size=4))
def test_invariants_hold_across_passes_as_time_advances(snapshot: ClusterSnapshot, steps: list[int]) -> None:
    config = HotswapConfig()
    now = T0
    for step in steps:
        result = plan(snapshot, now, config)
        assert_invariants(snapshot, result, config)
        snapshot = apply_actions(snapshot, result.actions, now)
        now += timedelta(seconds=step)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    snapshot=fleets(),
    priority=st.sampled_from([5, 10, 100, 500, 1000, 2000]),
    pick=st.integers(0, 1000),
    later=st.integers(1, 600),
)
def test_newcomers_on_reserved_slices_keep_the_invariants(
    snapshot: ClusterSnapshot, priority: int, pick: int, later: int
) -> None:
    """C12: after the holds, a newly admitted JobSet's leader lands on a reserved slice; the next pass (an op
    extension or a block) still satisfies I1-I12 and is idempotent."""
    config = HotswapConfig()
    first = plan(snapshot, T0, config)
    state = apply_actions(snapshot, first.actions, T0)
    reserved = sorted(
        pool for a in first.actions if isinstance(a, RecordOp) and (op := a.op) is not None for pool in op.reserved
    )
    assume(reserved)
    pool = reserved[pick % len(reserved)]
    fleet = Fleet(
        nodes={n.name: n for n in state.nodes},
        pools={},
        jobsets={j.uid: j for j in state.jobsets},
        workloads={w.uid: w for w in state.workloads},
        pods=list(state.pods),
        departed=list(state.departed_pods),
        queues={q.name: q for q in state.cluster_queues},
    )
    for node in state.nodes:
        if node.node_pool:
            fleet.pools.setdefault(node.node_pool, []).append(node.name)
    newcomer = fleet.run(JobSetBuilder("ml", "newcomer").replicated_job("w", 1), [pool], priority, "cq-a")
    fleet.pods = [p for p in fleet.pods if p.jobset_name != newcomer.name or p.name.endswith("-0-0")]
    now = T0 + timedelta(seconds=later)
    after = fleet.snapshot()
    result = plan(after, now, config)
    assert_invariants(after, result, config)
    assert idempotence_violations(after, result, config) == []
    extended = any(isinstance(a, HoldVictim) and a.workload.name.startswith("jobset-newcomer") for a in result.actions)
    event("op extended" if extended else "not extended")


def _editable(state: ClusterSnapshot) -> Fleet:
    fleet = Fleet(
        nodes={n.name: n for n in state.nodes},
        pools={},
        jobsets={j.uid: j for j in state.jobsets},
        workloads={w.uid: w for w in state.workloads},
        pods=list(state.pods),
        departed=list(state.departed_pods),
        queues={q.name: q for q in state.cluster_queues},
    )
    for node in state.nodes:
        if node.node_pool:
            fleet.pools.setdefault(node.node_pool, []).append(node.name)
    return fleet


NEWCOMERS = st.lists(
    st.tuples(
        st.sampled_from([5, 10, 100, 500, 1000, 2000]),  # priority
        st.sampled_from(["cq-a", "cq-b", "cq-c"]),  # ClusterQueue
        st.integers(-60, 60),  # admitted, seconds after the op started
        st.booleans(),  # its leader already runs on a reserved slice
        st.integers(0, 1000),  # which reserved slice
    ),
    min_size=1,
    max_size=4,
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshot=fleets(), newcomers=NEWCOMERS, later=st.integers(1, 120))
def test_admission_fence_holds_only_fresh_lower_priority_work_that_never_ran(
    snapshot: ClusterSnapshot, newcomers: list[tuple[int, str, int, bool, int]], later: int
) -> None:
    """C12 fence: after the holds, Kueue admits workloads of random priority and scope, some before the op
    started, some already running on a reserved slice. The next pass keeps I1-I12, is deterministic and
    idempotent, and every fence hold is a strictly lower-priority Workload admitted at or after its op started
    with no Running pod, at most one per reserved slice."""
    config = HotswapConfig()
    first = plan(snapshot, T0, config)
    state = apply_actions(snapshot, first.actions, T0)
    ops = {a.workload.key: op for a in first.actions if isinstance(a, RecordOp) and (op := a.op) is not None}
    reserved = sorted(pool for op in ops.values() for pool in op.reserved)
    assume(reserved)
    fleet = _editable(state)
    for i, (priority, queue, offset, running, pick) in enumerate(newcomers):
        on = [reserved[pick % len(reserved)]] if running else []
        js = JobSetBuilder("ml", f"new{i}").replicated_job("w", 1)
        newcomer = fleet.run(js, on, priority, queue, admitted_at=T0 + timedelta(seconds=offset))
        fleet.pods = [p for p in fleet.pods if p.jobset_name != newcomer.name or p.name.endswith("-0-0")]
    after = fleet.snapshot()
    now = T0 + timedelta(seconds=later)
    result = plan(after, now, config)
    assert_invariants(after, result, config)
    assert idempotence_violations(after, result, config) == []
    assert plan(after, now, config) == result

    workloads = {w.key: w for w in after.workloads}
    jobsets = {j.uid: j for j in after.jobsets}
    # An op opened in this pass (a newcomer disrupted, a takeover, starvation) fences in the same pass too.
    ops |= {a.workload.key: a.op for a in result.actions if isinstance(a, RecordOp)}
    fenced = {e.involved.key for e in result.events if "admission fence" in e.message}
    holds = [a for a in result.actions if isinstance(a, HoldVictim)]
    per_preemptor: dict[str, int] = {}
    for hold in holds:
        victim = workloads[hold.workload.key]
        js = jobsets[victim.owner_jobset_uid or ""]
        if js.key not in fenced:
            continue
        op = ops[hold.preemptor.key]
        assert op.since is not None
        preemptor = workloads[hold.preemptor.key]
        assert (victim.priority or 0) < (preemptor.priority or 0)
        times = [c.last_transition_time for c in victim.conditions if c.type in ("QuotaReserved", "Admitted")]
        assert all(t is not None and t >= op.since for t in times)
        assert not any(p.jobset_name == js.name and p.phase is PodPhase.RUNNING for p in after.pods)
        per_preemptor[hold.preemptor.key] = per_preemptor.get(hold.preemptor.key, 0) + 1
    for key, count in per_preemptor.items():
        assert count <= len(ops[key].reserved)
    event("fenced" if fenced else "not fenced")


@st.composite
def mixed_shape_fleets(draw: st.DrawFn) -> ClusterSnapshot:
    """A high-priority JobSet spanning 4x4 and 2x4 slices loses some; every other slice runs lower work of either or
    both shapes: victims chosen shape by shape must still be minimal over the whole operation (I7)."""
    free_big = [f"b{i}" for i in range(draw(st.integers(2, 6)))]
    free_small = [f"q{i}" for i in range(draw(st.integers(2, 6)))]
    fleet = Fleet().slices(*free_big).slices(*free_small, topology="2x4")
    fleet.queue("cq", "cohort")
    jobs = []
    j = 0
    while free_big or free_small:
        low = 1 if j == 0 else 0
        n_big = draw(st.integers(min(low, len(free_big)), min(2, len(free_big))))
        n_small = draw(st.integers(min(low, len(free_small)), min(2, len(free_small))))
        if n_big + n_small == 0:
            n_big, n_small = (1, 0) if free_big else (0, 1)
        on_big, free_big = free_big[:n_big], free_big[n_big:]
        on_small, free_small = free_small[:n_small], free_small[n_small:]
        builder = JobSetBuilder("ml", f"job{j}")
        if n_big:
            builder.replicated_job("big", n_big)
        if n_small:
            builder.replicated_job("small", n_small, SHAPE_2X4)
        priority = 1000 if j == 0 else draw(st.sampled_from([10, 10, 100, 1000]))
        admitted = T0 - timedelta(minutes=draw(st.integers(5, 120)))
        jobs.append((fleet.run(builder, [*on_big, *on_small], priority, "cq", admitted_at=admitted), on_big + on_small))
        j += 1
    for i, (js, on) in enumerate(jobs):
        if i == 0 or draw(st.integers(0, 3)) == 0:
            for pool in draw(st.lists(st.sampled_from(on), min_size=1, max_size=3, unique=True)):
                fleet.fail(pool, T0 - timedelta(minutes=2)).evict_pods(js, pool, T0 - timedelta(minutes=2))
    return fleet.snapshot()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.large_base_example])
@given(snapshot=mixed_shape_fleets())
def test_mixed_shape_operations_keep_the_invariants(snapshot: ClusterSnapshot) -> None:
    config = HotswapConfig()
    result = plan(snapshot, T0, config)
    event(f"victims held: {sum(isinstance(a, HoldVictim) for a in result.actions)}")
    assert_invariants(snapshot, result, config)
    assert convergence_violations(snapshot, result, config) == []
