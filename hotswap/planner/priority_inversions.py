"""Where slice priority inversions are: a lower-priority JobSet's pods sit in a higher-priority JobSet's slice.

JobSet's exclusive-topology anti-affinity only separates pods of equal priority, so a lower-priority leader can
bind in the node pool where a higher-priority leader waits for its followers. This module finds such slices, says
when they become due (`inversionGrace`), and which of them contest an open op; the `inversion` stage resolves them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

from gke_tpu_priority.hotswap.model import find_condition
from gke_tpu_priority.hotswap.planner.claims import Ledger
from gke_tpu_priority.hotswap.planner.disruption import placed
from gke_tpu_priority.hotswap.planner.fence import admitted_at
from gke_tpu_priority.hotswap.planner.victims import lower_priority
from gke_tpu_priority.hotswap.planner.world import Unit, World
from gke_tpu_priority.hotswap.slices import SliceHealth


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


def rank(unit: Unit) -> tuple[int, int, str]:
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
            and not found_slice.request_owned  # evicting the others gives it back to GKE, not to the top one
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
        top = min(units, key=rank)
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
    return sorted(found, key=lambda i: (rank(i.preemptor), i.pool))


def inversion_deadlines(world: World) -> Iterator[datetime]:
    """When inversions not yet past `inversionGrace` become due (for `next_wakeup`)."""
    grace = world.config.inversion_grace
    for found in find_inversions(world):
        yield found.since + grace


def is_due(world: World, ledger: Ledger, found: Inversion) -> bool:
    """Past `inversionGrace`, and the preemptor may open an inversion op (no op, default placement, not TAS)."""
    unit = found.preemptor
    if world.now - found.since < world.config.inversion_grace:
        return False
    if unit.uid in ledger.open_ops or unit.op is not None or not unit.movable:
        return False
    return unit.cluster_queue is None or not unit.cluster_queue.uses_tas


def contested_inversions(world: World, ledger: Ledger, inversions: list[Inversion]) -> dict[str, list[Inversion]]:
    """Due inversions, by preemptor, of preemptors sharing a slice with a preemptor of an open op (every other
    occupant is strictly lower, I1). They are resolved in `advance_ops`, in priority order, before that op is
    advanced: the op is taken over and aborted (I9), so it must not be continued or extended first."""
    due: dict[str, list[Inversion]] = {}
    for found in inversions:
        if is_due(world, ledger, found):
            due.setdefault(found.preemptor.uid, []).append(found)
    return {
        uid: group
        for uid, group in due.items()
        if any((u := world.units.get(o)) is not None and u.op is not None for f in group for o in f.occupants)
    }


__all__ = ["Inversion", "contested_inversions", "find_inversions", "inversion_deadlines", "is_due", "rank"]
