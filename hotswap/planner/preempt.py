"""Plan new operations for disrupted preemptors: spare slices first, then minimal victim sets (B.5).

Infra-disrupted preemptors (I8) go first; starved ones (`starvation`: admitted, pods unbound past
`starvationGrace`) follow in the same pass, sharing the victim budget and the victim index.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from gke_tpu_priority.hotswap.annotations import OpRecord, format_time
from gke_tpu_priority.hotswap.model import SliceShape
from gke_tpu_priority.hotswap.planner.actions import Decision, EventReason, make_op_id
from gke_tpu_priority.hotswap.planner.claims import Blocked, Held, Ledger
from gke_tpu_priority.hotswap.planner.disruption import Disruption, deficit
from gke_tpu_priority.hotswap.planner.fence import fence, fenced_why, fresh_admissions, with_fenced
from gke_tpu_priority.hotswap.planner.starvation import STARVATION, Starved, covered_by, lower_occupants
from gke_tpu_priority.hotswap.planner.victims import VictimIndex, choose_victims, victim_order
from gke_tpu_priority.hotswap.planner.waiting import costly_victims, eviction_delay, eviction_wait, starvation_wait
from gke_tpu_priority.hotswap.planner.world import Unit, World, preemptor_refusal
from gke_tpu_priority.hotswap.slices import SliceHealth


@dataclass(frozen=True, slots=True)
class Planned:
    """What `plan_preemptions` did: blocked preemptors (infra only: release must not take what they need),
    ops planned, starved preemptors considered (the victims it held are counted in `Ledger.preempted`)."""

    blocked: list[Blocked]
    planned: int
    starved: int


@dataclass(slots=True)
class _Round:
    """The stage's state from one preemptor to the next: the victim index, the free slices left, and its results."""

    world: World
    ledger: Ledger
    short: set[str]
    """Disrupted and still lacking slices: preemptors, never victims."""
    victim_index: VictimIndex
    spare: list[str]
    """Free slices not yet taken by a preemptor of this stage."""
    surplus: list[str] = field(default_factory=list)
    """Freed by this pass's victims but not needed by their preemptor."""
    blocked: list[Blocked] = field(default_factory=list)
    planned: int = 0
    considered: int = 0
    _fresh: list[Unit] | None = None
    _held_for: dict[str, list[Unit]] = field(default_factory=dict)

    def fence_inputs(self, preemptor: Unit) -> tuple[list[Unit], list[Unit]]:
        """The fence's candidates and the victims held for `preemptor`, built on first need."""
        if self._fresh is None:
            self._fresh = fresh_admissions(self.world)
            for unit in self.world.annotated:
                if unit.held_by is not None:
                    self._held_for.setdefault(unit.held_by.uid, []).append(unit)
        return self._fresh, self._held_for.get(preemptor.uid, [])


@dataclass(frozen=True, slots=True)
class _Trigger:
    """A preemptor and why it preempts: infra evidence (`disruption`), or pods unbound since `starving`."""

    unit: Unit
    starving: datetime | None
    disruption: Disruption | None


def plan_preemptions(
    world: World, ledger: Ledger, disrupted: dict[str, Disruption], starved: Sequence[Starved] = ()
) -> Planned:
    """Plan ops for infra-disrupted preemptors, then for `starved` ones (`starved_units`), in one budget."""
    queue, short = _infra_preemptors(world, ledger, disrupted)
    # Starved preemptors after every infra one: infra failures have first call on the budget and the spares.
    triggers = [_Trigger(u, None, e) for u, e in queue] + [_Trigger(s.unit, s.since, None) for s in starved]
    # A disrupted JobSet is no victim while it still lacks slices (I9, B17: it is a preemptor itself). Once it is
    # whole again on healthy slices its infra evidence lingers for `attributionWindow`, but it is ordinary running
    # work: excluding it then would leave a top-tier JobSet blocked while the cheapest victim (just restarted) is
    # right there. Preemptors of ops opened or rebuilt in `advance_ops` (contested inversions, C3) carry no op in
    # the snapshot yet; they are no victims either (I9).
    victim_index = VictimIndex(world, short | ledger.open_ops.keys(), ledger.claimed)
    state = _Round(world, ledger, short, victim_index, ledger.free_slices(world))
    for trigger in triggers:
        _plan_one(state, trigger)
    return Planned(state.blocked, state.planned, state.considered)


def _infra_preemptors(
    world: World, ledger: Ledger, disrupted: dict[str, Disruption]
) -> tuple[list[tuple[Unit, Disruption]], set[str]]:
    """Infra-disrupted preemptors that still lack slices and may preempt, in priority order, and the uids of
    every disrupted unit still lacking slices (preemptors, never victims)."""
    queue: list[tuple[Unit, Disruption]] = []
    short: set[str] = set()
    for uid, evidence in disrupted.items():
        unit = world.units[uid]
        if not deficit(world, unit, ledger.booked(uid)):
            continue  # an open op covers it, or nothing is missing
        short.add(uid)
        if unit.workload is not None and unit.workload.key in ledger.claimed:
            continue  # held this pass by an op extension: a victim never becomes a preemptor (I9)
        refusal = preemptor_refusal(world, unit)
        if refusal is not None:
            if unit.running_in_kueue and not unit.movable:
                ledger.block(unit, f"hotswap refused: {refusal}")
            continue
        queue.append((unit, evidence))
    queue.sort(key=lambda ue: (-ue[0].kueue_priority, -ue[0].pod_priority, ue[1].since, ue[0].key))
    return queue, short


def _plan_one(state: _Round, trigger: _Trigger) -> None:
    """One preemptor: spare slices first, then a minimal victim set, unless it must wait or is blocked."""
    world, ledger, preemptor, disruption = state.world, state.ledger, trigger.unit, trigger.disruption
    needs = deficit(world, preemptor, ledger.booked(preemptor.uid))
    if trigger.starving is not None and not _starving_needs_victims(state, preemptor, needs):
        return
    taken, remaining = _take_spares(state, needs)
    gated = disruption is not None and any(remaining.values()) and preemptor.uid not in ledger.open_ops
    if gated and disruption is not None and not world.config.eviction_delay_min_loss:
        # Every eviction waits (no cost gate): before any victim is chosen, so by the preemptor's tier alone.
        until = eviction_wait(world, disruption, eviction_delay(world, preemptor, None))
        if until is not None:
            _wait(ledger, state.blocked, preemptor, needs, until)
            return
    victims, assigned, reason = _choose(state, preemptor, taken, remaining)
    budget = ledger.victim_budget(world)
    if not reason and len(victims) > budget:
        reason = f"needs {len(victims)} victims but only {budget} may be held this pass (maxVictimsPerPass)"
    if not reason and gated and disruption is not None and world.config.eviction_delay_min_loss:
        costly = costly_victims(world, victims)
        until = eviction_wait(world, disruption, eviction_delay(world, preemptor, costly)) if costly else None
        if until is not None:
            _wait(ledger, state.blocked, preemptor, needs, until)
            return
    if not reason and trigger.starving is not None:
        until = starvation_wait(world, preemptor, trigger.starving, victims)
        if until is not None:
            # Not booked as blocked: for a starved JobSet a slice that frees up binds its pods by itself,
            # and releases stay as they were for starved JobSets.
            ledger.wait(until)
            return
    if reason:
        _refuse(state, trigger, needs, reason)
        return
    _open(state, trigger, taken, assigned, victims)


def _starving_needs_victims(state: _Round, preemptor: Unit, needs: dict[SliceShape, int]) -> bool:
    """Whether a starved preemptor is one to take victims for: it still lacks slices, is not claimed, and free
    slices do not cover it (those are then booked for it)."""
    wl = preemptor.workload
    if not needs or wl is None or wl.key in state.ledger.claimed:
        return False  # covered by an open op, or held this pass by another op (I9)
    covering = covered_by(state.world, needs, state.spare)
    if covering is not None:
        # Enough free slices: kube-scheduler binds it there, holding work would only churn. They are booked for
        # it, so a later preemptor does not reserve them and leave it short next pass (I11).
        state.spare = [p for p in state.spare if p not in covering]
        return False
    state.considered += 1
    return True


def _take_spares(state: _Round, needs: dict[SliceShape, int]) -> tuple[list[str], dict[SliceShape, int]]:
    """Spare and surplus slices of the needed shapes, and what is still missing per shape."""
    taken: list[str] = []
    remaining: dict[SliceShape, int] = {}
    for shape in sorted(needs, key=lambda s: (s.key, s.chips_per_host or 0)):
        k = needs[shape]
        for pool in [*state.spare, *state.surplus]:
            if k == 0:
                break
            if pool not in taken and state.world.slices[pool].shape.matches(shape):
                taken.append(pool)
                k -= 1
        remaining[shape] = k
    return taken, remaining


def _choose(
    state: _Round, preemptor: Unit, taken: list[str], remaining: dict[SliceShape, int]
) -> tuple[list[Unit], list[str], str]:
    """A minimal victim set covering `remaining`, the slices it frees for the preemptor, and why not (or "")."""
    world, ledger = state.world, state.ledger
    victims: list[Unit] = []
    assigned: list[str] = []  # slices the victims free for this preemptor
    for shape in sorted(remaining, key=lambda s: (s.key, s.chips_per_host or 0)):
        avail = _matching(world, _freed(world, victims, ledger, taken), shape, assigned)
        k = remaining[shape] - len(avail)
        if k > 0:
            chosen = {v.uid for v in victims}
            excluded = ledger.reserved | set(taken) | set(assigned)
            candidates = state.victim_index.candidates(preemptor, shape, chosen, excluded)
            choice = choose_victims(k, candidates, world.occupants)
            if choice is None:
                return victims, assigned, f"no lower-priority victims can free {k} more {shape.key} slice(s)"
            victims.extend(c.unit for c in choice)
            avail = _matching(world, _freed(world, victims, ledger, taken), shape, assigned)
        assigned.extend(avail[: remaining[shape]])
    if len(victims) > 1:
        # Chosen one shape at a time, a victim picked for one shape may have become redundant once a victim
        # picked for a later shape freed a slice of the first shape too: minimise over the whole op (I7).
        victims, assigned = _minimise(world, ledger, taken, remaining, victims, assigned)
    return victims, assigned, ""


def _refuse(state: _Round, trigger: _Trigger, needs: dict[SliceShape, int], reason: str) -> None:
    """Nothing is held (I6): an infra preemptor is booked as blocked; a starved one is warned about only when
    lower-priority work occupies what it needs (else it queues behind equal or higher work, as Kueue means)."""
    preemptor, starving = trigger.unit, trigger.starving
    if starving is None:
        state.blocked.append(Blocked(preemptor, needs))
    elif not lower_occupants(state.world, preemptor, needs):
        return
    else:
        reason = f"starved since {format_time(starving)}: {reason}"
    state.ledger.block(preemptor, reason)


def _open(state: _Round, trigger: _Trigger, taken: list[str], assigned: list[str], victims: list[Unit]) -> None:
    """Open (or top up) the preemptor's op: reserve its slices, fence them, record it, hold its victims."""
    world, ledger, preemptor, starving = state.world, state.ledger, trigger.unit, trigger.starving
    existing = ledger.open_ops.get(preemptor.uid)
    cause = preemptor.uid if starving is None else f"{preemptor.uid}/{STARVATION}"
    op_id = existing.op_id if existing is not None else make_op_id(cause, preemptor.jobset.restarts)
    all_freed = _freed(world, victims, ledger, taken)
    state.surplus.extend(p for p in all_freed if p not in assigned and p not in state.surplus)
    slices = tuple(sorted({*taken, *assigned}))
    kept = tuple(_own_slices(world, ledger, preemptor))
    for pool in slices:
        if pool in state.spare:
            state.spare.remove(pool)
        if pool in state.surplus:
            state.surplus.remove(pool)
    op = OpRecord(
        op_id=op_id,
        attempt=preemptor.jobset.restarts,
        slices=slices,
        victims=tuple(sorted(v.workload.key for v in victims if v.workload is not None)),
        since=world.now,
        kept=kept,
    )
    if existing is not None:
        op = _top_up(world, existing, op)
    op, fenced = _fence_new_op(state, preemptor, op, len(victims))
    ledger.claim(preemptor.uid, op)
    ledger.rerecord(world, preemptor, op)
    spare_text = f"{len(taken)} spare" if taken else "no spare"
    trigger_text = "" if starving is None else f"trigger starvation: pods unbound since {format_time(starving)}; "
    ledger.event(
        Decision(
            EventReason.PLANNED,
            preemptor.jobset_ref(),
            f"{'re-planned: ' if existing else ''}{trigger_text}{spare_text} slice(s), {len(victims)} victim(s) "
            f"for slices {', '.join(slices)}",
            op_id,
        )
    )
    for victim in sorted(victims, key=lambda v: v.key):
        why = f"held (spec.active=false) to free slices for {preemptor.key}"
        ledger.hold(world, victim, preemptor, op_id, why, Held.PREEMPTION)
    for newcomer in fenced:
        ledger.hold(world, newcomer, preemptor, op_id, fenced_why(preemptor), Held.FENCE)
    state.victim_index.take([*victims, *fenced])
    state.planned += 1


def _fence_new_op(state: _Round, preemptor: Unit, op: OpRecord, victims: int) -> tuple[OpRecord, list[Unit]]:
    """The fence ran in `advance_ops`, before these slices were reserved: it runs for them now, for a new op too
    (a workload Kueue admitted at this very instant is fenced now, not by the next pass, I11). Returns the op with
    the fenced admissions and those admissions; the fence's share of the budget is what the victims leave."""
    world, ledger = state.world, state.ledger
    fresh, held = state.fence_inputs(preemptor)
    taken_keys = ledger.claimed | set(op.victims)
    fence_args = (world, preemptor, op, fresh, held, state.short, taken_keys)
    budget = ledger.victim_budget(world) - victims
    fenced = fence(*fence_args, budget)
    if budget <= len(fenced):
        # The budget may have cut the fence short: say so, like any preemption left for the next pass.
        left = len(fence(*fence_args, world.config.max_victims_per_pass)) - len(fenced)
        if left > 0:
            message = f"admission fence: {left} fresh admission(s) left for the next pass (maxVictimsPerPass)"
            ledger.block(preemptor, message, op.op_id)
    op, note = with_fenced(world, preemptor, op, fenced)
    if note is not None:
        ledger.event(note)
    return op, fenced


def _wait(
    ledger: Ledger, blocked: list[Blocked], preemptor: Unit, needs: dict[SliceShape, int], until: datetime
) -> None:
    blocked.append(Blocked(preemptor, needs))  # what it may need soon is not released to others
    ledger.wait(until)


def _assign(
    world: World, ledger: Ledger, taken: list[str], remaining: dict[SliceShape, int], victims: list[Unit]
) -> list[str] | None:
    """Slices `victims` free that cover `remaining` shape by shape (the planning loop's own order), or None."""
    freed = _freed(world, victims, ledger, taken)
    assigned: list[str] = []
    for shape in sorted(remaining, key=lambda s: (s.key, s.chips_per_host or 0)):
        avail = _matching(world, freed, shape, assigned)
        if len(avail) < remaining[shape]:
            return None
        assigned.extend(avail[: remaining[shape]])
    return assigned


def _minimise(
    world: World,
    ledger: Ledger,
    taken: list[str],
    remaining: dict[SliceShape, int],
    victims: list[Unit],
    assigned: list[str],
) -> tuple[list[Unit], list[str]]:
    """Drop every victim the others cover the deficit without, costliest first (highest `victim_order`: higher
    priority, more progress lost), so removing any victim left leaves the deficit uncovered (I7)."""
    kept = list(victims)
    for victim in sorted(victims, key=lambda v: victim_order(v, world.now), reverse=True):
        trial = [v for v in kept if v is not victim]
        if _assign(world, ledger, taken, remaining, trial) is not None:
            kept = trial
    if len(kept) == len(victims):
        return victims, assigned
    reassigned = _assign(world, ledger, taken, remaining, kept)
    assert reassigned is not None  # `victims` covered it and only redundant ones were dropped
    return kept, reassigned


def _top_up(world: World, existing: OpRecord, more: OpRecord) -> OpRecord:
    """An open op whose reservations no longer cover the deficit (a reserved slice given up, or failed) takes
    `more`'s slices and victims under its own id and start; failed reserved slices are dropped (I4)."""

    def healthy(pools: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(p for p in pools if (f := world.slices.get(p)) and f.health is not SliceHealth.UNHEALTHY)

    return replace(
        existing,
        slices=tuple(sorted({*healthy(existing.slices), *more.slices})),
        kept=healthy(existing.kept),
        victims=tuple(sorted({*existing.victims, *more.victims})),
    )


def _own_slices(world: World, ledger: Ledger, preemptor: Unit) -> list[str]:
    """Healthy slices of a needed shape the preemptor alone still occupies: they count towards its supply, so
    they are reserved too. A restart empties them before the new attempt's pods arrive, and unreserved they
    could be handed to a released victim or taken by a newly admitted workload (C12)."""
    own = []
    for pool in sorted(preemptor.occupied):
        found = world.slices.get(pool)
        if (
            found is not None
            and found.usable
            and pool not in ledger.reserved
            and world.occupants.get(pool) == {preemptor.uid}
            and any(found.shape.matches(shape) for shape in preemptor.demand)
        ):
            own.append(pool)
    return own


def _freed(world: World, victims: list[Unit], ledger: Ledger, taken: list[str]) -> list[str]:
    """Usable, unreserved slices whose every occupant is among `victims`, by name."""
    uids = {v.uid for v in victims}
    pools = sorted({p for v in victims for p in v.occupied})
    result = []
    for pool in pools:
        found = world.slices.get(pool)
        if found is None or not found.usable or pool in ledger.reserved or pool in taken:
            continue
        if world.occupants.get(pool, set()) <= uids:
            result.append(pool)
    return result


def _matching(world: World, pools: list[str], shape: SliceShape, exclude: list[str]) -> list[str]:
    return [p for p in pools if p not in exclude and world.slices[p].shape.matches(shape)]
