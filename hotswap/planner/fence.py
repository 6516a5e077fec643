"""Admission fence: hold lower-priority work Kueue admits while an op is open, before its pods can land (C12).

Every hold frees Kueue quota, and Kueue at once admits the best queued workload that fits. kube-scheduler does not
honour the op's reservation, and JobSet's exclusive anti-affinity only separates pods of equal priority, so the
newcomer's leader can bind on a reserved slice next to the preemptor's leader; with `preemptionPolicy: Never` the
preemptor's followers then never fit. The op extension catches that only after the fact, at the cost of one more
termination grace. The fence holds such a newcomer as soon as Kueue admits it: it never ran, so it loses no work,
and its quota is freed again. It is released by the normal rules once the op is Done.
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from dataclasses import replace
from datetime import datetime

from gke_tpu_priority.hotswap.annotations import OpRecord
from gke_tpu_priority.hotswap.model import ConditionStatus, PodPhase, find_condition
from gke_tpu_priority.hotswap.planner.actions import Decision, EventReason, EventType
from gke_tpu_priority.hotswap.planner.victims import refusal, victim_order
from gke_tpu_priority.hotswap.planner.world import Unit, World


def admitted_at(unit: Unit) -> datetime | None:
    """When Kueue last reserved quota for (or admitted) the unit's Workload; None if it holds none now."""
    wl = unit.workload
    if wl is None:
        return None
    times = []
    for kind in ("QuotaReserved", "Admitted"):
        found = find_condition(wl.conditions, kind)
        if found is not None and found.status is ConditionStatus.TRUE and found.last_transition_time is not None:
            times.append(found.last_transition_time)
    # The earlier one: quota reserved before the op started was not freed by it, whatever Admitted says.
    return min(times, default=None)


def never_ran(unit: Unit) -> bool:
    """No pod of the unit is Running: holding it throws no work away."""
    return all(p.phase is not PodPhase.RUNNING for p in unit.live_pods)


def fresh_admissions(world: World) -> list[Unit]:
    """Units running in Kueue that have not run yet, in victim order: the fence's pool, built once per pass
    (each op then keeps those admitted at or after it started)."""
    found = []
    running = PodPhase.RUNNING
    for unit in world.running:
        if unit.held_by is not None or unit.op is not None:
            continue
        # `never_ran` first, inline: it rejects the running majority without reading conditions (every pass
        # with a new op).
        for pod in unit.live_pods:
            if pod.phase is running:
                break
        else:
            if admitted_at(unit) is not None:
                found.append(unit)
    return sorted(found, key=lambda u: victim_order(u, world.now))


def slices_at_risk(world: World, preemptor: Unit, op: OpRecord) -> list[str]:
    """Reserved, usable slices the preemptor's current attempt has not yet bound a pod on every host of.

    Once every host is bound no other pod fits there, so a newcomer can no longer take it.
    """
    attempt = preemptor.jobset.restarts
    bound: dict[str, int] = {}
    for pod in preemptor.live_pods:
        if pod.restart_attempt == attempt and pod.deletion_timestamp is None and pod.node_name is not None:
            pool = world.slice_of_pod(pod)
            if pool is not None:
                bound[pool] = bound.get(pool, 0) + 1
    at_risk = []
    for pool in op.reserved:
        found = world.slices.get(pool)
        if found is not None and found.usable and bound.get(pool, 0) < (found.expected_hosts or 1):
            at_risk.append(pool)
    return at_risk


def fence_bound(world: World, op: OpRecord) -> int:
    """Fence holds allowed over the whole op: `fenceHoldsPerSlice` per slice it reserves. Per pass the fence
    holds one workload per slice still at risk, but each hold frees quota Kueue gives the next queued workload,
    so without a per-op bound a deep queue is fenced one by one for as long as the slices stay at risk, each hold
    burning that workload's hold-rate history (I12)."""
    return world.config.fence_holds_per_slice * len(op.reserved)


def fence_allowance(world: World, op: OpRecord) -> int:
    return max(fence_bound(world, op) - op.fenced, 0)


def fence(
    world: World,
    preemptor: Unit,
    op: OpRecord,
    candidates: list[Unit],
    held: Iterable[Unit],
    disrupted: AbstractSet[str],
    claimed: AbstractSet[str],
    budget: int,
) -> list[Unit]:
    """Fresh admissions to hold for this op now: at most `budget` of them, and no more than the op's allowance
    (`fence_bound` less the holds its record counts).

    Each must be a valid victim of the preemptor (strictly lower under both priorities I1, in scope, not
    protected, not rate limited I12, not claimed I3, not disrupted I9) and need a shape of a slice at risk.
    `candidates` comes from `fresh_admissions`; only those admitted at or after the op started qualify.

    Churn guard: one hold per slice still at risk, counting the op's holds (`held`: Workloads held for this
    preemptor) whose quota Kueue has not released yet. Each of those will let one more workload in, which the
    next pass fences if the risk remains; so a pass never holds more than the risk needs, and planning again
    on the snapshot the holds produce writes nothing (I11).
    """
    budget = min(budget, fence_allowance(world, op))
    if op.since is None or budget <= 0:
        return []
    at_risk = slices_at_risk(world, preemptor, op)
    if not at_risk:
        return []
    victims = set(op.victims)
    in_flight = sum(
        1 for u in held if u.workload is not None and u.workload.key in victims and u.workload.quota_reserved
    )
    shapes = [world.slices[pool].shape for pool in at_risk]
    limit = min(len(at_risk) - in_flight, budget)
    if limit <= 0:
        return []
    chosen: list[Unit] = []
    for unit in candidates:
        if len(chosen) == limit:
            break
        if unit.uid == preemptor.uid or unit.workload is None or unit.workload.key in claimed:
            continue
        admitted = admitted_at(unit)
        if admitted is None or admitted < op.since:
            continue
        if not any(shape.matches(need) for shape in shapes for need in unit.demand):
            continue
        if refusal(world, preemptor, unit, claimed, disrupted=disrupted) is not None:
            continue
        chosen.append(unit)
    return sorted(chosen, key=lambda u: u.key)


def fenced_why(preemptor: Unit) -> str:
    """The VictimHeld message of a fence hold."""
    return (
        f"held (spec.active=false) before its pods start: admitted while {preemptor.key} waits for "
        "its reserved slices (admission fence, C12)"
    )


def with_fenced(world: World, preemptor: Unit, op: OpRecord, fenced: list[Unit]) -> tuple[OpRecord, Decision | None]:
    """The op with `fenced` added to its victims and its fence count, and the event saying so when this pass
    spends the last of its allowance (once per op: later passes fence nothing)."""
    if not fenced:
        return op, None
    keys = {wl.key for u in fenced if (wl := u.workload) is not None}
    updated = replace(op, victims=tuple(sorted({*op.victims, *keys})), fenced=op.fenced + len(fenced))
    bound = fence_bound(world, op)
    if updated.fenced < bound:
        return updated, None
    note = Decision(
        EventReason.BLOCKED,
        preemptor.jobset_ref(),
        f"admission fence: {updated.fenced} fresh admission(s) held for this operation, its bound "
        f"({world.config.fence_holds_per_slice} per reserved slice); a later one that takes a reserved slice is "
        "held by the op extension instead",
        op.op_id,
        EventType.WARNING,
    )
    return updated, note
