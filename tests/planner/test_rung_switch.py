"""Rung switch: a JobSet whose spot VMs GCP reclaimed moves to the queued flex-start rung instead of taking a
lower JobSet's spot slice (`hotswap.planner.rungs`).

Each start case has a control that differs in one fact (the setting, the tier, the evidence, the room), so the
tests fail when the planner ignores it. The in-flight cases follow the Workload through the steps as Kueue moves it:
held, then suspended with its quota released, then deleted.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from gke_tpu_priority.hotswap.annotations import AnnotationKeys, format_time
from gke_tpu_priority.hotswap.config import HotswapConfig
from gke_tpu_priority.hotswap.model import ClusterSnapshot, ConditionStatus, JobSet
from gke_tpu_priority.hotswap.planner import plan
from gke_tpu_priority.hotswap.planner.actions import (
    EndRungSwitch,
    EventReason,
    HoldVictim,
    PinRung,
    Plan,
    StartRungSwitch,
)
from gke_tpu_priority.hotswap.planner.disruption import NODE_SHUTDOWN
from gke_tpu_priority.hotswap.slices import CAPACITY_LABEL, QUEUED_CAPACITY
from testkit.builders import SHAPE_4X4, T0, Fleet, JobSetBuilder, WorkloadBuilder
from tests.planner.invariants import assert_invariants, idempotence_violations

CFG = HotswapConfig(top_tier_priority=2000)
KEYS = AnnotationKeys(CFG.annotation_domain)
NOTICE = T0 - timedelta(seconds=20)
SPOT = replace(SHAPE_4X4, capacity="spot")
QUEUED = replace(SHAPE_4X4, capacity=QUEUED_CAPACITY)
CHIPS = 16  # one v6e 4x4 slice


def on(fleet: Fleet, capacity: str, *pools: str) -> Fleet:
    for pool in pools:
        for name in fleet.pools[pool]:
            fleet.nodes[name] = replace(fleet.nodes[name], capacity=capacity)
    return fleet


def reclaimed(priority: int = 2000, room: int = CHIPS, how: str = "deleted") -> Fleet:
    """`top` (`priority`) runs on spot slice s0, whose VMs GCP reclaims (`how`: nodes deleted, or shutting down);
    `low` runs on spot slice s1; the queue has `room` chips of queued-provisioning quota free."""
    fleet = on(Fleet().slices("s0", "s1"), "spot", "s0", "s1")
    top = fleet.run(JobSetBuilder("ml", "top").replicated_job("w", 1, SPOT), ["s0"], priority)
    fleet.run(JobSetBuilder("ml", "low").replicated_job("w", 1, SPOT), ["s1"], 1000)
    fleet.fail("s0", NOTICE, how=how, hosts=4).evict_pods(top, "s0", NOTICE, reason=NODE_SHUTDOWN)
    fleet.queues["cq"] = replace(fleet.queues["cq"], queued_room_chips=room)
    return fleet


def checked(snapshot: ClusterSnapshot, config: HotswapConfig = CFG, now=T0) -> Plan:  # type: ignore[no-untyped-def]
    result = plan(snapshot, now, config)
    assert_invariants(snapshot, result, config)
    assert idempotence_violations(snapshot, result, config) == []
    return result


def started(result: Plan) -> list[str]:
    return [a.jobset.name for a in result.actions if isinstance(a, StartRungSwitch)]


def held(result: Plan) -> list[str]:
    """The held Workloads' JobSets (Workload names are `jobset-<name>-<n>`)."""
    return [a.workload.name.split("-")[1] for a in result.actions if isinstance(a, HoldVictim)]


def test_a_top_tier_jobset_whose_spot_vms_are_gone_moves_to_the_queued_rung_instead_of_evicting() -> None:
    result = checked(reclaimed().snapshot())
    assert started(result) == ["top"] and held(result) == []
    (switch,) = [a for a in result.actions if isinstance(a, StartRungSwitch)]
    assert switch.capacity == QUEUED_CAPACITY and switch.set_annotations[KEYS.rung_switch] == QUEUED_CAPACITY
    assert result.diagnostics.rung_switches == 1
    assert [e.reason for e in result.events] == [EventReason.RUNG_SWITCH]


def test_switched_off_the_top_tier_takes_the_spot_victim_as_before() -> None:
    off = CFG.model_copy(update={"spot_rung_switch": False})
    result = checked(reclaimed().snapshot(), off)
    assert started(result) == [] and held(result) == ["low"]


def test_a_middle_tier_jobset_moves_too() -> None:
    """Any tier that may preempt moves, not only the top one: on the simulator's ladder the middle tier's spot
    evictions were almost all of the victims' loss."""
    result = checked(reclaimed(priority=1500).snapshot())
    assert started(result) == ["top"] and held(result) == []


def test_a_tier_that_may_not_preempt_does_not_move() -> None:
    """Below `preemptorMinPriority` (a tier declared `preempts: false`) a JobSet neither preempts nor moves: it waits
    for spot to come back. The control lowers the floor to the JobSet's own priority."""
    for floor, moves in ((1600, False), (1500, True)):
        config = CFG.model_copy(update={"preemptor_min_priority": floor})
        result = checked(reclaimed(priority=1500).snapshot(), config)
        assert (started(result) == ["top"]) is moves
        assert held(result) == []


def test_with_room_for_one_the_higher_tier_moves_first() -> None:
    """Two JobSets lose their spot VMs at once and the queued rung has room for one slice: the higher tier takes it
    and the other does not move. The control: with room for two, both move."""
    for room, moving in ((CHIPS, ["top"]), (2 * CHIPS, ["mid", "top"])):
        fleet = reclaimed(room=room)
        fleet.slices("s2", "s3")
        on(fleet, "spot", "s2", "s3")
        mid = fleet.run(JobSetBuilder("ml", "mid").replicated_job("w", 1, SPOT), ["s2"], 1500)
        fleet.run(JobSetBuilder("ml", "low2").replicated_job("w", 1, SPOT), ["s3"], 1000)
        fleet.fail("s2", NOTICE, how="deleted", hosts=4).evict_pods(mid, "s2", NOTICE, reason=NODE_SHUTDOWN)
        result = checked(fleet.snapshot())
        assert sorted(started(result)) == moving


def test_a_graceful_shutdown_before_the_vms_go_is_enough() -> None:
    """At the preemption notice the kubelet shuts the pods down (TerminationByKubelet) on NotReady nodes."""
    assert started(checked(reclaimed(how="not-ready").snapshot())) == ["top"]


def test_no_switch_without_room_on_the_queued_rung() -> None:
    result = checked(reclaimed(room=0).snapshot())
    assert started(result) == [] and held(result) == ["low"]


def test_quota_lower_work_holds_on_the_queued_rung_counts_as_room() -> None:
    """Kueue's own preemption (withinClusterQueue: LowerPriority) takes it for the switched JobSet; work of the same
    tier there does not count (the control)."""
    for priority, switches in ((1000, True), (2000, False)):
        fleet = reclaimed(room=0)
        fleet.slices("q0")
        on(fleet, QUEUED_CAPACITY, "q0")
        fleet.run(JobSetBuilder("ml", f"queued-{priority}").replicated_job("w", 1, QUEUED), ["q0"], priority)
        assert (started(checked(fleet.snapshot())) == ["top"]) is switches


def test_the_switch_is_not_made_on_the_reservation_rung() -> None:
    fleet = on(Fleet().slices("r0", "r1"), "reservation", "r0", "r1")
    shape = replace(SHAPE_4X4, capacity="reservation")
    top = fleet.run(JobSetBuilder("ml", "top").replicated_job("w", 1, shape), ["r0"], 2000)
    fleet.run(JobSetBuilder("ml", "low").replicated_job("w", 1, shape), ["r1"], 1000)
    fleet.fail("r0", NOTICE, how="deleted", hosts=4).evict_pods(top, "r0", NOTICE, reason=NODE_SHUTDOWN)
    fleet.queues["cq"] = replace(fleet.queues["cq"], queued_room_chips=CHIPS)
    assert started(checked(fleet.snapshot())) == []


# --- in flight --------------------------------------------------------------------------------------------------


def in_flight(
    suspended: bool, quota_reserved: bool, active: bool = False, since: timedelta = timedelta(seconds=5)
) -> tuple[Fleet, JobSet]:
    """`top` after the hold: its Workload carries the switch annotations; Kueue has (or has not yet) suspended the
    JobSet and released its quota."""
    fleet = on(Fleet().slices("s1"), "spot", "s1")
    fleet.run(JobSetBuilder("ml", "low").replicated_job("w", 1, SPOT), ["s1"], 1000)
    builder = JobSetBuilder("ml", "top").replicated_job("w", 1, SPOT if quota_reserved else SHAPE_4X4)
    if suspended:
        builder.suspended()
    workload = (
        WorkloadBuilder("ml", "jobset-top")
        .active(active)
        .annotation(KEYS.rung_switch, QUEUED_CAPACITY)
        .annotation(KEYS.rung_switch_since, format_time(T0 - since))
        .condition("QuotaReserved", ConditionStatus.TRUE if quota_reserved else ConditionStatus.FALSE)
        .condition("Admitted", ConditionStatus.TRUE if quota_reserved else ConditionStatus.FALSE)
    )
    top = fleet.run(builder, [], 2000, workload=workload)
    return fleet, top


def test_once_suspended_and_out_of_quota_the_jobset_is_pinned_and_its_workload_deleted() -> None:
    fleet, _ = in_flight(suspended=True, quota_reserved=False)
    result = checked(fleet.snapshot())
    (pin,) = [a for a in result.actions if isinstance(a, PinRung)]
    assert (pin.capacity, pin.label, pin.replicated_jobs) == (QUEUED_CAPACITY, CAPACITY_LABEL, ("w",))
    assert pin.workload.name == "jobset-top" and held(result) == []


def test_while_kueue_evicts_it_waits_until_the_timeout_then_gives_up() -> None:
    fleet, _ = in_flight(suspended=False, quota_reserved=True)
    waiting = checked(fleet.snapshot())
    assert [a for a in waiting.actions if isinstance(a, PinRung | EndRungSwitch)] == []
    deadline = T0 - timedelta(seconds=5) + CFG.rung_switch_timeout
    assert waiting.next_wakeup is not None and waiting.next_wakeup <= deadline
    late = checked(in_flight(suspended=False, quota_reserved=True, since=CFG.rung_switch_timeout)[0].snapshot())
    (end,) = [a for a in late.actions if isinstance(a, EndRungSwitch)]
    assert set(end.remove_annotations) == {KEYS.rung_switch, KEYS.rung_switch_since}


def test_reactivated_by_someone_else_the_switch_is_given_up() -> None:
    fleet, _ = in_flight(suspended=True, quota_reserved=False, active=True)
    result = checked(fleet.snapshot())
    assert [type(a) for a in result.actions if isinstance(a, PinRung | EndRungSwitch)] == [EndRungSwitch]


def test_a_template_that_already_selects_a_capacity_is_not_overridden() -> None:
    fleet, top = in_flight(suspended=True, quota_reserved=False)
    fleet.jobsets[top.uid] = replace(top, replicated_jobs=(replace(top.replicated_jobs[0], shape=SPOT),))
    result = checked(fleet.snapshot())
    (end,) = [a for a in result.actions if isinstance(a, EndRungSwitch)]
    assert "already selects" in end.reason and not [a for a in result.actions if isinstance(a, PinRung)]


def test_a_jobset_in_flight_is_nobodys_victim() -> None:
    """A top-tier preemptor that needs s1 does not take the held JobSet in flight (it holds no slice) but `low`."""
    fleet, _ = in_flight(suspended=True, quota_reserved=False)
    fleet.slices("s2")
    on(fleet, "spot", "s2")
    other = fleet.run(JobSetBuilder("ml", "other").replicated_job("w", 1, SPOT), ["s2"], 3000)
    fleet.fail("s2", NOTICE, how="unreachable", hosts=4).evict_pods(other, "s2", NOTICE)
    result = checked(fleet.snapshot(), now=T0 + CFG.eviction_delay)
    assert held(result) == ["low"]


def test_a_workload_held_for_a_switch_whose_jobset_is_gone_is_given_back() -> None:
    """No rule can finish a switch for a JobSet outside the view: it is reactivated, as a stray victim is released."""
    fleet = on(Fleet().slices("s1"), "spot", "s1")
    fleet.run(JobSetBuilder("ml", "low").replicated_job("w", 1, SPOT), ["s1"], 1000)
    stray = (
        WorkloadBuilder("ml", "jobset-gone")
        .priority(2000)
        .active(False)
        .annotation(KEYS.rung_switch, QUEUED_CAPACITY)
        .annotation(KEYS.rung_switch_since, format_time(T0))
    )
    fleet.set_workload(stray.obj())
    result = plan(fleet.snapshot(), T0, CFG)
    (end,) = [a for a in result.actions if isinstance(a, EndRungSwitch)]
    assert end.workload.name == "jobset-gone" and set(end.remove_annotations) == set(KEYS.rung_switch_keys())


def _recreated_on_the_queued_rung() -> Fleet:
    """`top` after the pin: Kueue recreated its Workload (no switch annotations) from the template pinned to the
    queued capacity, and has not admitted it yet."""
    fleet = on(Fleet().slices("s1"), "spot", "s1")
    fleet.run(JobSetBuilder("ml", "low").replicated_job("w", 1, SPOT), ["s1"], 1000)
    builder = JobSetBuilder("ml", "top").replicated_job("w", 1, QUEUED).suspended()
    pending = (
        WorkloadBuilder("ml", "jobset-top")
        .condition("QuotaReserved", ConditionStatus.FALSE)
        .condition("Admitted", ConditionStatus.FALSE)
    )
    fleet.run(builder, [], 2000, workload=pending)
    return fleet


@pytest.mark.parametrize(
    "stage",
    ["held, Kueue still holds its spot quota", "suspended, its quota released", "recreated, not admitted yet"],
)
def test_the_queued_room_a_move_in_flight_will_take_is_not_offered_to_another(stage: str) -> None:
    """From the hold until Kueue admits the recreated Workload on the queued rung, the rung's free quota is not
    free: a second JobSet that loses its spot VMs meanwhile does not start a switch onto it (it would wait there
    behind the first, pinned off spot). The control: room for both, and it moves."""
    for room, moves in ((CHIPS, False), (2 * CHIPS, True)):
        if stage.startswith("recreated"):
            fleet = _recreated_on_the_queued_rung()
        else:
            fleet, _ = in_flight(suspended=stage.startswith("suspended"), quota_reserved=stage.startswith("held"))
        fleet.slices("s2")
        on(fleet, "spot", "s2")
        mid = fleet.run(JobSetBuilder("ml", "mid").replicated_job("w", 1, SPOT), ["s2"], 1500)
        fleet.fail("s2", NOTICE, how="deleted", hosts=4).evict_pods(mid, "s2", NOTICE, reason=NODE_SHUTDOWN)
        fleet.queues["cq"] = replace(fleet.queues["cq"], queued_room_chips=room)
        assert (started(checked(fleet.snapshot())) == ["mid"]) is moves, stage
