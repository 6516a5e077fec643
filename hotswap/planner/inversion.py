"""Slice priority inversions: a lower-priority JobSet sits in a higher-priority JobSet's slice (research §2.5).

JobSet's exclusive-topology anti-affinity only separates pods of equal priority, so a lower-priority leader can
bind in the node pool where a higher-priority leader waits for its followers. Under `preemptionPolicy: Never`
(reconciler mode) kube-scheduler never preempts, so neither JobSet can place its followers and both wait for
Kueue's `waitForPodsReady` eviction; a storm lines their timeouts up, so they collide again round after round.
The reconciler is the only component allowed to preempt TPU work in this mode, so it resolves the inversion
itself, infra failure or not: it holds the whole lower-priority JobSet(s) in that slice, as an op for the higher
one (same hold, release rules, Done and fence).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

from hotswap.annotations import OpRecord
from hotswap.model import find_condition
from hotswap.planner.actions import Decision, EventReason, EventType, make_op_id
from hotswap.planner.disruption import placed
from hotswap.planner.fence import admitted_at
from hotswap.planner.ops import Ledger, hold_action, record_action
from hotswap.planner.victims import in_scope, lower_priority, why_not_victim
from hotswap.planner.world import Unit, World
from hotswap.slices import SliceHealth

_NOBODY: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Inversion:
    """One multi-host slice where `preemptor` waits on its current attempt while lower-priority work sits there."""

    pool: str
    preemptor: Unit
    occupants: tuple[str, ...]
    """uids (or `foreign:` tokens) of every other JobSet with a non-terminal pod in the slice."""
    since: datetime
    """Latest instant the snapshot proves the collision can not predate (both sides admitted or not ready)."""


def _last_change(unit: Unit) -> datetime | None:
    """Latest Kueue admission or PodsReady transition of the unit: its current attempt started after it.

    PodsReady turns False on admission and again when a running attempt fails (waitForPodsReady's recovery
    timer), so this bounds when the unit's current pods were created from below.
    """
    wl = unit.workload
    times = [t for t in (admitted_at(unit),) if t is not None]
    if wl is not None:
        ready = find_condition(wl.conditions, "PodsReady")
        if ready is not None and ready.last_transition_time is not None:
            times.append(ready.last_transition_time)
    return max(times, default=None)


def _presence(world: World, pools: set[str]) -> dict[str, dict[str, tuple[bool, bool]]]:
    """Pool → uid → (has a live, not deleting pod there; has such a pod of its current attempt there), for the
    JobSets occupying `pools`. Deleting pods are leaving on their own."""
    found: dict[str, dict[str, tuple[bool, bool]]] = {pool: {} for pool in pools}
    uids = sorted({uid for pool in pools for uid in world.occupants[pool]})
    for uid in uids:
        unit = world.units.get(uid)
        if unit is None:
            continue
        attempt = unit.jobset.restarts
        for pod in unit.live_pods:
            if pod.deletion_timestamp is not None or pod.terminal:
                continue
            pool = world.slice_of_pod(pod)
            there = found.get(pool) if pool is not None else None
            if there is None:
                continue
            _, current = there.get(uid, (False, False))
            there[uid] = (True, current or pod.restart_attempt == attempt)
    return found


def _rank(unit: Unit) -> tuple[int, int, str]:
    return (-unit.kueue_priority, -unit.pod_priority, unit.key)


def find_inversions(world: World) -> list[Inversion]:
    """Every multi-host slice, not Unhealthy, where ≥2 JobSets have live, not deleting pods, and the
    highest-priority one (strictly higher than every other occupant under both priorities, I1) runs in Kueue,
    has a pod of its current attempt there and is not placed. Sorted by preemptor rank, then pool. Grace is not
    applied here; slices whose age the snapshot cannot bound (no admission or PodsReady times) are left out."""
    shared = set()
    for pool, occupants in world.occupants.items():
        found_slice = world.slices.get(pool) if len(occupants) >= 2 else None
        # Not Unhealthy is enough: the pods are already there, and a slice that is still Recovering from a
        # transient fault is exactly where two restarted leaders meet (Unhealthy is the infra path's business).
        if (
            found_slice is not None
            and found_slice.health is not SliceHealth.UNHEALTHY
            and (found_slice.expected_hosts or 1) >= 2
        ):
            shared.add(pool)
    if not shared:
        return []  # the usual pass: nothing shared, nothing to index
    presence = _presence(world, shared)
    found: list[Inversion] = []
    for pool in sorted(shared):
        there = presence[pool]
        units = [u for uid, (live, _) in there.items() if live and (u := world.units.get(uid)) is not None]
        if len(units) < 2:
            continue
        top = min(units, key=_rank)
        if not there[top.uid][1] or not top.running_in_kueue or top.held_by is not None or top.workload is None:
            continue
        others = [u for uid in world.occupants[pool] if uid != top.uid and (u := world.units.get(uid)) is not None]
        if any(not lower_priority(top, u) for u in others):
            continue  # equal priority is JobSet's own business; a higher occupant is never a victim (I1)
        if placed(world, top):
            continue
        changes = [_last_change(u) for u in units]
        known = [t for t in changes if t is not None]
        if len(known) < len(changes):
            continue
        strangers = sorted(uid for uid in world.occupants[pool] if uid.startswith("foreign:"))
        occupying = (*sorted(u.uid for u in others), *strangers)
        found.append(Inversion(pool, top, occupying, max(known)))
    return sorted(found, key=lambda i: (_rank(i.preemptor), i.pool))


def inversion_deadlines(world: World) -> Iterator[datetime]:
    """When inversions not yet past `inversionGrace` become due (for `next_wakeup`)."""
    grace = world.config.inversion_grace
    for found in find_inversions(world):
        yield found.since + grace


def resolve_inversions(world: World, ledger: Ledger, budget: int) -> int:
    """Hold the lower-priority JobSets occupying due inversions' slices; returns how many were held.

    Per preemptor all or nothing (I2, I6): every other occupant of every inverted slice must be a valid victim
    (strictly lower under both priorities I1, in scope, not protected, not rate limited I12, not a preemptor of
    an open op I9) and fit in `budget` (what is left of `maxVictimsPerPass`); otherwise nothing is held and a
    Warning says why. A victim that is itself infra-disrupted may be held (unlike B17): it is restarting anyway,
    so holding it throws no progress away, and if it were a preemptor it would have an op and be refused.
    Slices reserved by an open op are left to that op's extension (I3), and so are preemptors with an op.
    """
    grace = world.config.inversion_grace
    due: dict[str, list[Inversion]] = {}
    for found in find_inversions(world):
        unit = found.preemptor
        if world.now - found.since < grace or found.pool in ledger.reserved:
            continue
        if unit.uid in ledger.open_ops or unit.op is not None or not unit.movable:
            continue
        if unit.cluster_queue is not None and unit.cluster_queue.uses_tas:
            continue
        due.setdefault(unit.uid, []).append(found)

    held = 0
    for inversions in sorted(due.values(), key=lambda group: _rank(group[0].preemptor)):
        preemptor = inversions[0].preemptor
        victims: dict[str, Unit] = {}
        refusals: list[str] = []
        pools: list[str] = []
        for found in inversions:
            leaving = 0
            for uid in found.occupants:
                other = world.units.get(uid)
                if other is None:
                    refusals.append(f"{found.pool} is used by pods of {uid.removeprefix('foreign:')} outside our view")
                    continue
                wl = other.workload
                if other.held_by is not None or (wl is not None and wl.key in ledger.claimed):
                    leaving += 1  # already held or claimed this pass: its pods are going
                    continue
                why = why_not_victim(world, other, _NOBODY, ledger.claimed)
                if why is None and other.uid in ledger.open_ops:
                    why = "preemptor of an open operation"
                if why is None and not in_scope(world, preemptor, other):
                    why = "out of scope"
                if why is not None:
                    refusals.append(f"{found.pool} is taken by {other.key} ({why})")
                    continue
                victims[uid] = other
            if leaving < len(found.occupants):
                pools.append(found.pool)
        if not victims and not refusals:
            continue
        if not refusals and len(victims) > budget - held:
            refusals.append(
                f"{len(victims)} victims but only {max(budget - held, 0)} may be held this pass (maxVictimsPerPass)"
            )
        if refusals:
            ledger.events.append(
                Decision(
                    EventReason.BLOCKED,
                    preemptor.jobset_ref(),
                    "slice priority inversion not resolved: " + "; ".join(refusals),
                    type=EventType.WARNING,
                )
            )
            continue
        held += _record(world, ledger, preemptor, sorted(pools), sorted(victims.values(), key=lambda u: u.key))
    return held


def _own_pools(world: World, ledger: Ledger, preemptor: Unit, taken: list[str]) -> tuple[str, ...]:
    """Other usable slices of a needed shape the preemptor alone occupies: reserved too, so that a leader of
    other work landing there is held by the op's extension (C12) instead of starting a new inversion."""
    own = []
    for pool in sorted(preemptor.occupied):
        found = world.slices.get(pool)
        if (
            pool not in taken
            and found is not None
            and found.usable
            and pool not in ledger.reserved
            and world.occupants.get(pool) == {preemptor.uid}
            and any(found.shape.matches(shape) for shape in preemptor.demand)
        ):
            own.append(pool)
    return tuple(own)


def _record(world: World, ledger: Ledger, preemptor: Unit, pools: list[str], victims: list[Unit]) -> int:
    # A distinct id from an infra op of the same attempt: the trigger differs, and so may the victims.
    op_id = make_op_id(f"{preemptor.uid}/inversion", preemptor.jobset.restarts)
    op = OpRecord(
        op_id=op_id,
        attempt=preemptor.jobset.restarts,
        slices=tuple(pools),
        victims=tuple(sorted(v.workload.key for v in victims if v.workload is not None)),
        since=world.now,
        kept=_own_pools(world, ledger, preemptor, pools),
    )
    ledger.claim(preemptor.uid, op)
    ledger.actions.append(record_action(world, preemptor, op))
    names = ", ".join(v.key for v in victims)
    ledger.events.append(
        Decision(
            EventReason.INVERSION_RESOLVED,
            preemptor.jobset_ref(),
            f"trigger inversion: lower-priority {names} in slice(s) {', '.join(pools)} blocked this JobSet's "
            "pods (preemptionPolicy Never; JobSet's exclusive placement only separates equal priorities)",
            op_id,
        )
    )
    for victim in victims:
        ledger.actions.append(hold_action(world, victim, preemptor, op_id))
        ledger.events.append(
            Decision(
                EventReason.VICTIM_HELD,
                victim.jobset_ref(),
                f"held (spec.active=false): its pods sat in slice(s) {', '.join(pools)} of higher-priority "
                f"{preemptor.key} (priority inversion)",
                op_id,
            )
        )
    ledger.inverted += len(victims)
    return len(victims)
