"""Starvation preemption: an admitted JobSet whose pods stay unbound because lower-priority JobSets occupy the
slices (reconciler mode: kube-scheduler never preempts TPU pods) takes whole slices from them after
`starvationGrace`, as a second preemptor source after infra-disrupted ones."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

import pytest

from gke_tpu_priority.hotswap.annotations import AnnotationKeys, OpRecord, format_time
from gke_tpu_priority.hotswap.config import ConfigError, HotswapConfig, load_config
from gke_tpu_priority.hotswap.model import ClusterSnapshot, ConditionStatus, JobSet
from gke_tpu_priority.hotswap.planner import plan
from gke_tpu_priority.hotswap.planner.actions import EventReason, EventType, HoldVictim, Plan, RecordOp, make_op_id
from gke_tpu_priority.hotswap.planner.world import build_world
from testkit.builders import SHAPE_2X4, SHAPE_4X4, T0, Fleet, JobSetBuilder, WorkloadBuilder
from tests.planner.invariants import assert_invariants, convergence_violations, idempotence_violations

CONFIG = HotswapConfig()
KEYS = AnnotationKeys(CONFIG.annotation_domain)
GRACE = CONFIG.starvation_grace
WAITED = GRACE + timedelta(seconds=30)


def running(fleet: Fleet, name: str, priority: int, pools: list[str], pod_priority: int | None = None) -> JobSet:
    js = JobSetBuilder("ml", name).replicated_job("workers", len(pools))
    return fleet.run(js, pools, priority, pod_priority=pod_priority)


def waiting(
    fleet: Fleet,
    name: str,
    priority: int,
    slices: int = 1,
    ago: timedelta = WAITED,
    builder: JobSetBuilder | None = None,
    cluster_queue: str = "cq",
    workload: WorkloadBuilder | None = None,
) -> JobSet:
    """A JobSet Kueue admitted `ago`, whose leaders were created then and never bound."""
    js = (builder or JobSetBuilder("ml", name)).replicated_job("workers", slices)
    found = fleet.run(js, [], priority, cluster_queue=cluster_queue, workload=workload, admitted_at=T0 - ago)
    fleet.wait(found, T0 - ago)
    return found


def full(priorities: tuple[int, ...] = (100, 100)) -> Fleet:
    """One slice per priority, each occupied by a running JobSet `r<i>`."""
    pools = [f"p{i}" for i in range(1, len(priorities) + 1)]
    fleet = Fleet().slices(*pools)
    for i, (pool, priority) in enumerate(zip(pools, priorities, strict=True)):
        running(fleet, f"r{i}", priority, [pool])
    return fleet


def checked(snapshot: ClusterSnapshot, config: HotswapConfig = CONFIG, now: datetime = T0) -> Plan:
    result = plan(snapshot, now, config)
    assert_invariants(snapshot, result, config)
    assert convergence_violations(snapshot, result, config) == []
    return result


def holds(result: Plan) -> list[tuple[str, str]]:
    return [(a.workload.name, a.preemptor.name) for a in result.actions if isinstance(a, HoldVictim)]


def ops(result: Plan) -> dict[str, OpRecord]:
    found = {}
    for action in result.actions:
        if isinstance(action, RecordOp):
            op = action.op
            assert op is not None
            found[action.workload.name] = op
    return found


def warnings(result: Plan) -> list[str]:
    return [e.message for e in result.events if e.type is EventType.WARNING]


def test_starved_jobset_takes_the_slice_of_a_lower_one_under_its_own_op_id() -> None:
    fleet = full((100, 500))
    high = waiting(fleet, "high", 1000)
    snapshot = fleet.snapshot()
    result = checked(snapshot)
    victim = fleet.workload_of(next(j for j in fleet.jobsets.values() if j.name == "r0"))
    assert holds(result) == [(victim.name, fleet.workload_of(high).name)]
    op = ops(result)[fleet.workload_of(high).name]
    assert op.slices == ("p1",) and op.victims == (victim.key,) and op.since == T0
    assert op.op_id == make_op_id(f"{high.uid}/starvation", high.restarts)
    assert op.op_id != make_op_id(high.uid, high.restarts)  # a later infra failure is a distinct op
    planned = [e.message for e in result.events if e.reason is EventReason.PLANNED]
    assert len(planned) == 1 and "trigger starvation" in planned[0]
    assert result.diagnostics.starved_preemptors == 1 and result.diagnostics.victims_held == 1
    assert warnings(result) == []
    assert idempotence_violations(snapshot, result, CONFIG) == []


def test_equal_or_higher_priority_jobsets_are_never_victims_and_waiting_behind_them_is_not_warned_about() -> None:
    fleet = full((1000, 2000))
    waiting(fleet, "high", 1000)
    result = checked(fleet.snapshot())
    assert result.actions == ()
    assert result.events == ()  # ordinary queueing: no Blocked warning
    assert result.diagnostics.starved_preemptors == 1


def test_a_lower_kueue_priority_with_an_equal_pod_priority_is_no_victim() -> None:
    fleet = Fleet().slices("p1", "p2")
    running(fleet, "same-pods", 100, ["p1"], pod_priority=1000)
    running(fleet, "low", 100, ["p2"])
    high = waiting(fleet, "high", 1000)
    result = checked(fleet.snapshot())
    low = next(j for j in fleet.jobsets.values() if j.name == "low")
    assert holds(result) == [(fleet.workload_of(low).name, fleet.workload_of(high).name)]


def test_the_lowest_priority_occupant_is_chosen() -> None:
    fleet = full((500, 100, 1000))
    high = waiting(fleet, "high", 2000)
    result = checked(fleet.snapshot())
    r1 = next(j for j in fleet.jobsets.values() if j.name == "r1")
    assert holds(result) == [(fleet.workload_of(r1).name, fleet.workload_of(high).name)]


def test_a_free_slice_of_the_needed_shape_means_nothing_is_held() -> None:
    fleet = full((100,))
    fleet.slices("free")
    waiting(fleet, "high", 1000)
    result = checked(fleet.snapshot())
    assert result.actions == () and result.events == ()
    assert result.diagnostics.starved_preemptors == 0


def test_a_free_slice_of_another_shape_does_not_count() -> None:
    fleet = full((100,))
    fleet.slices("small", topology="2x4")
    high = waiting(fleet, "high", 1000)
    result = checked(fleet.snapshot())
    r0 = next(j for j in fleet.jobsets.values() if j.name == "r0")
    assert holds(result) == [(fleet.workload_of(r0).name, fleet.workload_of(high).name)]


def test_free_slices_cover_part_of_the_deficit_and_victims_the_rest() -> None:
    fleet = full((100, 100))
    fleet.slices("free")
    high = waiting(fleet, "high", 1000, slices=2)
    result = checked(fleet.snapshot())
    assert len(holds(result)) == 1
    op = ops(result)[fleet.workload_of(high).name]
    assert "free" in op.slices and len(op.slices) == 2


def test_not_before_starvation_grace_and_the_planner_wakes_when_it_is_due() -> None:
    fleet = full((100,))
    waiting(fleet, "high", 1000, ago=GRACE - timedelta(seconds=20))
    snapshot = fleet.snapshot()
    early = checked(snapshot)
    assert early.actions == () and early.events == ()
    assert early.next_wakeup == T0 + timedelta(seconds=20)
    due = checked(snapshot, now=T0 + timedelta(seconds=20))
    assert len(holds(due)) == 1


def test_the_wait_counts_from_the_latest_admission_not_from_old_pods() -> None:
    """Pods created before a re-admission (stale data) do not make the wait look longer than the admission."""
    fleet = full((100,))
    js = JobSetBuilder("ml", "high").replicated_job("workers", 1)
    high = fleet.run(js, [], 1000, admitted_at=T0 - timedelta(seconds=10))
    fleet.wait(high, T0 - timedelta(hours=1))
    world = build_world(fleet.snapshot(), T0, CONFIG)
    assert world.unbound == {high.uid: T0 - timedelta(seconds=10)}
    assert checked(fleet.snapshot()).actions == ()


def test_zero_grace_disables_starvation_preemption() -> None:
    config = CONFIG.model_copy(update={"starvation_grace": timedelta(0)})
    fleet = full((100,))
    waiting(fleet, "high", 1000, ago=timedelta(hours=1))
    result = checked(fleet.snapshot(), config)
    assert result.actions == () and result.next_wakeup is None


def test_starvation_grace_is_validated_with_the_field_value_and_the_fix() -> None:
    assert load_config(env={"HOTSWAP_STARVATION_GRACE": "2m"}).starvation_grace == timedelta(minutes=2)
    assert load_config(env={"HOTSWAP_STARVATION_GRACE": "0"}).starvation_grace == timedelta(0)
    with pytest.raises(ConfigError, match=r"starvationGrace \(2\.0s\).*set it to 0 to disable.*at least 5s"):
        load_config(env={"HOTSWAP_STARVATION_GRACE": "2s"})
    with pytest.raises(ConfigError, match="starvationGrace"):
        load_config(env={"HOTSWAP_STARVATION_GRACE": "2h"})


def _tas(fleet: Fleet) -> JobSet:
    fleet.queue("cq-tas", tas=True)
    return waiting(fleet, "high", 1000, cluster_queue="cq-tas")


def _held(fleet: Fleet) -> JobSet:
    js = JobSetBuilder("ml", "high").replicated_job("workers", 1).obj()
    wl = WorkloadBuilder.for_jobset(js).active(False).annotation(KEYS.held_by, "ml/other/uid-x/0")
    return waiting(fleet, "high", 1000, builder=JobSetBuilder("ml", "high").uid(js.uid), workload=wl)


def _not_admitted(fleet: Fleet) -> JobSet:
    js = JobSetBuilder("ml", "high").obj()
    wl = WorkloadBuilder.for_jobset(js).condition("QuotaReserved", ConditionStatus.FALSE, at=T0 - WAITED)
    return waiting(fleet, "high", 1000, builder=JobSetBuilder("ml", "high").uid(js.uid), workload=wl)


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(_tas, id="tas"),
        pytest.param(_held, id="held"),
        pytest.param(_not_admitted, id="not-admitted"),
        pytest.param(lambda f: waiting(f, "h", 1000, builder=JobSetBuilder("ml", "h").not_exclusive()), id="shared"),
        pytest.param(
            lambda f: waiting(f, "h", 1000, builder=JobSetBuilder("ml", "h").node_selector_strategy()), id="selector"
        ),
        pytest.param(
            lambda f: waiting(f, "h", 1000, builder=JobSetBuilder("ml", "h").managed_by("example.com/other")),
            id="managed-elsewhere",
        ),
    ],
)
def test_no_starvation_preemptor_unless_admitted_unheld_movable_and_not_tas(make: object) -> None:
    fleet = full((100,))
    make(fleet)  # type: ignore[operator]
    snapshot = fleet.snapshot()
    result = plan(snapshot, T0, CONFIG)
    assert_invariants(snapshot, result, CONFIG)  # a held one is released (its preemptor is unknown) and may starve
    assert holds(result) == [] and ops(result) == {}
    assert warnings(result) == []
    assert result.diagnostics.starved_preemptors == 0


def test_infra_preemptors_go_first_and_share_the_victim_budget() -> None:
    config = CONFIG.model_copy(update={"max_victims_per_pass": 1})
    fleet = full((100, 100))
    fleet.slices("broken")
    infra = running(fleet, "infra", 500, ["broken"])
    fleet.fail("broken", T0 - timedelta(minutes=5)).evict_pods(infra, "broken", T0 - timedelta(minutes=5))
    starved = waiting(fleet, "starved", 1000)  # higher, yet planned after the infra preemptor
    snapshot = fleet.snapshot()
    result = checked(snapshot, config)
    assert [p for _, p in holds(result)] == [fleet.workload_of(infra).name]
    assert ops(result)[fleet.workload_of(infra).name].op_id == make_op_id(infra.uid, infra.restarts)
    blocked = [e for e in result.events if e.reason is EventReason.BLOCKED]
    assert [e.involved.name for e in blocked] == [starved.name]
    assert "maxVictimsPerPass" in blocked[0].message and "starved since" in blocked[0].message
    # The next pass, with the infra victim held, has budget for the starved JobSet.
    from gke_tpu_priority.hotswap.planner.simulate import apply_actions

    later = checked(apply_actions(snapshot, result.actions, T0), config)
    assert [p for _, p in holds(later)] == [fleet.workload_of(starved).name]


def test_victims_of_an_infra_op_planned_this_pass_are_not_taken_again() -> None:
    fleet = full((100, 100))
    fleet.slices("broken")
    infra = running(fleet, "infra", 500, ["broken"])
    fleet.fail("broken", T0 - timedelta(minutes=5)).evict_pods(infra, "broken", T0 - timedelta(minutes=5))
    starved = waiting(fleet, "starved", 1000)
    result = checked(fleet.snapshot())
    pairs = holds(result)
    assert sorted(p for _, p in pairs) == sorted([fleet.workload_of(infra).name, fleet.workload_of(starved).name])
    assert len({v for v, _ in pairs}) == 2
    assert result.diagnostics.disrupted_preemptors == 1 and result.diagnostics.starved_preemptors == 1


def test_blocked_with_lower_occupants_it_cannot_use_warns() -> None:
    fleet = full((100, 1000))
    high = waiting(fleet, "high", 1000, slices=2)  # r0 frees one slice, r1 is no victim: all or nothing
    result = checked(fleet.snapshot())
    assert holds(result) == []
    assert [e.involved.name for e in result.events if e.reason is EventReason.BLOCKED] == [high.name]
    assert "no lower-priority victims" in warnings(result)[0]


def test_lower_occupants_of_another_shape_are_no_reason_to_warn() -> None:
    fleet = full((1000,))
    fleet.slices("small", topology="2x4")
    small = JobSetBuilder("ml", "small").replicated_job("workers", 1, SHAPE_2X4)
    fleet.run(small, ["small"], 100)
    waiting(fleet, "high", 1000)
    result = checked(fleet.snapshot())
    assert result.actions == () and result.events == ()


def test_a_new_starvation_op_fences_admissions_into_the_freed_quota_in_the_same_pass() -> None:
    fleet = full((100,))
    high = waiting(fleet, "high", 1000)
    newcomer = waiting(fleet, "newcomer", 50, ago=timedelta(0))  # admitted now, never ran
    result = checked(fleet.snapshot())
    held = {v for v, _ in holds(result)}
    assert fleet.workload_of(newcomer).name in held
    op = ops(result)[fleet.workload_of(high).name]
    assert fleet.workload_of(newcomer).key in op.victims
    assert result.diagnostics.ops_fenced_victims == 1


def test_a_starvation_op_is_done_once_the_preemptor_runs() -> None:
    from gke_tpu_priority.hotswap.planner.simulate import apply_actions

    fleet = full((100,))
    high = waiting(fleet, "high", 1000)
    snapshot = fleet.snapshot()
    first = checked(snapshot)
    state = apply_actions(snapshot, first.actions, T0)
    # The victim's pods are gone and the preemptor's leader is bound and running on p1.
    r0 = next(j for j in fleet.jobsets.values() if j.name == "r0")
    edit = Fleet(
        nodes={n.name: n for n in state.nodes},
        pools=fleet.pools,
        jobsets={j.uid: j for j in state.jobsets},
        workloads={w.uid: w for w in state.workloads},
        pods=[p for p in state.pods if p.jobset_name not in (r0.name, high.name)],
        queues={q.name: q for q in state.cluster_queues},
    )
    edit.run(
        JobSetBuilder("ml", "high").uid(high.uid).replicated_job("workers", 1),
        ["p1"],
        1000,
        workload=WorkloadBuilder.from_obj(next(w for w in state.workloads if w.owner_jobset_uid == high.uid)),
    )
    later = checked(edit.snapshot(), now=T0 + timedelta(minutes=2))
    assert any(e.reason is EventReason.DONE for e in later.events)
    assert holds(later) == []


# --- lowerTierEvictionDelay for starved preemptors -------------------------------------------------------------
# Kueue undoes a lower tier's eviction delay unless starvation honours it too: waitForPodsReady requeues a JobSet
# whose slices stay down, Kueue re-admits it on the quota it freed, and a minute later it is a starvation
# preemptor (in the simulator this was how the middle tier took most of its victims).

TIERED = CONFIG.model_copy(update={"top_tier_priority": 2000, "lower_tier_eviction_delay": timedelta(minutes=20)})


def test_a_starved_jobset_below_the_top_tier_waits_the_lower_tier_delay_for_a_costly_victim() -> None:
    fleet = full((100,))  # r0 has run since long ago: an hour and more at risk without a checkpoint
    waiting(fleet, "mid", 1000)
    snapshot = fleet.snapshot()
    early = checked(snapshot, TIERED)
    assert holds(early) == [] and early.diagnostics.ops_waiting == 1
    assert early.next_wakeup == T0 - WAITED + timedelta(minutes=20)
    due = checked(snapshot, TIERED, now=early.next_wakeup)
    r0 = next(j for j in fleet.jobsets.values() if j.name == "r0")
    assert [victim for victim, _ in holds(due)] == [fleet.workload_of(r0).name]


def test_the_top_tier_starved_keeps_starvation_grace_alone() -> None:
    fleet = full((100,))
    waiting(fleet, "top", 2000)
    assert len(holds(checked(fleet.snapshot(), TIERED))) == 1


def test_a_starved_lower_tier_takes_a_victim_that_just_checkpointed_at_once() -> None:
    fleet = Fleet().slices("p1")
    js = JobSetBuilder("ml", "r0").replicated_job("workers", 1)
    js.annotation(KEYS.last_checkpoint, format_time(T0 - timedelta(minutes=2)))
    fleet.run(js, ["p1"], 100)
    waiting(fleet, "mid", 1000)
    assert len(holds(checked(fleet.snapshot(), TIERED))) == 1


def on_rung(capacity: str) -> Fleet:
    """The case above on one rung of a capacity ladder: r0 runs on the rung's one slice, `mid` was admitted to the
    same rung's flavor and starves."""
    fleet = Fleet().slices("p1")
    for node in fleet.pools["p1"]:
        fleet.nodes[node] = replace(fleet.nodes[node], capacity=capacity)
    shape = replace(SHAPE_4X4, capacity=capacity)
    fleet.run(JobSetBuilder("ml", "r0").replicated_job("workers", 1, shape), ["p1"], 100)
    mid = fleet.run(JobSetBuilder("ml", "mid").replicated_job("workers", 1, shape), [], 1000, admitted_at=T0 - WAITED)
    fleet.wait(mid, T0 - WAITED)
    return fleet


def test_a_starved_lower_tier_on_the_spot_rung_does_not_wait_for_spot_to_return() -> None:
    """Quota-only Kueue re-admits a JobSet whose spot VMs GCP reclaimed to the spot quota its eviction freed; the
    VMs come back on GCP's schedule, so waiting the lower tier's delay only keeps it idle. The reservation rung is
    the control: there the delay holds."""
    assert len(holds(checked(on_rung("spot").snapshot(), TIERED))) == 1
    waited = checked(on_rung("reservation").snapshot(), TIERED)
    assert holds(waited) == [] and waited.diagnostics.ops_waiting == 1
