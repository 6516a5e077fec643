"""Failure-matrix cases that the planner decides; each test is named after its id (docs/planner.md, "Failure cases")."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from gke_tpu_priority.hotswap.annotations import AnnotationKeys, HeldBy, OpRecord, format_time
from gke_tpu_priority.hotswap.config import HotswapConfig, ReleaseOnPreemptorGone, Scope
from gke_tpu_priority.hotswap.model import ClusterSnapshot, ConditionStatus, DepartedPod, JobSet, PodPhase, SliceShape
from gke_tpu_priority.hotswap.planner import plan
from gke_tpu_priority.hotswap.planner.actions import (
    ClearOp,
    EventReason,
    FastFailPod,
    HoldVictim,
    Plan,
    RecordOp,
    ReleaseReason,
    ReleaseVictim,
)
from gke_tpu_priority.hotswap.planner.simulate import apply_actions
from testkit.builders import T0, Fleet, JobSetBuilder, NodeBuilder, PodBuilder, WorkloadBuilder
from tests.planner.invariants import assert_invariants, idempotence_violations

# Victims at detection: these tests are about detection and planning; evictionDelay has test_eviction_cost.py.
CFG = HotswapConfig(eviction_delay=timedelta(0))
KEYS = AnnotationKeys(CFG.annotation_domain)
FAILED_AT = T0 - timedelta(minutes=1)


def run(snapshot: ClusterSnapshot, config: HotswapConfig = CFG, now: object = T0) -> Plan:
    result = plan(snapshot, T0 if now is T0 else now, config)  # type: ignore[arg-type]
    assert_invariants(snapshot, result, config)
    assert idempotence_violations(snapshot, result, config) == []
    return result


def held(result: Plan) -> list[str]:
    return sorted(a.workload.name.split("-")[1] for a in result.actions if isinstance(a, HoldVictim))


def reasons(result: Plan) -> list[EventReason]:
    return [e.reason for e in result.events]


def disrupted_fleet(victims: dict[str, int], high_priority: int = 1000) -> tuple[Fleet, JobSet]:
    """H on p0+p1 (p0 failed, pods evicted); each victim on its own slice v<i>."""
    fleet = Fleet().slices("p0", "p1", *(f"v{i}" for i in range(len(victims))))
    high = fleet.run(JobSetBuilder("ml", "high").replicated_job("w", 2), ["p0", "p1"], high_priority)
    for i, (name, prio) in enumerate(victims.items()):
        fleet.run(JobSetBuilder("ml", name).replicated_job("w", 1), [f"v{i}"], prio)
    fleet.fail("p0", FAILED_AT).evict_pods(high, "p0", FAILED_AT)
    return fleet, high


# --- A. detection ---------------------------------------------------------------------------------------


def test_A1_short_notready_within_grace_plans_nothing() -> None:
    fleet, _high = disrupted_fleet({"low": 10})
    fleet.fail("p0", T0 - timedelta(seconds=5))
    result = run(fleet.snapshot())
    assert result.actions == ()
    assert result.diagnostics.slices_suspect == 1


def test_A2_unreachable_past_grace_plans_an_op() -> None:
    fleet, _ = disrupted_fleet({"low": 10})
    result = run(fleet.snapshot())
    assert held(result) == ["low"]
    assert EventReason.PLANNED in reasons(result)


def test_A3_drained_pool_counts_as_unhealthy() -> None:
    fleet, high = disrupted_fleet({"low": 10})
    fleet.fail("p0", FAILED_AT, how="cordon").evict_pods(high, "p0", FAILED_AT, "EvictionByEvictionAPI")
    assert held(run(fleet.snapshot())) == ["low"]


def test_A4_one_bad_host_makes_the_whole_slice_unhealthy() -> None:
    fleet, _ = disrupted_fleet({"low": 10})
    fleet.fail("p0", FAILED_AT, hosts=1)
    assert run(fleet.snapshot()).diagnostics.slices_unhealthy == 1


def test_A5_recreated_nodes_with_new_names_are_the_same_slice_once_stable() -> None:
    fleet = Fleet().slices("p0")
    for name in list(fleet.nodes):
        del fleet.nodes[name]
    for i in range(4):
        fleet.node(f"p0-new-{i}", NodeBuilder(f"p0-new-{i}").pool("p0").tpu().ready_since(T0 - timedelta(seconds=30)))
    assert run(fleet.snapshot()).diagnostics.slices_recovering == 1
    assert run(fleet.snapshot(), now=T0 + timedelta(minutes=5)).diagnostics.slices_recovering == 0


def test_A6_deleted_node_makes_the_slice_unhealthy_and_triggers() -> None:
    fleet, _high = disrupted_fleet({"low": 10})
    fleet.fail("p0", FAILED_AT, how="deleted")
    assert held(run(fleet.snapshot())) == ["low"]


def test_A7_tainted_slice_with_running_preemptor_pods_is_not_a_disruption() -> None:
    fleet = Fleet().slices("p0", "p1", "v0")
    fleet.run(JobSetBuilder("ml", "high").replicated_job("w", 2), ["p0", "p1"], 1000)
    fleet.run(JobSetBuilder("ml", "low").replicated_job("w", 1), ["v0"], 10)
    from gke_tpu_priority.hotswap.model import TaintEffect

    for name in fleet.pools["p0"]:
        old = fleet.nodes[name]
        fleet.nodes[name] = replace(
            old, taints=(*old.taints, *NodeBuilder(name).taint("x", TaintEffect.NO_SCHEDULE).obj().taints[1:])
        )
    result = run(fleet.snapshot())
    assert result.diagnostics.slices_unhealthy == 1
    assert result.actions == ()


def test_A8_two_failed_slices_need_two_or_nothing() -> None:
    fleet, high = disrupted_fleet({"low": 10})
    fleet.fail("p1", FAILED_AT).evict_pods(high, "p1", FAILED_AT)
    assert reasons(run(fleet.snapshot())) == [EventReason.BLOCKED]  # one victim slice cannot cover 2 (I6)
    fleet2, high2 = disrupted_fleet({"low": 10, "low2": 20})
    fleet2.fail("p1", FAILED_AT).evict_pods(high2, "p1", FAILED_AT)
    assert held(run(fleet2.snapshot())) == ["low", "low2"]


def test_A9_flapping_slice_is_not_reused_before_stabilisation() -> None:
    fleet = Fleet().slices("p0")
    for name in fleet.pools["p0"]:
        fleet.node(name, NodeBuilder(name).pool("p0").tpu().ready_since(T0 - timedelta(seconds=60)))
    assert run(fleet.snapshot()).diagnostics.slices_recovering == 1


def test_A10_application_crash_on_healthy_slice_plans_nothing() -> None:
    fleet = Fleet().slices("p0", "p1", "v0")
    high = fleet.run(JobSetBuilder("ml", "high").replicated_job("w", 2), ["p0", "p1"], 1000)
    fleet.run(JobSetBuilder("ml", "low").replicated_job("w", 1), ["v0"], 10)
    from gke_tpu_priority.hotswap.model import PodPhase

    fleet.pods = [replace(p, phase=PodPhase.FAILED) if p.jobset_name == high.name else p for p in fleet.pods]
    assert run(fleet.snapshot()).actions == ()


# --- B. victim selection --------------------------------------------------------------------------------


def test_B1_spare_slice_is_used_before_any_victim() -> None:
    fleet, _ = disrupted_fleet({"low": 10})
    fleet.slices("spare")
    result = run(fleet.snapshot())
    assert held(result) == []
    record = next(a for a in result.actions if isinstance(a, RecordOp))
    op = record.op
    assert op is not None and op.slices == ("spare",)
    # p1, which the preemptor still holds, is reserved too: its restart empties p1 before the new attempt runs.
    assert op.kept == ("p1",) and op.reserved == ("p1", "spare")


def test_B2_single_lower_priority_victim_is_held() -> None:
    fleet, _ = disrupted_fleet({"low": 10})
    result = run(fleet.snapshot())
    hold = next(a for a in result.actions if isinstance(a, HoldVictim))
    assert hold.set_annotations[KEYS.held_since] == format_time(T0)
    assert HeldBy.decode(hold.set_annotations[KEYS.held_by]).name == "high"  # type: ignore[union-attr]


@pytest.mark.parametrize("victim_priority", [1000, 2000], ids=["B3_equal", "B4_higher"])
def test_B3_B4_equal_or_higher_occupants_block(victim_priority: int) -> None:
    fleet, _ = disrupted_fleet({"peer": victim_priority})
    result = run(fleet.snapshot())
    assert result.actions == ()
    assert reasons(result) == [EventReason.BLOCKED]


def test_B5_one_two_slice_victim_beats_two_one_slice_victims() -> None:
    fleet = Fleet().slices("p0", "p1", "a0", "a1", "b0", "c0")
    high = fleet.run(JobSetBuilder("ml", "high").replicated_job("w", 2), ["p0", "p1"], 1000)
    fleet.run(JobSetBuilder("ml", "big").replicated_job("w", 2), ["a0", "a1"], 10)
    fleet.run(JobSetBuilder("ml", "aa").replicated_job("w", 1), ["b0"], 10)
    fleet.run(JobSetBuilder("ml", "ab").replicated_job("w", 1), ["c0"], 10)
    for pool in ("p0", "p1"):
        fleet.fail(pool, FAILED_AT).evict_pods(high, pool, FAILED_AT)
    assert held(run(fleet.snapshot())) == ["big"]


def test_B6_lowest_max_priority_wins_over_surplus() -> None:
    fleet = Fleet().slices("p0", "p1", "a0", "b0", "b1", "b2")
    high = fleet.run(JobSetBuilder("ml", "high").replicated_job("w", 2), ["p0", "p1"], 1000)
    fleet.run(JobSetBuilder("ml", "vone").replicated_job("w", 1), ["a0"], 100)
    fleet.run(JobSetBuilder("ml", "vtwo").replicated_job("w", 3), ["b0", "b1", "b2"], 50)
    fleet.fail("p0", FAILED_AT).evict_pods(high, "p0", FAILED_AT)
    assert held(run(fleet.snapshot())) == ["vtwo"]


def test_B7_ties_break_by_name() -> None:
    fleet, _ = disrupted_fleet({"zeta": 10, "alpha": 10})
    assert held(run(fleet.snapshot())) == ["alpha"]


def test_B8_shape_mismatch_is_not_a_candidate() -> None:
    fleet = Fleet().slices("p0", "p1").slices("small", topology="2x4")
    high = fleet.run(JobSetBuilder("ml", "high").replicated_job("w", 2), ["p0", "p1"], 1000)
    fleet.run(JobSetBuilder("ml", "low").replicated_job("w", 1, SliceShape("tpu-v6e-slice", "2x4", 4)), ["small"], 10)
    fleet.fail("p0", FAILED_AT).evict_pods(high, "p0", FAILED_AT)
    assert reasons(run(fleet.snapshot())) == [EventReason.BLOCKED]


def test_B9_slice_shared_with_a_higher_occupant_is_not_preemptible() -> None:
    fleet, _ = disrupted_fleet({"low": 10})
    fleet.run(JobSetBuilder("ml", "other").replicated_job("w", 1), ["v0"], 5000)
    assert reasons(run(fleet.snapshot())) == [EventReason.BLOCKED]


def test_B10_victim_already_evicted_by_kueue_is_not_selected() -> None:
    fleet, _ = disrupted_fleet({"low": 10})
    wl = next(w for w in fleet.workloads.values() if w.name.startswith("jobset-low"))
    fleet.set_workload(WorkloadBuilder.from_obj(wl).condition("Evicted", ConditionStatus.TRUE, "Preempted").obj())
    assert held(run(fleet.snapshot())) == []


def test_B11_victim_with_only_pending_pods_is_not_a_candidate() -> None:
    from gke_tpu_priority.hotswap.model import PodPhase

    fleet, _ = disrupted_fleet({"low": 10})
    fleet.pods = [
        replace(p, node_name=None, phase=PodPhase.PENDING) if p.jobset_name == "low" else p for p in fleet.pods
    ]
    assert held(run(fleet.snapshot())) == []


def test_B12_victim_without_workload_is_not_a_candidate() -> None:
    fleet, _ = disrupted_fleet({"low": 10})
    fleet.workloads = {k: w for k, w in fleet.workloads.items() if not w.name.startswith("jobset-low")}
    assert held(run(fleet.snapshot())) == []


def test_B13_scope_limits_victims() -> None:
    fleet = Fleet().slices("p0", "p1", "v0").queue("cq", "c1").queue("other", "c2")
    high = fleet.run(JobSetBuilder("ml", "high").replicated_job("w", 2), ["p0", "p1"], 1000, "cq")
    fleet.run(JobSetBuilder("ml", "low").replicated_job("w", 1), ["v0"], 10, "other")
    fleet.fail("p0", FAILED_AT).evict_pods(high, "p0", FAILED_AT)
    assert held(run(fleet.snapshot())) == []
    assert held(run(fleet.snapshot(), HotswapConfig(scope=Scope.CLUSTER))) == ["low"]


def test_B14_protected_victim_is_skipped() -> None:
    fleet = Fleet().slices("p0", "p1", "v0")
    high = fleet.run(JobSetBuilder("ml", "high").replicated_job("w", 2), ["p0", "p1"], 1000)
    fleet.run(JobSetBuilder("ml", "low").replicated_job("w", 1).annotation(KEYS.protect, "true"), ["v0"], 10)
    fleet.fail("p0", FAILED_AT).evict_pods(high, "p0", FAILED_AT)
    assert held(run(fleet.snapshot())) == []


@pytest.mark.parametrize("variant", ["node-selector", "managed-by"])
def test_B15_static_or_foreign_victims_are_skipped(variant: str) -> None:
    fleet = Fleet().slices("p0", "p1", "v0")
    high = fleet.run(JobSetBuilder("ml", "high").replicated_job("w", 2), ["p0", "p1"], 1000)
    low = JobSetBuilder("ml", "low").replicated_job("w", 1)
    low = low.node_selector_strategy() if variant == "node-selector" else low.managed_by("kueue.x-k8s.io/multikueue")
    fleet.run(low, ["v0"], 10)
    fleet.fail("p0", FAILED_AT).evict_pods(high, "p0", FAILED_AT)
    assert held(run(fleet.snapshot())) == []


def test_B16_pod_and_kueue_priority_disagreement_is_skipped() -> None:
    fleet = Fleet().slices("p0", "p1", "v0")
    high = fleet.run(JobSetBuilder("ml", "high").replicated_job("w", 2), ["p0", "p1"], 1000)
    fleet.run(JobSetBuilder("ml", "low").replicated_job("w", 1), ["v0"], 10, pod_priority=5000)
    fleet.fail("p0", FAILED_AT).evict_pods(high, "p0", FAILED_AT)
    assert held(run(fleet.snapshot())) == []


def test_B17_infra_disrupted_victim_is_not_a_candidate() -> None:
    fleet = Fleet().slices("p0", "p1", "v0", "v1")
    high = fleet.run(JobSetBuilder("ml", "high").replicated_job("w", 2), ["p0", "p1"], 1000)
    low = fleet.run(JobSetBuilder("ml", "low").replicated_job("w", 2), ["v0", "v1"], 10)
    fleet.fail("p0", FAILED_AT).evict_pods(high, "p0", FAILED_AT)
    fleet.fail("v1", FAILED_AT).evict_pods(low, "v1", FAILED_AT)
    assert held(run(fleet.snapshot())) == []


def _struck_low(whole_again: bool) -> Fleet:
    """H on p0+p1 (p0 failed). L was struck on w0 a minute ago (its attempt-0 pod departed from the failed slice,
    still inside `attributionWindow`); `whole_again`: its attempt 1 now runs on v0, else its pod waits unbound."""
    fleet = Fleet().slices("p0", "p1", "v0", "w0")
    high = fleet.run(JobSetBuilder("ml", "high").replicated_job("w", 2), ["p0", "p1"], 1000)
    low_builder = JobSetBuilder("ml", "low").replicated_job("w", 1).restarts(1)
    low = fleet.run(low_builder, ["v0"] if whole_again else [], 10)
    if not whole_again:
        fleet.wait(low, FAILED_AT)
    fleet.fail("w0", FAILED_AT).fail("p0", FAILED_AT).evict_pods(high, "p0", FAILED_AT)
    fleet.departed.append(DepartedPod("ml", low.name, 0, fleet.pools["w0"][0], "w0", FAILED_AT, 10, failed=True))
    return fleet


def test_B17_a_struck_victim_whole_again_is_a_candidate() -> None:
    """Infra evidence outlives the restart by `attributionWindow`; a JobSet running whole again on healthy slices
    is ordinary work, not a preemptor (excluding it would leave the top tier blocked for the whole window while the
    cheapest victim, just restarted, runs next to it). Control: the same JobSet still short is no victim."""
    assert held(run(_struck_low(whole_again=True).snapshot())) == ["low"]
    assert held(run(_struck_low(whole_again=False).snapshot())) == []


def test_B18_higher_preemptor_gets_the_only_victim() -> None:
    fleet = Fleet().slices("p0", "p1", "q0", "q1", "v0")
    h1 = fleet.run(JobSetBuilder("ml", "h1").replicated_job("w", 2), ["p0", "p1"], 2000)
    h2 = fleet.run(JobSetBuilder("ml", "h2").replicated_job("w", 2), ["q0", "q1"], 1000)
    fleet.run(JobSetBuilder("ml", "low").replicated_job("w", 1), ["v0"], 10)
    fleet.fail("p0", FAILED_AT).evict_pods(h1, "p0", FAILED_AT)
    fleet.fail("q0", FAILED_AT).evict_pods(h2, "q0", FAILED_AT)
    result = run(fleet.snapshot())
    hold = next(a for a in result.actions if isinstance(a, HoldVictim))
    assert hold.preemptor.name.startswith("jobset-h1")
    blocked = [e for e in result.events if e.reason is EventReason.BLOCKED]
    assert [e.involved.name for e in blocked] == ["h2"]


def test_B19_cpu_replicated_jobs_create_no_deficit() -> None:
    fleet = Fleet().slices("p0", "p1", "v0")
    js = JobSetBuilder("ml", "high").replicated_job("w", 2).replicated_job("coordinator", 1, None)
    high = fleet.run(js, ["p0", "p1"], 1000)
    fleet.run(JobSetBuilder("ml", "low").replicated_job("w", 1), ["v0"], 10)
    fleet.fail("p0", FAILED_AT).evict_pods(high, "p0", FAILED_AT)
    result = run(fleet.snapshot())
    assert held(result) == ["low"]


# --- C. Kueue interplay ---------------------------------------------------------------------------------


def test_C2_crash_after_record_before_hold_resumes_the_hold_once() -> None:
    fleet, _ = disrupted_fleet({"low": 10})
    snap = fleet.snapshot()
    first = plan(snap, T0, CFG)
    record_only = apply_actions(snap, [a for a in first.actions if isinstance(a, RecordOp)], T0)
    resumed = run(record_only, now=T0 + timedelta(seconds=5))
    assert held(resumed) == ["low"]
    assert not any(isinstance(a, RecordOp) for a in resumed.actions)


def test_C3_crash_after_hold_before_record_reconstructs_the_op() -> None:
    fleet, _ = disrupted_fleet({"low": 10})
    snap = fleet.snapshot()
    first = plan(snap, T0, CFG)
    holds_only = apply_actions(snap, [a for a in first.actions if isinstance(a, HoldVictim)], T0)
    resumed = run(holds_only, now=T0 + timedelta(seconds=5))
    records = [a for a in resumed.actions if isinstance(a, RecordOp)]
    assert len(records) == 1 and held(resumed) == []
    rebuilt = records[0].op
    victim_key = next(a.workload.key for a in first.actions if isinstance(a, HoldVictim))
    assert rebuilt is not None and rebuilt.victims == (victim_key,)


def test_C7_finished_victim_is_not_held() -> None:
    fleet, _ = disrupted_fleet({"low": 10})
    wl = next(w for w in fleet.workloads.values() if w.name.startswith("jobset-low"))
    fleet.set_workload(WorkloadBuilder.from_obj(wl).condition("Finished", ConditionStatus.TRUE).obj())
    assert held(run(fleet.snapshot())) == []


def _held_state(release_on: ReleaseOnPreemptorGone = ReleaseOnPreemptorGone.CAPACITY) -> tuple[Fleet, ClusterSnapshot]:
    fleet, _ = disrupted_fleet({"low": 10})
    snap = fleet.snapshot()
    return fleet, apply_actions(snap, plan(snap, T0, CFG).actions, T0)


@pytest.mark.parametrize("how", ["C8_evicted", "C9_failed", "C10_suspended"])
def test_C8_C9_C10_preemptor_gone_aborts_and_releases(how: str) -> None:
    _, state = _held_state()
    jobsets = list(state.jobsets)
    workloads = list(state.workloads)
    high_js = next(j for j in jobsets if j.name == "high")
    if how == "C8_evicted":
        workloads = [
            WorkloadBuilder.from_obj(w).condition("Evicted", ConditionStatus.TRUE, "PodsReadyTimeout").obj()
            if w.owner_jobset_uid == high_js.uid
            else w
            for w in workloads
        ]
    else:
        changed = replace(high_js, terminal_state="Failed") if how == "C9_failed" else replace(high_js, suspended=True)
        jobsets = [changed if j.uid == high_js.uid else j for j in jobsets]
    state = replace(state, jobsets=tuple(jobsets), workloads=tuple(workloads))
    config = HotswapConfig(release_on_preemptor_gone=ReleaseOnPreemptorGone.IMMEDIATE)
    result = run(state, config, now=T0 + timedelta(seconds=30))
    assert any(isinstance(a, ClearOp) for a in result.actions)
    releases = [a for a in result.actions if isinstance(a, ReleaseVictim)]
    assert [r.reason for r in releases] == [ReleaseReason.PREEMPTOR_GONE]


def test_C11_manual_reactivation_drops_the_hold() -> None:
    _, state = _held_state()
    state = replace(
        state,
        workloads=tuple(replace(w, active=True) if KEYS.held_by in w.annotations else w for w in state.workloads),
    )
    result = run(state, now=T0 + timedelta(seconds=30))
    assert [a.reason for a in result.actions if isinstance(a, ReleaseVictim)] == [ReleaseReason.REACTIVATED_EXTERNALLY]


def _intruded(intruder_priority: int = 5, pool: str = "v0", config: HotswapConfig = CFG) -> tuple[Fleet, JobSet]:
    """`low` is held for `high` and its pods have left v0; Kueue then admitted `intruder` with the quota the hold
    released, and its leader pod now runs on `pool` (a slice reserved for `high`, C12)."""
    fleet, _high = disrupted_fleet({"low": 10})
    snap = fleet.snapshot()
    state = apply_actions(snap, plan(snap, T0, config).actions, T0)
    fleet.workloads = {w.uid: w for w in state.workloads}
    fleet.pods = [p for p in fleet.pods if p.jobset_name != "low"]
    intruder = fleet.run(JobSetBuilder("ml", "intruder").replicated_job("w", 1), [pool], intruder_priority)
    leader = f"{intruder.name}-w-0-0"
    fleet.pods = [p for p in fleet.pods if p.jobset_name != intruder.name or p.name == leader]
    return fleet, intruder


def test_C12_newcomer_on_a_reserved_slice_is_held_as_an_op_extension() -> None:
    fleet, _ = _intruded()
    result = run(fleet.snapshot(), now=T0 + timedelta(seconds=40))
    assert held(result) == ["intruder"]
    record = next(a for a in result.actions if isinstance(a, RecordOp))
    op = record.op
    assert op is not None and [v.split("-")[1] for v in op.victims] == ["intruder", "low"]
    assert op.slices == ("v0",) and op.kept == ("p1",)
    assert result.diagnostics.ops_extended_victims == 1
    assert EventReason.DONE not in reasons(result)


def test_C12_newcomer_on_the_preemptors_own_emptied_slice_is_held_too() -> None:
    fleet, _ = _intruded(pool="p1")
    fleet.pods = [p for p in fleet.pods if not (p.jobset_name == "high" and p.node_pool == "p1")]
    assert held(run(fleet.snapshot(), now=T0 + timedelta(seconds=40))) == ["intruder"]


def test_C12_newcomer_next_to_the_preemptors_leader_on_a_healed_slice_is_held() -> None:
    """A transient failure heals while the preemptor restarts: its new leader lands on the recovered p0 (not
    reserved: kube-scheduler ignores reservations) and a newcomer's leader lands next to it."""
    fleet, _ = _intruded(pool="p0")
    fleet.pods = [p for p in fleet.pods if not (p.jobset_name == "high" and p.node_pool == "p0")]
    healed = T0 + timedelta(seconds=20)
    for name in fleet.pools["p0"]:
        fleet.node(name, NodeBuilder(name).pool("p0").tpu().ready_since(healed))
    high = next(j for j in fleet.jobsets.values() if j.name == "high")
    fleet.jobsets[high.uid] = replace(high, restarts=1)
    leader = PodBuilder("ml", "high-w-0-0-a1", "high").job("w", 0).attempt(1).on("p0-1", "p0").priority(1000)
    fleet.pods += [leader.obj()]
    result = run(fleet.snapshot(), now=T0 + timedelta(seconds=40))
    assert held(result) == ["intruder"]
    record = next(a for a in result.actions if isinstance(a, RecordOp))
    op = record.op
    assert op is not None and op.slices == ("p0", "v0")  # the healed slice is reserved from now on
    assert EventReason.DONE not in reasons(result)


@pytest.mark.parametrize(("protect", "why"), [(True, "protected"), (False, "hold rate limit")])
def test_C12_newcomer_that_may_not_be_held_blocks_without_any_eviction(protect: bool, why: str) -> None:
    fleet, intruder = _intruded()
    wl = fleet.workload_of(intruder)
    if protect:
        fleet.set_workload(WorkloadBuilder.from_obj(wl).annotation(KEYS.protect, "true").obj())
    else:
        history = ",".join(format_time(T0 - timedelta(hours=h)) for h in (1, 2, 3))
        fleet.set_workload(WorkloadBuilder.from_obj(wl).annotation(KEYS.hold_history, history).obj())
    result = run(fleet.snapshot(), now=T0 + timedelta(seconds=40))
    assert held(result) == [] and result.actions == ()  # I6: nothing evicted, the op stays as it was
    blocked = [e for e in result.events if e.reason is EventReason.BLOCKED]
    assert len(blocked) == 1 and why in blocked[0].message and "v0" in blocked[0].message


def _op_written(result: Plan) -> OpRecord:
    record = next(a for a in result.actions if isinstance(a, RecordOp))
    op = record.op
    assert op is not None
    return op


def test_C12_reserved_slice_taken_by_equal_priority_is_given_up_and_re_planned() -> None:
    """An equal-priority JobSet (never a victim, I1) took v0, reserved for `high`: the slice is lost for good, so
    the op gives it up and re-plans the missing slice with a new victim instead of waiting, blocked, for Kueue's
    waitForPodsReady eviction (storm traces: two equal preemptors swapping slices)."""
    fleet, _ = _intruded(1000)
    fleet.slices("v9").run(JobSetBuilder("ml", "spare").replicated_job("w", 1), ["v9"], 5)
    result = run(fleet.snapshot(), now=T0 + timedelta(seconds=40))
    assert held(result) == ["spare"]
    op = _op_written(result)
    assert op.slices == ("v9",) and op.kept == ("p1",)  # v0 given up, v9 instead
    assert [v.split("-")[1] for v in op.victims] == ["low", "spare"]  # low stays held until high is placed
    assert op.since == T0  # the same op, re-planned (I8 is not asked again)
    given_up = [e for e in result.events if e.reason is EventReason.BLOCKED]
    assert len(given_up) == 1 and "v0 is taken by ml/intruder" in given_up[0].message
    assert any(e.reason is EventReason.PLANNED and "re-planned" in e.message for e in result.events)


def test_C12_reserved_slice_given_up_without_a_replacement_reports_blocked() -> None:
    fleet, _ = _intruded(1000)
    result = run(fleet.snapshot(), now=T0 + timedelta(seconds=40))
    assert held(result) == []  # I6: nothing to free the missing slice with, so nothing more is held
    op = _op_written(result)
    assert op.slices == () and op.kept == ("p1",) and [v.split("-")[1] for v in op.victims] == ["low"]
    messages = [e.message for e in result.events if e.reason is EventReason.BLOCKED]
    assert len(messages) == 2 and "given up" in messages[0] and "no lower-priority victims" in messages[1]


def test_C12_reserved_slice_given_up_lets_the_extension_hold_an_intruder_where_the_preemptor_landed() -> None:
    """Storm trace: equal-priority `intruder` took reserved v0 and `high`'s new leader landed on v9, where a
    lower-priority leader sits next to it. Blocked by v0, the op held nobody until waitForPodsReady evicted `high`
    (20 min, then Kueue ping-pong); with v0 given up, the squatter is held at once."""
    fleet, _ = _intruded(1000)
    squatter = fleet.slices("v9").run(JobSetBuilder("ml", "squatter").replicated_job("w", 1), ["v9"], 5)
    fleet.pods = [p for p in fleet.pods if p.jobset_name != squatter.name or p.name.endswith("-0-0")]
    high = next(j for j in fleet.jobsets.values() if j.name == "high")
    fleet.jobsets[high.uid] = replace(high, restarts=1)
    leader = PodBuilder("ml", "high-w-0-0-a1", "high").job("w", 0).attempt(1).on("v9-1", "v9").priority(1000)
    fleet.pods += [leader.obj()]
    result = run(fleet.snapshot(), now=T0 + timedelta(seconds=40))
    assert held(result) == ["squatter"]
    op = _op_written(result)
    assert op.slices == ("v9",) and op.kept == ("p1",)


def test_C12_reserved_slice_is_kept_while_the_preemptor_has_pods_there() -> None:
    """Equal-priority pods next to the preemptor's own new leader are JobSet's business: nothing is given up."""
    fleet, _ = _intruded(1000)
    high = next(j for j in fleet.jobsets.values() if j.name == "high")
    fleet.jobsets[high.uid] = replace(high, restarts=1)
    leader = PodBuilder("ml", "high-w-0-0-a1", "high").job("w", 0).attempt(1).on("v0-1", "v0").priority(1000)
    fleet.pods += [leader.obj()]
    result = run(fleet.snapshot(), now=T0 + timedelta(seconds=40))
    assert held(result) == [] and result.actions == ()
    assert ["not of strictly lower priority" in e.message for e in result.events] == [True]


def test_C12_extension_respects_the_victim_budget() -> None:
    config = HotswapConfig(max_victims_per_pass=1)
    fleet, _ = _intruded(config=config)
    other = fleet.run(JobSetBuilder("ml", "second").replicated_job("w", 1), ["p1"], 5)
    fleet.pods = [p for p in fleet.pods if p.jobset_name != other.name or p.name.endswith("-0-0")]
    result = run(fleet.snapshot(), config, now=T0 + timedelta(seconds=40))
    assert held(result) == []
    assert any("maxVictimsPerPass" in e.message for e in result.events if e.reason is EventReason.BLOCKED)


def test_done_needs_every_pod_of_the_attempt_not_one_per_slice() -> None:
    fleet, _ = _intruded()
    fleet.pods = [p for p in fleet.pods if p.jobset_name not in ("intruder", "high") or p.node_pool == "p1"]
    fleet.pods += [PodBuilder("ml", "high-w-0-0", "high").job("w", 0).on("v0-0", "v0").priority(1000).obj()]
    later = T0 + timedelta(seconds=60)
    assert EventReason.DONE not in reasons(run(fleet.snapshot(), now=later))  # leader only: followers missing
    fleet.pods += [
        PodBuilder("ml", f"high-w-0-{i}", "high").job("w", 0).on(f"v0-{i}", "v0").priority(1000).obj()
        for i in range(1, 4)
    ]
    result = run(fleet.snapshot(), now=later)
    assert EventReason.DONE in reasons(result)
    assert any(isinstance(a, ClearOp) for a in result.actions)


def _fresh(
    priority: int = 5,
    admitted: timedelta = timedelta(seconds=2),
    on: list[str] | None = None,
    config: HotswapConfig = CFG,
    name: str = "fresh",
) -> tuple[Fleet, JobSet]:
    """`low` is held for `high` at T0 and Kueue evicted it (its pods still terminate on v0); `high` restarted
    (attempt 1, old pods on p1 terminating). Kueue then admitted `fresh` at T0 + `admitted` with the quota the
    hold released. Its JobSet has no pods yet (or Running ones on `on`)."""
    fleet, high = disrupted_fleet({"low": 10})
    snap = fleet.snapshot()
    state = apply_actions(snap, plan(snap, T0, config).actions, T0)
    fleet.workloads = {w.uid: w for w in state.workloads}
    low = next(w for w in fleet.workloads.values() if w.name.startswith("jobset-low"))
    fleet.set_workload(
        WorkloadBuilder.from_obj(low)
        .condition("QuotaReserved", ConditionStatus.FALSE, "Pending", T0 + timedelta(seconds=1))
        .condition("Admitted", ConditionStatus.FALSE, "Pending", T0 + timedelta(seconds=1))
        .condition("Evicted", ConditionStatus.TRUE, "Deactivated", T0 + timedelta(seconds=1))
        .obj()
    )
    fleet.jobsets[high.uid] = replace(high, restarts=1)
    fleet.pods = [
        replace(p, deletion_timestamp=T0) if p.jobset_name in ("high", "low") and p.node_pool in ("p1", "v0") else p
        for p in fleet.pods
    ]
    fleet.slices("x0")  # joins after the op was planned (else it would have been a spare)
    newcomer = fleet.run(
        JobSetBuilder("ml", name).replicated_job("w", 1), on or [], priority, admitted_at=T0 + admitted
    )
    return fleet, newcomer


def _op_of(result: Plan) -> OpRecord:
    record = next(a for a in result.actions if isinstance(a, RecordOp))
    op = record.op
    assert op is not None
    return op


def test_C12_fence_holds_a_fresh_admission_before_its_pods_exist() -> None:
    fleet, _ = _fresh()
    result = run(fleet.snapshot(), now=T0 + timedelta(seconds=3))
    assert held(result) == ["fresh"]
    assert [v.split("-")[1] for v in _op_of(result).victims] == ["fresh", "low"]  # recorded like an extension
    assert result.diagnostics.ops_fenced_victims == 1 and result.diagnostics.ops_extended_victims == 0
    hold = next(a for a in result.actions if isinstance(a, HoldVictim))
    assert hold.preemptor.name.startswith("jobset-high") and hold.set_annotations[KEYS.held_since]
    assert any("admission fence" in e.message for e in result.events)


def test_C12_fence_leaves_work_admitted_before_the_op_started() -> None:
    fleet, _ = _fresh(admitted=-timedelta(seconds=10))
    result = run(fleet.snapshot(), now=T0 + timedelta(seconds=3))
    assert held(result) == [] and result.actions == ()


def test_C12_fence_never_holds_running_work() -> None:
    """Admitted after the op started, but already Running on a slice of its own: not the fence's business."""
    fleet, _ = _fresh(on=["x0"])
    result = run(fleet.snapshot(), now=T0 + timedelta(seconds=3))
    assert held(result) == [] and result.actions == ()


@pytest.mark.parametrize(
    ("priority", "protect", "history"),
    [(1000, False, 0), (2000, False, 0), (5, True, 0), (5, False, 3)],
    ids=["I1_equal_priority", "higher_priority", "protected", "I12_rate_limited"],
)
def test_C12_fence_never_holds_what_may_not_be_a_victim(priority: int, protect: bool, history: int) -> None:
    fleet, newcomer = _fresh(priority)
    wl = fleet.workload_of(newcomer)
    if protect:
        fleet.set_workload(WorkloadBuilder.from_obj(wl).annotation(KEYS.protect, "true").obj())
    if history:
        times = ",".join(format_time(T0 - timedelta(hours=h)) for h in range(1, history + 1))
        fleet.set_workload(WorkloadBuilder.from_obj(wl).annotation(KEYS.hold_history, times).obj())
    result = run(fleet.snapshot(), now=T0 + timedelta(seconds=3))
    assert held(result) == [] and result.actions == ()


def test_C12_fence_holds_no_more_than_the_slices_still_at_risk() -> None:
    """v0 and the preemptor's own p1 are at risk: two newcomers at most, lowest priority first."""
    fleet, _ = _fresh(priority=7, name="fresha")
    for name, prio in (("freshb", 5), ("freshc", 6)):
        fleet.run(JobSetBuilder("ml", name).replicated_job("w", 1), [], prio, admitted_at=T0 + timedelta(seconds=2))
    result = run(fleet.snapshot(), now=T0 + timedelta(seconds=3))
    assert held(result) == ["freshb", "freshc"]
    # Once the preemptor's new attempt is bound on every host of p1, only v0 is at risk.
    fleet.pods = [p for p in fleet.pods if not (p.jobset_name == "high" and p.node_pool == "p1")]
    fleet.pods += [
        PodBuilder("ml", f"high-w-0-{i}-a1", "high")
        .job("w", 0)
        .attempt(1)
        .on(f"p1-{i}", "p1")
        .priority(1000)
        .phase(PodPhase.PENDING)
        .obj()
        for i in range(4)
    ]
    assert held(run(fleet.snapshot(), now=T0 + timedelta(seconds=3))) == ["freshb"]


def test_C12_fence_counts_holds_whose_quota_kueue_has_not_released_yet() -> None:
    """Right after the fence's holds are written (Kueue has not evicted them), a pass holds nobody else: each
    of those holds will let exactly one more workload in, and the next pass fences that one (I11)."""
    fleet, _ = _fresh(priority=7, name="fresha")
    for name, prio in (("freshb", 5), ("freshc", 6)):
        fleet.run(JobSetBuilder("ml", name).replicated_job("w", 1), [], prio, admitted_at=T0 + timedelta(seconds=2))
    now = T0 + timedelta(seconds=3)
    snap = fleet.snapshot()
    state = apply_actions(snap, run(snap, now=now).actions, now)
    assert run(state, now=now + timedelta(seconds=1)).actions == ()
    # Kueue evicts freshb (its quota is free again): one slot opens, and the fresh admission left gets it.
    state = replace(
        state,
        workloads=tuple(
            WorkloadBuilder.from_obj(w).condition("QuotaReserved", ConditionStatus.FALSE, "Pending", now).obj()
            if w.name.startswith("jobset-freshb")
            else w
            for w in state.workloads
        ),
    )
    assert held(run(state, now=now + timedelta(seconds=2))) == ["fresha"]


def test_C12_fence_respects_the_victim_budget() -> None:
    """maxVictimsPerPass is a per-pass rate limit: the fence holds the lowest fresh admission now and the other
    on the next pass (so, as for several preemptors competing for the budget, that next pass writes again)."""
    config = HotswapConfig(max_victims_per_pass=1)
    fleet, _ = _fresh(config=config)
    fleet.run(JobSetBuilder("ml", "second").replicated_job("w", 1), [], 4, admitted_at=T0 + timedelta(seconds=2))
    now = T0 + timedelta(seconds=3)
    snap = fleet.snapshot()
    first = plan(snap, now, config)
    assert_invariants(snap, first, config)
    assert held(first) == ["second"]
    state = apply_actions(snap, first.actions, now)
    second = plan(state, now, config)
    assert_invariants(state, second, config)
    assert held(second) == ["fresh"]


def test_C12_fenced_newcomer_stays_held_until_done_then_is_released_on_capacity() -> None:
    fleet, _ = _fresh(priority=50)  # above `low`, so it is first in line for the one free slice
    snap = fleet.snapshot()
    later = T0 + timedelta(seconds=3)
    state = apply_actions(snap, run(snap, now=later).actions, later)
    # Its Workload is now inactive and Kueue evicted it; the preemptor is not placed yet: stays held.
    assert not any(isinstance(a, ReleaseVictim) for a in run(state, now=later + timedelta(seconds=30)).actions)
    # The preemptor runs on p1 + v0 (low's pods gone) and x0 frees up: Done, then a release on capacity.
    pods = [p for p in state.pods if p.jobset_name not in ("low", "high")]
    pods += [
        PodBuilder("ml", f"high-w-{j}-{i}-a1", "high")
        .job("w", j)
        .attempt(1)
        .on(f"{pool}-{i}", pool)
        .priority(1000)
        .obj()
        for j, pool in enumerate(("p1", "v0"))
        for i in range(4)
    ]
    state = replace(state, pods=tuple(pods))
    result = run(state, now=later + timedelta(seconds=60))
    assert EventReason.DONE in reasons(result)
    released = [a for a in result.actions if isinstance(a, ReleaseVictim)]
    assert [(a.workload.name.split("-")[1], a.reason) for a in released] == [("fresh", ReleaseReason.CAPACITY)]


# --- E. recovery and release ----------------------------------------------------------------------------


def _recover(snapshot: ClusterSnapshot, pool: str, since: object) -> ClusterSnapshot:
    nodes = tuple(
        NodeBuilder(n.name).pool(pool).tpu().ready_since(since).obj() if n.node_pool == pool else n  # type: ignore[arg-type]
        for n in snapshot.nodes
    )
    return replace(snapshot, nodes=nodes)


def test_E1_E3_victim_stays_held_until_preemptor_placed_then_released_on_capacity() -> None:
    fleet, _high = disrupted_fleet({"low": 10})
    snap = fleet.snapshot()
    state = apply_actions(snap, plan(snap, T0, CFG).actions, T0)
    later = T0 + timedelta(minutes=10)
    state = _recover(state, "p0", T0)
    # E3: recovered, but H not yet placed: stays held.
    assert not any(isinstance(a, ReleaseVictim) for a in run(state, now=later).actions)
    # H moves onto v0: low's pods are gone, H runs on p1 + v0.
    pods = [
        p for p in state.pods if p.jobset_name not in ("low",) and not (p.jobset_name == "high" and p.node_pool == "p0")
    ]
    pods += [
        PodBuilder("ml", f"high-w-1-{i}", "high").job("w", 1).on(f"v0-{i}", "v0").priority(1000).obj() for i in range(4)
    ]
    state = replace(state, pods=tuple(pods))
    result = run(state, now=later)
    assert EventReason.DONE in reasons(result)
    assert [a.reason for a in result.actions if isinstance(a, ReleaseVictim)] == [ReleaseReason.CAPACITY]


def test_E4_partial_capacity_keeps_victim_held() -> None:
    fleet = Fleet().slices("p0", "p1", "p2", "v0", "v1")
    high = fleet.run(JobSetBuilder("ml", "high").replicated_job("w", 3), ["p0", "p1", "p2"], 1000)
    fleet.run(JobSetBuilder("ml", "low").replicated_job("w", 2), ["v0", "v1"], 10)
    fleet.fail("p0", FAILED_AT).evict_pods(high, "p0", FAILED_AT)
    fleet.fail("p1", FAILED_AT).evict_pods(high, "p1", FAILED_AT)
    snap = fleet.snapshot()
    state = apply_actions(snap, plan(snap, T0, CFG).actions, T0)
    # Preemptor finished; only p0 recovers: low needs 2 slices, 1 free -> stays held.
    state = replace(
        state, jobsets=tuple(replace(j, terminal_state="Completed") if j.name == "high" else j for j in state.jobsets)
    )
    others = [PodBuilder("ml", f"mid-{i}", "mid").on(name, "p2").obj() for i, name in enumerate(fleet.pools["p2"])]
    state = replace(state, pods=(*(p for p in state.pods if p.jobset_name != "high"), *others))
    state = _recover(state, "p0", T0 - timedelta(hours=1))
    result = run(state, now=T0 + timedelta(minutes=10))
    assert not any(isinstance(a, ReleaseVictim) for a in result.actions)
    # Once p1 recovers too, capacity covers both slices and the victim is released.
    state = _recover(state, "p1", T0 - timedelta(hours=1))
    result = run(state, now=T0 + timedelta(minutes=10))
    assert [a.reason for a in result.actions if isinstance(a, ReleaseVictim)] == [ReleaseReason.PREEMPTOR_GONE]


def test_E6_max_hold_releases_regardless() -> None:
    _, state = _held_state()
    result = run(state, now=T0 + CFG.max_hold + timedelta(seconds=1))
    assert [a.reason for a in result.actions if isinstance(a, ReleaseVictim)] == [ReleaseReason.MAX_HOLD]


def test_E8_held_victims_are_not_candidates_again() -> None:
    _, state = _held_state()
    assert held(run(state, now=T0 + timedelta(seconds=10))) == []


# --- F. anti-thrash -------------------------------------------------------------------------------------


def test_F1_hold_rate_limit_protects_a_repeat_victim() -> None:
    fleet, _ = disrupted_fleet({"low": 10})
    wl = next(w for w in fleet.workloads.values() if w.name.startswith("jobset-low"))
    history = ",".join(format_time(T0 - timedelta(hours=h)) for h in (1, 2, 3))
    fleet.set_workload(WorkloadBuilder.from_obj(wl).annotation(KEYS.hold_history, history).obj())
    assert held(run(fleet.snapshot())) == []


def test_F5_tas_cluster_queue_is_left_to_kueue() -> None:
    fleet = Fleet().slices("p0", "p1", "v0").queue("cq", "cohort", tas=True)
    high = fleet.run(JobSetBuilder("ml", "high").replicated_job("w", 2), ["p0", "p1"], 1000)
    fleet.run(JobSetBuilder("ml", "low").replicated_job("w", 1), ["v0"], 10)
    fleet.fail("p0", FAILED_AT).evict_pods(high, "p0", FAILED_AT)
    assert run(fleet.snapshot()).actions == ()


def test_fast_fail_is_opt_in_twice() -> None:
    fleet = Fleet().slices("p0", "p1", "spare")
    fleet.run(JobSetBuilder("ml", "high").replicated_job("w", 2).annotation(KEYS.fast_fail, "true"), ["p0", "p1"], 1000)
    fleet.fail("p0", T0 - timedelta(minutes=2))
    assert not any(isinstance(a, FastFailPod) for a in run(fleet.snapshot()).actions)
    enabled = HotswapConfig.model_validate({"fastFail": {"enabled": True}})
    result = run(fleet.snapshot(), enabled)
    assert [a.node_name for a in result.actions if isinstance(a, FastFailPod)] == ["p0-0"]


def test_departed_pods_attribute_a_restarted_preemptor() -> None:
    fleet, high = disrupted_fleet({"low": 10})
    fleet.depart_pods(high, "p0", T0 - timedelta(seconds=30))
    assert held(run(fleet.snapshot())) == ["low"]
    fleet.departed = [replace(d, gone_at=T0 - timedelta(hours=1)) for d in fleet.departed]
    assert held(run(fleet.snapshot())) == []
