"""Resolve slice priority inversions: hold lower-priority JobSets sitting in a higher-priority JobSet's slice.

JobSet's exclusive-topology anti-affinity only separates pods of equal priority, so a lower-priority leader can
bind in the node pool where a higher-priority leader waits for its followers. Under `preemptionPolicy: Never`
(reconciler mode) kube-scheduler never preempts, so neither JobSet can place its followers and both wait for
Kueue's `waitForPodsReady` eviction; a storm lines their timeouts up, so they collide again round after round.
The reconciler is the only component allowed to preempt TPU work in this mode, so it resolves the inversion
itself, infra failure or not: it holds the whole lower-priority JobSet(s) in that slice, as an op for the higher
one (same hold, release rules, Done and fence).
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet

from gke_tpu_priority.hotswap.annotations import OpRecord
from gke_tpu_priority.hotswap.planner.actions import Decision, EventReason, EventType, make_op_id
from gke_tpu_priority.hotswap.planner.claims import Held, Ledger
from gke_tpu_priority.hotswap.planner.priority_inversions import Inversion, is_due, rank
from gke_tpu_priority.hotswap.planner.victims import refusal
from gke_tpu_priority.hotswap.planner.world import Unit, World

_NOBODY: frozenset[str] = frozenset()


def resolve_contested(world: World, ledger: Ledger, inversions: list[Inversion]) -> None:
    """`resolve_inversions` for one preemptor of `contested_inversions`, at its turn in `advance_ops`: ops of
    strictly lower preemptors are not advanced yet, so their recorded reservations count here (I3)."""
    preemptor = inversions[0].preemptor
    if preemptor.workload is None or preemptor.workload.key in ledger.claimed:
        return  # held this pass by a higher op's extension: a victim never becomes a preemptor (I9)
    reserved_by = {pool: u.uid for u in world.annotated if u.op is not None for pool in u.op.reserved}
    # A slice another op reserves is taken over only from a preemptor sharing it (then held); else it is left.
    pending = [i for i in inversions if i.pool not in reserved_by or reserved_by[i.pool] in i.occupants]
    deferred: list[Decision] = []
    _resolve(world, ledger, pending, {p for p, uid in reserved_by.items() if uid != preemptor.uid}, deferred)
    if deferred:
        ledger.defer_contested(preemptor.uid, deferred[0])


def resolve_inversions(world: World, ledger: Ledger, inversions: list[Inversion]) -> int:
    """Hold the lower-priority JobSets occupying the slices of due `inversions` (from `find_inversions`, those
    not contested); returns how many were held.

    Per preemptor all or nothing (I2, I6): every other occupant of every inverted slice must be a valid victim
    (strictly lower under both priorities I1, in scope, not protected, not rate limited I12; a preemptor of an
    open op only if its op is taken over, `resolve_contested`, I9) and fit in what is left of this pass's
    `maxVictimsPerPass` (`Ledger.victim_budget`); otherwise nothing is held and a Warning says why. A victim that
    is itself infra-disrupted may be held (unlike B17): it is restarting anyway, so holding it throws no progress away.
    Slices reserved by an open op are left to that op's extension (I3) unless `resolve_contested` takes the op
    over, and preemptors with an op are left to their own extension.
    """
    due: dict[str, list[Inversion]] = {}
    for found in inversions:
        wl = found.preemptor.workload
        if wl is not None and wl.key in ledger.claimed:
            continue  # held this pass by an infra or starvation op: a victim never becomes a preemptor (I9)
        if is_due(world, ledger, found):
            due.setdefault(found.preemptor.uid, []).append(found)
    held = 0
    settled: set[str] = set()  # preemptors that got an op, or a Blocked event of this round
    pending = sorted(due.values(), key=lambda g: rank(g[0].preemptor))
    # A group blocked only by an occupant that a group after it then claims (its pods are going) is tried again,
    # so this pass does what the next one would (I11); a Blocked event goes out only for what stays blocked.
    while pending:
        blocked: list[list[Inversion]] = []
        decisions: list[Decision] = []
        progressed = False
        for group in pending:
            deferred: list[Decision] = []
            count = _resolve(world, ledger, group, _NOBODY, deferred)
            if deferred:
                blocked.append(group)
                decisions += deferred
            elif count:
                held += count
                progressed = True
                settled.add(group[0].preemptor.uid)
        if not progressed or not blocked:
            for decision in decisions:
                ledger.event(decision)
            settled.update(g[0].preemptor.uid for g in blocked)
            break
        pending = blocked
    # A contested preemptor this round neither served nor refused keeps the refusal `resolve_contested` made.
    for uid, decision in ledger.contested_blocked.items():
        if uid not in settled:
            ledger.event(decision)
    return held


def _resolve(
    world: World,
    ledger: Ledger,
    inversions: list[Inversion],
    reserved: AbstractSet[str],
    deferred: list[Decision] | None = None,
) -> int:
    """One preemptor's due inversions, all or nothing; returns how many were held. `reserved`: slices recorded
    ops not yet advanced reserve (besides `ledger.reserved`), not to be kept for the preemptor (I3). `deferred`:
    where a Blocked event goes instead of the ledger, so the caller may try the group again first."""
    inversions = [i for i in inversions if i.pool not in ledger.reserved]
    if not inversions:
        return 0
    preemptor = inversions[0].preemptor
    victims: dict[str, Unit] = {}
    refusals: list[str] = []
    pools: list[str] = []
    for found in inversions:
        leaving = 0
        for uid in found.occupants:
            other = world.units.get(uid)
            if other is None:
                refusals.append(f"{found.pool} is used by pods of {uid.removeprefix('foreign:')} outside its view")
                continue
            wl = other.workload
            if other.held_by is not None or (wl is not None and wl.key in ledger.claimed):
                leaving += 1  # already held or claimed this pass: its pods are going
                continue
            # Every occupant is strictly lower (`find_inversions`): a preemptor of an op not yet advanced is taken
            # over (I9).
            why = refusal(world, preemptor, other, ledger.claimed, ledger.open_ops.keys())
            if why is not None:
                refusals.append(f"{found.pool} is taken by {other.key} ({why})")
                continue
            victims[uid] = other
        if leaving < len(found.occupants):
            pools.append(found.pool)
    if not victims and not refusals:
        return 0
    budget = ledger.victim_budget(world)
    if not refusals and len(victims) > budget:
        refusals.append(f"{len(victims)} victims but only {max(budget, 0)} may be held this pass (maxVictimsPerPass)")
    if refusals:
        decision = Decision(
            EventReason.BLOCKED,
            preemptor.jobset_ref(),
            "slice priority inversion not resolved: " + "; ".join(refusals),
            type=EventType.WARNING,
        )
        if deferred is None:
            ledger.event(decision)
        else:
            deferred.append(decision)
        return 0
    aborted = {p for v in victims.values() if v.op is not None for p in v.op.reserved}  # void once taken over
    kept = _own_pools(world, ledger, preemptor, pools, set(reserved) - aborted)
    return _record(world, ledger, preemptor, sorted(pools), kept, sorted(victims.values(), key=lambda u: u.key))


def _own_pools(
    world: World, ledger: Ledger, preemptor: Unit, taken: list[str], reserved: AbstractSet[str]
) -> tuple[str, ...]:
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
            and pool not in reserved
            and world.occupants.get(pool) == {preemptor.uid}
            and any(found.shape.matches(shape) for shape in preemptor.demand)
        ):
            own.append(pool)
    return tuple(own)


def _record(
    world: World, ledger: Ledger, preemptor: Unit, pools: list[str], kept: tuple[str, ...], victims: list[Unit]
) -> int:
    # A distinct id from an infra op of the same attempt: the trigger differs, and so may the victims.
    op_id = make_op_id(f"{preemptor.uid}/inversion", preemptor.jobset.restarts)
    op = OpRecord(
        op_id=op_id,
        attempt=preemptor.jobset.restarts,
        slices=tuple(pools),
        victims=tuple(sorted(v.workload.key for v in victims if v.workload is not None)),
        since=world.now,
        kept=kept,
    )
    ledger.claim(preemptor.uid, op)
    ledger.record(world, preemptor, op)
    names = ", ".join(v.key for v in victims)
    ledger.event(
        Decision(
            EventReason.INVERSION_RESOLVED,
            preemptor.jobset_ref(),
            f"trigger inversion: lower-priority {names} in slice(s) {', '.join(pools)} blocked this JobSet's "
            "pods (preemptionPolicy Never; JobSet's exclusive placement only separates equal priorities)",
            op_id,
        )
    )
    why = f"its pods sat in slice(s) {', '.join(pools)} of higher-priority {preemptor.key} (priority inversion)"
    for victim in victims:
        mine = [p for p in pools if p in victim.occupied]
        ledger.hold(world, victim, preemptor, op_id, f"held (spec.active=false): {why}", Held.INVERSION, mine)
    return len(victims)
