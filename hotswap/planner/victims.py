"""Victim eligibility (I1-I5, I9, I12, B8-B17) and minimal whole-JobSet victim selection (B.5, I6, I7)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from datetime import datetime
from itertools import takewhile

from gke_tpu_priority.hotswap.config import Scope
from gke_tpu_priority.hotswap.model import SliceShape
from gke_tpu_priority.hotswap.planner.world import Unit, World, on_request_capacity

_NOBODY: frozenset[str] = frozenset()


def in_scope(world: World, preemptor: Unit, victim: Unit) -> bool:
    scope = world.config.scope
    if scope is Scope.CLUSTER:
        return True
    h_cq, v_cq = preemptor.cluster_queue, victim.cluster_queue
    h_name = preemptor.workload.cluster_queue if preemptor.workload else None
    v_name = victim.workload.cluster_queue if victim.workload else None
    if h_name is None or v_name is None:
        return False
    if h_name == v_name:
        return True
    if scope is Scope.CLUSTER_QUEUE:
        return False
    return (
        h_cq is not None and v_cq is not None and h_cq.cohort_name is not None and h_cq.cohort_name == v_cq.cohort_name
    )


ScopeGroup = tuple[str, str]


def scope_group(world: World, unit: Unit) -> ScopeGroup | None:
    """A key partitioning units by `in_scope`: for units with a Workload, `in_scope(h, v)` holds exactly when
    both groups are equal and not None. Lets a preemptor look only at victims in its own group.

    Same ClusterQueue name always means the same ClusterQueue (and cohort), so under Cohort scope a queue in a
    cohort is grouped by the cohort and a queue without one by its own name.
    """
    scope = world.config.scope
    if scope is Scope.CLUSTER:
        return ("cluster", "")
    name = unit.workload.cluster_queue if unit.workload else None
    if name is None:
        return None
    queue = unit.cluster_queue
    if scope is Scope.COHORT and queue is not None and queue.cohort_name is not None:
        return ("cohort", queue.cohort_name)
    return ("queue", name)


def lower_priority(preemptor: Unit, victim: Unit) -> bool:
    """Strictly lower under Kueue priority AND pod priority (I1, B16)."""
    return victim.kueue_priority < preemptor.kueue_priority and victim.pod_priority < preemptor.pod_priority


def why_not_victim(
    world: World, victim: Unit, disrupted: AbstractSet[str], claimed: AbstractSet[str], takeover: bool = False
) -> str | None:
    """Preemptor-independent reasons a unit can never be a victim this pass; None if it may be.

    `takeover`: the caller is a strictly higher preemptor that will abort the victim's open op in the same
    write as the hold (I9), so an open op is no reason here.
    """
    wl = victim.workload
    if wl is None:
        return "not Kueue-managed"
    if not victim.running_in_kueue:
        return "not running in Kueue"
    if victim.held_by is not None or (claimed and wl.key in claimed):
        return "already held or claimed"
    if victim.op is not None and not takeover:
        return "preemptor of an open operation"
    if victim.uid in disrupted:
        return "itself infra-disrupted"
    if not victim.movable:
        return "not default exclusive placement"
    if victim.cluster_queue is not None and victim.cluster_queue.uses_tas:
        return "TAS ClusterQueue"
    if on_request_capacity(world, victim):
        # Evicting it gives the nodes back to GKE (Kueue deletes the ProvisioningRequest): it frees nothing.
        return "runs on ProvisioningRequest capacity"
    if world.protected(victim):
        return "protected"
    if len(world.hold_times(wl)) >= world.config.max_holds_per_window:
        return "hold rate limit"
    return None


def refusal(
    world: World,
    preemptor: Unit,
    victim: Unit,
    claimed: AbstractSet[str],
    open_ops: AbstractSet[str] = frozenset(),
    disrupted: AbstractSet[str] = frozenset(),
) -> str | None:
    """Why `preemptor` may not take `victim` this pass; None if it may.

    The victim must be a victim at all (`why_not_victim`), strictly lower under both priorities (I1) and in the
    preemptor's scope. A preemptor of an op recorded in the snapshot may be taken by a strictly higher one, whose
    hold aborts that op (I9), unless the op is already open in this pass's ledger (`open_ops`: its preemptors'
    uids), i.e. advanced or opened before the caller's turn.
    """
    takeover = victim.uid not in open_ops and lower_priority(preemptor, victim)
    why = why_not_victim(world, victim, disrupted, claimed, takeover=takeover)
    if why is None and victim.uid in open_ops:
        why = "preemptor of an open operation"
    if why is None and not lower_priority(preemptor, victim):
        why = "not of strictly lower priority"
    if why is None and not in_scope(world, preemptor, victim):
        why = "out of scope"
    return why


VictimOrder = tuple[int, int, float, str]


def victim_order(unit: Unit, now: datetime) -> VictimOrder:
    """Preference among victims: lower priority first, then the least training thrown away (chips x progress
    since the last checkpoint, or since the attempt started when no checkpoint is published), then name."""
    return (unit.kueue_priority, unit.pod_priority, unit.chips * unit.progress_at_risk_s(now), unit.key)


@dataclass(frozen=True, slots=True)
class Candidate:
    unit: Unit
    pools: frozenset[str]
    """Usable, unreserved slices of the wanted shape this victim occupies."""
    order: VictimOrder
    """`victim_order` of the unit."""

    @property
    def key(self) -> str:
        return self.unit.key


def candidate_pools(world: World, victim: Unit, shape: SliceShape, reserved: AbstractSet[str]) -> frozenset[str]:
    pools = set()
    for pool in victim.occupied:
        found = world.slices.get(pool)
        if found is not None and found.usable and pool not in reserved and found.shape.matches(shape):
            pools.add(pool)
    return frozenset(pools)


class VictimIndex:
    """This pass's possible victims, grouped by `scope_group` and Kueue priority level, each level ranked by
    `victim_order` when a preemptor first walks into it.

    A preemptor walks only its own group, lowest priority first, and only as far as `choose_victims` needs, so
    the levels above the covering one are never ranked; each victim's usable slices per shape are computed once
    and shared by every preemptor. Walking the levels in order, each ranked, is walking the whole group ranked
    once: `victim_order` starts with the Kueue priority.
    """

    __slots__ = ("_claimed", "_disrupted", "_gone", "_levels", "_members", "_ranked", "_usable", "_world")

    def __init__(self, world: World, disrupted: AbstractSet[str], claimed: AbstractSet[str]) -> None:
        self._world = world
        # What `why_not_victim` sees when a level is ranked: these sets as they are now (the caller's grow).
        self._disrupted = frozenset(disrupted)
        self._claimed = frozenset(claimed)
        members: dict[tuple[ScopeGroup, int], list[Unit]] = {}
        levels: dict[ScopeGroup, set[int]] = {}
        for unit in world.running:
            group = scope_group(world, unit)
            if group is None:
                continue
            level = (group, unit.kueue_priority)
            found = members.get(level)
            if found is None:
                members[level] = [unit]
                levels.setdefault(group, set()).add(unit.kueue_priority)
            else:
                found.append(unit)
        self._members = members
        self._levels = {group: sorted(priorities) for group, priorities in levels.items()}
        self._ranked: dict[tuple[ScopeGroup, int], tuple[list[tuple[VictimOrder, Unit]], list[int]]] = {}
        self._usable: dict[tuple[str, SliceShape], frozenset[str]] = {}
        self._gone: set[str] = set()

    def take(self, victims: Iterable[Unit]) -> None:
        """Victims of an operation just planned: no later preemptor may choose them."""
        self._gone.update(v.uid for v in victims)

    def candidates(
        self, preemptor: Unit, shape: SliceShape, chosen: AbstractSet[str], excluded: AbstractSet[str]
    ) -> Candidates:
        """Lazily, in victim order: the preemptor's in-scope lower-priority victims, except `chosen` uids, that
        occupy usable `shape` slices not in `excluded`."""
        group = scope_group(self._world, preemptor)
        below: list[int] = []
        if group is not None:
            below = [p for p in self._levels.get(group, ()) if p < preemptor.kueue_priority]
        return Candidates(self, preemptor, shape, chosen, excluded, group, below)

    def level(self, group: ScopeGroup, priority: int) -> tuple[list[tuple[VictimOrder, Unit]], list[int]]:
        """The level's possible victims in victim order, and `_level_rest` of them (ranked on first use)."""
        key = (group, priority)
        found = self._ranked.get(key)
        if found is None:
            world, now, disrupted, claimed = self._world, self._world.now, self._disrupted, self._claimed
            ranked = []
            for unit in self._members[key]:
                if why_not_victim(world, unit, disrupted, claimed) is None:
                    ranked.append((victim_order(unit, now), unit))
            ranked.sort(key=_order)
            found = self._ranked[key] = (ranked, _level_rest(ranked))
        return found

    def _usable_pools(self, victim: Unit, shape: SliceShape) -> frozenset[str]:
        key = (victim.uid, shape)
        pools = self._usable.get(key)
        if pools is None:
            pools = self._usable[key] = candidate_pools(self._world, victim, shape, _NOBODY)
        return pools


def _order(ranked: tuple[VictimOrder, Unit]) -> VictimOrder:
    return ranked[0]


def _level_rest(ranked: list[tuple[VictimOrder, Unit]]) -> list[int]:
    """Per position: the most slices any victim from there to the end of its Kueue priority level occupies."""
    rest = [0] * len(ranked)
    most = 0
    for i in range(len(ranked) - 1, -1, -1):
        victim = ranked[i][1]
        if i + 1 < len(ranked) and ranked[i + 1][1].kueue_priority != victim.kueue_priority:
            most = 0
        most = max(most, len(victim.occupied))
        rest[i] = most
    return rest


class Candidates:
    """`VictimIndex.candidates` as an iterator that can also bound what it has not yielded yet (`level_bound`),
    so `choose_victims` can stop walking a priority level once nothing further in it could change its choice."""

    __slots__ = (
        "_below",
        "_chosen",
        "_excluded",
        "_group",
        "_index",
        "_level",
        "_pos",
        "_preemptor",
        "_ranked",
        "_rest",
        "_shape",
    )

    def __init__(
        self,
        index: VictimIndex,
        preemptor: Unit,
        shape: SliceShape,
        chosen: AbstractSet[str],
        excluded: AbstractSet[str],
        group: ScopeGroup | None,
        below: list[int],
    ) -> None:
        self._index, self._preemptor, self._shape = index, preemptor, shape
        self._chosen, self._excluded = chosen, excluded
        self._group = group
        # The group's Kueue priority levels strictly below the preemptor's not entered yet, the lowest last.
        self._below = below[::-1]
        self._ranked: list[tuple[VictimOrder, Unit]] = []
        self._rest: list[int] = []
        self._pos = 0
        self._level: int | None = None

    def __iter__(self) -> Candidates:
        return self

    def __next__(self) -> Candidate:
        preemptor, index = self._preemptor, self._index
        gone, chosen, excluded = index._gone, self._chosen, self._excluded
        while True:
            ranked = self._ranked
            while self._pos < len(ranked):
                order, victim = ranked[self._pos]
                self._pos += 1
                if victim.uid in gone or victim.uid in chosen or not lower_priority(preemptor, victim):
                    continue
                pools = index._usable_pools(victim, self._shape)
                if pools and not pools.isdisjoint(excluded):
                    pools = pools - excluded
                if pools:
                    self._level = victim.kueue_priority
                    return Candidate(victim, pools, order)
            if not self._below or self._group is None:
                raise StopIteration
            self._ranked, self._rest = index.level(self._group, self._below.pop())
            self._pos = 0

    def level_bound(self) -> int:
        """An upper bound on `len(pools)` of every candidate still to come at the last yielded one's level."""
        pos = self._pos
        if pos >= len(self._ranked) or self._ranked[pos][1].kueue_priority != self._level:
            return 0
        return self._rest[pos]


def freed_count(chosen: Iterable[Candidate], occupants: Mapping[str, set[str]]) -> int:
    """Slices all of whose occupants are chosen (I2: a shared slice needs every occupant)."""
    members = list(chosen)
    uids = {c.unit.uid for c in members}
    pools = set().union(*(c.pools for c in members)) if members else set()
    return sum(1 for p in pools if occupants.get(p, _NOBODY) <= uids)


def _gain(
    c: Candidate,
    uids: AbstractSet[str],
    freed: AbstractSet[str],
    waiting: AbstractSet[str],
    occupants: Mapping[str, set[str]],
) -> int:
    """Slices that choosing `c` would newly free (its own, and shared ones it completes)."""
    with_c = uids | {c.unit.uid}
    own = sum(1 for p in c.pools if p not in freed and occupants.get(p, _NOBODY) <= with_c)
    shared = sum(1 for p in waiting - c.pools if occupants.get(p, _NOBODY) <= with_c)
    return own + shared


def choose_victims(
    needed: int, ordered: Iterable[Candidate], occupants: Mapping[str, set[str]]
) -> list[Candidate] | None:
    """Pick a victim set freeing ≥ `needed` slices, minimising (max priority, count, surplus, progress, name).

    `ordered` must be sorted by `Candidate.order`; it is consumed lazily and only as far as needed, so callers
    can generate candidates on demand. None if even all candidates cannot cover it (then nothing is evicted, I6).
    """
    if needed <= 0:
        return []
    stream = iter(ordered)
    bounded = stream if isinstance(stream, Candidates) else None
    # 1. Lowest achievable maximum priority: add whole priority levels until covered.
    prefix: list[Candidate] = []
    level: int | None = None
    check_at = 1
    for candidate in stream:
        if level is not None and candidate.unit.kueue_priority != level and freed_count(prefix, occupants) >= needed:
            break
        if _gain(candidate, _NOBODY, _NOBODY, _NOBODY, occupants) == needed:
            # Coverage only grows, so its level is the covering one, and step 2 would pick it first and alone
            # (the first exact fit in order beats every other candidate): the rest need not be generated.
            return [candidate]
        level = candidate.unit.kueue_priority
        prefix.append(candidate)
        if bounded is not None and len(prefix) >= check_at and bounded.level_bound() < needed:
            # No candidate left in this level fits exactly alone; once the prefix covers, this level is the
            # covering one and step 2 can pull the rest of it only as far as it matters. (Checked at doubling
            # sizes so a level that never covers costs linear time.)
            if freed_count(prefix, occupants) >= needed:
                return _greedy(needed, prefix, occupants, bounded)
            check_at = 2 * len(prefix)
    else:
        if not prefix or freed_count(prefix, occupants) < needed:
            return None
    return _greedy(needed, prefix, occupants)


def _greedy(
    needed: int, pool: list[Candidate], occupants: Mapping[str, set[str]], more: Candidates | None = None
) -> list[Candidate]:
    """Steps 2 and 3 of `choose_victims` on the covering level prefix `pool` (in victim order).

    With `more`, the rest of the covering level is still in that stream: a round pulls from it only while an
    unseen candidate could still win the round (its gain is at most `level_bound()` plus the waiting slices).
    """
    # 2. Greedy: finish with the tightest single fit, otherwise take the biggest gain.
    level = pool[-1].unit.kueue_priority
    chosen: list[Candidate] = []
    uids: set[str] = set()
    freed: set[str] = set()
    waiting: set[str] = set()  # chosen slices still shared with an unchosen occupant
    remaining = list(pool)
    while len(freed) < needed and (remaining or more is not None):
        short = needed - len(freed)
        gains: list[tuple[int, Candidate]] = []
        pick: Candidate | None = None
        best = -1
        scan = remaining
        while True:
            for c in scan:
                gain = _gain(c, uids, freed, waiting, occupants)
                if gain == short:
                    pick = c  # the tightest possible fit, and first in victim order: nothing later beats it
                    break
                gains.append((gain, c))
                best = max(best, gain)
            if pick is not None or more is None:
                break
            limit = more.level_bound() + len(waiting)
            if limit < short and (limit <= best or any(g > short for g, _ in gains)):
                break  # nothing unseen can fit exactly, close tighter or gain more: the seen decide
            pulled = next(more, None)
            if pulled is None or pulled.unit.kueue_priority != level:
                more = None  # the level is complete (a next-level candidate is not in the prefix)
                scan = []
                continue
            pool.append(pulled)
            remaining.append(pulled)
            scan = [pulled]
        if pick is None:
            if not gains:
                break
            closing = [(g, c) for g, c in gains if g >= short]
            if closing:
                _, pick = min(closing, key=lambda gc: (gc[0], gc[1].order))
            else:
                best_gain, pick = min(gains, key=lambda gc: (-gc[0], gc[1].order))
                if best_gain <= 0:
                    break
        chosen.append(pick)
        remaining.remove(pick)
        uids.add(pick.unit.uid)
        for p in pick.pools | waiting:
            (freed if occupants.get(p, _NOBODY) <= uids else waiting).add(p)
        waiting -= freed
    if len(freed) < needed:
        # Only shared slices left: every co-occupant must go; take the whole level prefix and minimise.
        if more is not None:
            pool.extend(takewhile(lambda c: c.unit.kueue_priority == level, more))
        chosen = list(pool)
    # 3. Reverse minimisation: drop any victim not needed for coverage (I7).
    for victim in reversed(list(chosen)):
        trial = [c for c in chosen if c is not victim]
        if freed_count(trial, occupants) >= needed:
            chosen = trial
    return sorted(chosen, key=lambda c: c.key)
