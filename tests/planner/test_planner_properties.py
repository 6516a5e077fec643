"""Property tests: random fleets, workloads and failures; every plan satisfies I1-I12, is deterministic and
idempotent."""

from __future__ import annotations

from datetime import timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hotswap.config import HotswapConfig, Scope
from hotswap.model import ClusterSnapshot
from hotswap.planner import plan
from hotswap.planner.simulate import apply_actions
from tests.planner.builders import T0, Fleet, JobSetBuilder
from tests.planner.invariants import assert_invariants, idempotence_violations

FAIL_MODES = ("unreachable", "not-ready", "cordon", "deleted")


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
    assert idempotence_violations(snapshot, result, config) == []
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
