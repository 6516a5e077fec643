"""Open operations: continue, finish or abort them before planning anything new (B.5 step 0, B.7, C2, C3)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace

from gke_tpu_priority.hotswap.annotations import OpRecord, decode_history
from gke_tpu_priority.hotswap.planner.actions import make_op_id
from gke_tpu_priority.hotswap.planner.claims import Held, Ledger
from gke_tpu_priority.hotswap.planner.disruption import placed
from gke_tpu_priority.hotswap.planner.fence import fence, fenced_why, fresh_admissions, with_fenced
from gke_tpu_priority.hotswap.planner.victims import lower_priority, refusal
from gke_tpu_priority.hotswap.planner.world import Unit, World, hold_since
from gke_tpu_priority.hotswap.slices import SliceHealth


@dataclass(slots=True)
class _Pass:
    """What every op of this pass is advanced against: the snapshot's held victims and recorded ops, built once."""

    world: World
    ledger: Ledger
    disrupted: AbstractSet[str]
    held_for: dict[str, list[Unit]]
    """Preemptor uid → the victims held for it (a held victim's Workload carries the hold annotations)."""
    named: set[str] = field(default_factory=set)
    """Every victim named by any recorded operation: pods of these on a reserved slice are not intruders."""
    reserved_by: dict[str, str] = field(default_factory=dict)
    """Slice → the uid of the preemptor whose recorded op reserves it."""
    _fresh: list[Unit] | None = None
    _by_workload: dict[str, Unit] | None = None

    def fresh(self) -> list[Unit]:
        """The admission fence's candidates, built on first need: most passes have no open operation."""
        if self._fresh is None:
            self._fresh = fresh_admissions(self.world)
        return self._fresh

    def by_workload(self) -> dict[str, Unit]:
        if self._by_workload is None:
            self._by_workload = {u.workload.key: u for u in self.world.units.values() if u.workload is not None}
        return self._by_workload


def advance_ops(
    world: World,
    ledger: Ledger,
    disrupted: AbstractSet[str],
    contested: Mapping[str, Callable[[], None]] | None = None,
) -> None:
    """Finish, abort, continue, extend or reconstruct every operation recorded in the snapshot.

    `disrupted` holds the uids of units with infra evidence (an op is extended only while its preemptor
    still has some, I8, or within the attribution window). `contested`: preemptor uid (with no op) → its slice
    priority inversion resolution, run in this priority order because it may take over a lower open op.
    Higher preemptors go first, so a takeover never depends on key order and the lower op is never advanced
    in a pass that aborts it.
    """
    held_for: dict[str, list[Unit]] = defaultdict(list)
    for unit in world.annotated:
        if unit.held_by is not None and unit.workload is not None and not unit.workload.active:
            held_for[unit.held_by.uid].append(unit)
    contested = contested or {}
    with_ops = _in_priority_order(world, held_for, contested)
    state = _Pass(world, ledger, disrupted, held_for)
    state.named = {v for u in with_ops if u.op is not None for v in u.op.victims}
    state.reserved_by = {pool: u.uid for u in with_ops if u.op is not None for pool in u.op.reserved}
    for preemptor in with_ops:
        if preemptor.workload is None:
            continue
        op = _current_op(state, preemptor)
        if op is None:
            resolve = contested.get(preemptor.uid)
            if resolve is not None:
                resolve()
            continue
        if not _settled(state, preemptor, op):
            _continue(state, preemptor, op)


def _in_priority_order(
    world: World, held_for: Mapping[str, list[Unit]], contested: Mapping[str, Callable[[], None]]
) -> list[Unit]:
    """Units that have (or may have) an operation, highest priority first: a recorded op, held victims, or a
    contested inversion to resolve at their turn."""
    # Only units with an op or held victims can have an operation; sorting just those keeps the order cheap.
    with_ops = [u for u in world.annotated if u.op is not None or u.uid in held_for]
    if any(uid in world.units and world.units[uid] not in with_ops for uid in held_for):
        # A preemptor of held victims whose Workload has no annotations (its op record was lost, C3).
        with_ops = [u for u in world.units.values() if u.op is not None or u.uid in held_for]
    with_ops += [u for uid in contested if (u := world.units[uid]).op is None and uid not in held_for]
    with_ops.sort(key=lambda u: (-u.kueue_priority, -u.pod_priority, u.key))
    return with_ops


def _current_op(state: _Pass, preemptor: Unit) -> OpRecord | None:
    """The preemptor's op: as recorded, with held victims the record misses; or rebuilt from its held victims
    (C3); None if it has none."""
    held = state.held_for.get(preemptor.uid, ())
    if preemptor.op is not None:
        return _adopt_held(state.world, preemptor.op, held)
    assert preemptor.workload is not None
    # A unit held this pass is never made a preemptor (I9).
    if held and preemptor.workload.key not in state.ledger.claimed:
        return _reconstruct(state.world, preemptor, list(held))
    return None


def _settled(state: _Pass, preemptor: Unit, op: OpRecord) -> bool:
    """Abort the op or finish it, if its time has come; True if so."""
    world, ledger = state.world, state.ledger
    taken_by = ledger.taken_over.get(preemptor.uid)
    if taken_by is not None:
        # Held this pass by a strictly higher preemptor whose pods share its slice (I9): that hold's write
        # removes the op, so there is nothing to clear; its reservations and victims are claimed no more.
        ledger.abort(preemptor, op, f"aborted: {taken_by}")
        return True
    if not preemptor.running_in_kueue or preemptor.held_by is not None:
        # With no record written for it there is nothing to clear: just say so.
        ledger.abort(preemptor, op, "preemptor no longer running in Kueue", None if preemptor.op is None else world)
        return True
    if placed(world, preemptor):
        ledger.finish(world, preemptor, op, "every pod of the preemptor runs on healthy slices")
        return True
    return False


def _continue(state: _Pass, preemptor: Unit, op: OpRecord) -> None:
    """Keep the op open: extend it (intruders, fence) while it may be, write its record if it changed, claim it
    and hold what it still has to."""
    world, ledger = state.world, state.ledger
    intruders: list[Unit] = []
    fenced: list[Unit] = []
    recorded = preemptor.op
    if _extensible(world, preemptor, op, state.disrupted):
        op, intruders, fenced = _extend(state, preemptor, op)
    if op != recorded:
        ledger.record(world, preemptor, op)
    ledger.claim(preemptor.uid, op)
    for intruder in intruders:
        why = f"held (spec.active=false): took a slice reserved for {preemptor.key} (op extension, C12)"
        pools = [p for p in intruder.occupied if p in op.reserved]
        ledger.hold(world, intruder, preemptor, op.op_id, why, Held.EXTENSION, pools)
    for newcomer in fenced:
        ledger.hold(world, newcomer, preemptor, op.op_id, fenced_why(preemptor), Held.FENCE)
    _resume_holds(state, preemptor, op, [*intruders, *fenced])


def _extend(state: _Pass, preemptor: Unit, op: OpRecord) -> tuple[OpRecord, list[Unit], list[Unit]]:
    """The op extension (C12): the op with the intruders on its slices and the fresh admissions the fence holds
    added, and those two lists; a reserved slice taken for good is given up or, if blocked anyway, kept (I6)."""
    world, ledger = state.world, state.ledger
    others = {
        pool: uid for pool, uid in state.reserved_by.items() if uid != preemptor.uid and uid not in ledger.taken_over
    }
    whole = op
    op, given_up = _give_up_lost(world, preemptor, op)
    intruders, landed, lost = _intruders(world, ledger, preemptor, op, state.disrupted, state.named, others)
    if lost:
        op = whole  # blocked by another slice all the same: the op stays as it was (I6)
    elif given_up:
        ledger.block(preemptor, given_up, op.op_id)
    if intruders:
        added = {wl.key for i in intruders if (wl := i.workload) is not None}
        op = replace(
            op,
            victims=tuple(sorted({*op.victims, *added})),
            slices=tuple(sorted({*op.slices, *landed})),
        )
    fenced: list[Unit] = []
    if not lost:  # a reserved slice taken for good: fencing would hold work for nothing (I6)
        taken = ledger.claimed | state.named | {wl.key for i in intruders if (wl := i.workload) is not None}
        budget = ledger.victim_budget(world) - len(intruders)
        held = state.held_for.get(preemptor.uid, ())
        fenced = fence(world, preemptor, op, state.fresh(), held, state.disrupted, taken, budget)
    op, note = with_fenced(world, preemptor, op, fenced)
    if note is not None:
        ledger.event(note)
    return op, intruders, fenced


def _resume_holds(state: _Pass, preemptor: Unit, op: OpRecord, just_held: list[Unit]) -> None:
    """C2: the op was recorded but a crash (or a conflict) stopped some holds; finish them."""
    world, ledger = state.world, state.ledger
    by_workload = state.by_workload()
    for victim_key in op.victims:
        victim = by_workload.get(victim_key)
        if victim is None or victim.workload is None or victim.held_by is not None:
            continue
        if victim in just_held or victim.uid in ledger.open_ops:
            continue
        history = decode_history(victim.workload.annotations.get(world.keys.hold_history, ""))
        if op.since is not None and any(t >= op.since for t in history):
            continue  # held for this op before and since released (max-hold, manual): never re-hold
        if victim.running_in_kueue:
            pools = [p for p in victim.occupied if p in op.reserved]
            ledger.hold(world, victim, preemptor, op.op_id, f"held for {preemptor.key} (resumed)", Held.RESUMED, pools)


def _extensible(world: World, preemptor: Unit, op: OpRecord, disrupted: AbstractSet[str]) -> bool:
    """An open op may still be extended while its preemptor has infra evidence (I8), or for an attribution
    window after it was planned: a transient failure often heals while the preemptor restarts, and its pods
    may then land on the recovered slice, yet the op is not finished until every pod runs (C12)."""
    if preemptor.uid in disrupted:
        return True
    return op.since is not None and world.now - op.since <= world.config.attribution_window


def _give_up_lost(world: World, preemptor: Unit, op: OpRecord) -> tuple[OpRecord, str]:
    """The op without the reserved slices taken for good, and why (empty if none): the preemptor's current attempt
    has no pod there and a JobSet that is never its victim (not strictly lower, I1) runs pods there.

    kube-scheduler ignores reservations, so an equal-priority JobSet restarting at the same time can take one.
    Kept reserved, such a slice blocked the op (all or nothing, I6) until Kueue's waitForPodsReady evicted the
    preemptor: neither were the intruders on the slices it did land on held, nor was the lost slice replaced.
    Given up, the extension goes on with the rest, and `plan_preemptions` re-plans the missing slices.
    """
    attempt = preemptor.jobset.restarts
    mine = {
        pool
        for p in preemptor.live_pods
        if p.restart_attempt == attempt and p.deletion_timestamp is None and (pool := world.slice_of_pod(p))
    }
    lost: dict[str, str] = {}
    for pool in op.reserved:
        if pool in mine:
            continue
        for uid in sorted(world.occupants.get(pool, ())):
            unit = world.units.get(uid)
            if unit is None or uid == preemptor.uid or unit.held_by is not None or lower_priority(preemptor, unit):
                continue
            if any(world.slice_of_pod(p) == pool and p.deletion_timestamp is None for p in unit.live_pods):
                lost[pool] = unit.key
                break
    if not lost:
        return op, ""
    where = "; ".join(f"{pool} is taken by {key}" for pool, key in sorted(lost.items()))
    reduced = replace(
        op,
        slices=tuple(p for p in op.slices if p not in lost),
        kept=tuple(p for p in op.kept if p not in lost),
    )
    return reduced, f"reserved slice given up (not of strictly lower priority, never a victim): {where}"


def _adopt_held(world: World, op: OpRecord, held: Iterable[Unit]) -> OpRecord:
    """Victims held for this op but missing from its record (a crash between a hold and the record's
    rewrite) are added back, so they stay held until the preemptor is placed and are never held twice."""
    missing = {
        v.workload.key
        for v in held
        if v.workload is not None
        and v.workload.annotations.get(world.keys.op_id) == op.op_id
        and v.workload.key not in op.victims
    }
    return replace(op, victims=tuple(sorted({*op.victims, *missing}))) if missing else op


def _intruders(
    world: World,
    ledger: Ledger,
    preemptor: Unit,
    op: OpRecord,
    disrupted: AbstractSet[str],
    named: AbstractSet[str],
    others: Mapping[str, str],
) -> tuple[list[Unit], set[str], bool]:
    """C12: workloads that newly occupy a slice reserved for the op, or a slice the preemptor's new attempt
    already landed on (kube-scheduler does not honour the reservation: a transient failure may heal and take the
    new leader), to be held as well (an op extension). Slices reserved by another op (`others`: pool → its
    preemptor's uid) are left to that op (I3), unless that preemptor is strictly lower and shares the slice
    with this one's new attempt: then this op takes the slice over (`_contested`).

    All or nothing (I2, I6): every intruder on every reserved slice must be a valid victim (strictly lower
    priority under both priorities I1, in scope, not protected, not rate limited I12, not claimed I3; it may be
    infra-disrupted itself, and a preemptor of an open op only if strictly lower, I9, its op then being
    aborted) and fit in this pass's victim budget; otherwise nothing is held and the preemptor is reported
    blocked. Returns the intruders, the unreserved slices they are on (which the op then reserves), and whether
    a reserved slice is lost to a workload that may not be held.
    Kube-scheduler does not honour the reservation, so this is the only way to give the slice back to the
    preemptor without node taints (the reconciler may only patch Workloads).
    """
    found: dict[str, Unit] = {}
    refusals: list[str] = []
    taken: set[str] = set()
    attempt = preemptor.jobset.restarts
    landed = {
        pool
        for p in preemptor.live_pods
        if p.restart_attempt == attempt
        and p.deletion_timestamp is None
        and (pool := world.slice_of_pod(p)) is not None
        and pool not in ledger.reserved
        and (pool not in others or _contested(world, preemptor, pool, others[pool]))
    }
    for pool in sorted({*op.reserved, *landed}):
        for uid in sorted(world.occupants.get(pool, ())):
            if uid == preemptor.uid or uid in found:
                continue
            unit = world.units.get(uid)
            if unit is None:
                refusals.append(f"{pool} is used by pods of {uid.removeprefix('foreign:')} outside its view")
                continue
            wl = unit.workload
            if unit.held_by is not None or (wl is not None and wl.key in named):
                continue  # a victim whose pods are still terminating
            # An infra-disrupted intruder may be held (unlike a victim chosen for a new op, B17): its leader took
            # the preemptor's slice, so it has restarted and loses no more progress (a unit held here is never
            # made a preemptor later this pass). Refusing it would leave both JobSets deadlocked until
            # waitForPodsReady. So may a strictly lower preemptor of an open op, not yet advanced (ops go in priority
            # order): both wait on the shared slice otherwise, and only one of them can have it (I9).
            why = refusal(world, preemptor, unit, ledger.claimed, ledger.open_ops.keys())
            if why is not None:
                refusals.append(f"{pool} is taken by {unit.key} ({why})")
                continue
            found[uid] = unit
            taken.add(pool)
    if not found and not refusals:
        return [], set(), False
    budget = ledger.victim_budget(world)
    if not refusals and len(found) > budget:
        refusals.append(f"{len(found)} intruders but only {budget} may be held this pass (maxVictimsPerPass)")
    if refusals:
        ledger.block(preemptor, "reserved slice lost: " + "; ".join(refusals), op.op_id)
        return [], set(), True
    return sorted(found.values(), key=lambda u: u.key), taken - set(op.reserved), False


def _contested(world: World, preemptor: Unit, pool: str, owner: str) -> bool:
    """The preemptor's new attempt landed on `pool`, which another op reserves: it may take the slice over when
    that op's preemptor is strictly lower (I1) and has pods there too (multi-host, not Unhealthy), since neither
    can place its pods otherwise and nothing else preempts under `preemptionPolicy: Never`."""
    found, unit = world.slices.get(pool), world.units.get(owner)
    return (
        found is not None
        and found.health is not SliceHealth.UNHEALTHY
        and (found.expected_hosts or 1) >= 2
        and unit is not None
        and pool in unit.occupied
        and lower_priority(preemptor, unit)
    )


def _reconstruct(world: World, preemptor: Unit, victims: list[Unit]) -> OpRecord | None:
    """C3: victims are held for this preemptor but its op annotation is missing; rebuild it from them."""
    if not preemptor.running_in_kueue or placed(world, preemptor):
        return None
    # Only recent holds: old ones belong to a finished op of an earlier failure and must not resurrect it.
    recent_since = world.now - world.config.attribution_window
    victims = [
        v for v in victims if v.workload is not None and (hold_since(world, v.workload) or recent_since) > recent_since
    ]
    if not victims:
        return None
    op_ids = sorted({v.workload.annotations.get(world.keys.op_id, "") for v in victims if v.workload})
    op_id = next((i for i in op_ids if i), make_op_id(preemptor.uid, preemptor.jobset.restarts))
    pools: set[str] = set()
    for victim in victims:
        for pool in victim.occupied:
            found = world.slices.get(pool)
            if found is not None and found.usable and any(found.shape.matches(s) for s in preemptor.demand):
                pools.add(pool)
    attempts = [v.held_by.attempt for v in victims if v.held_by is not None]
    return OpRecord(
        op_id=op_id,
        attempt=min(attempts) if attempts else preemptor.jobset.restarts,
        slices=tuple(sorted(pools)),
        victims=tuple(sorted(v.workload.key for v in victims if v.workload is not None)),
        since=min((t for v in victims if v.workload and (t := hold_since(world, v.workload))), default=None),
    )


__all__ = ["advance_ops"]
