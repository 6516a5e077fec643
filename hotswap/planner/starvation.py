"""Starved preemptors: admitted JobSets whose pods cannot bind because lower-priority JobSets hold the slices.

In reconciler mode TPU PriorityClasses use `preemptionPolicy: Never`, so kube-scheduler never preempts for a
JobSet Kueue has admitted. Kueue admits by quota, not by free slices: quota does not shrink while a slice is
unhealthy, and quota an eviction frees can be taken back physically by a requeued lower-priority JobSet. The
admitted JobSet then waits until Kueue's `waitForPodsReady` evicts and requeues it, and the loop repeats. After
`starvationGrace` the reconciler treats it as a preemptor (a second source after infra-disrupted ones, I8):
whole lower-priority JobSets are held to free the slices it lacks.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from datetime import datetime

from gke_tpu_priority.hotswap.model import SliceShape
from gke_tpu_priority.hotswap.planner.victims import lower_priority
from gke_tpu_priority.hotswap.planner.world import Unit, World, preemptor_refusal

STARVATION = "starvation"
"""Op id suffix: a later infra failure of the same attempt is a distinct op."""


@dataclass(frozen=True, slots=True)
class Starved:
    """A JobSet starved of slices, and since when its pods have waited for a node."""

    unit: Unit
    since: datetime


def eligible(world: World, unit: Unit, disrupted: AbstractSet[str]) -> bool:
    """May be a starvation preemptor whatever the clock says: Kueue-managed and running there, not held, not
    TAS (Kueue places those), default exclusive placement (whole slices can be freed for it), and no infra
    evidence (those are infra preemptors already)."""
    return unit.uid not in disrupted and preemptor_refusal(world, unit) is None


def starved_units(world: World, disrupted: AbstractSet[str]) -> list[Starved]:
    """Eligible units whose pods have been unbound for at least `starvationGrace` (0 disables), highest priority
    first. Deficit, claims and free slices are the planner's business: they change within the pass."""
    grace = world.config.starvation_grace
    if not grace or not world.unbound:
        return []
    found = [
        Starved(unit, since)
        for uid, since in world.unbound.items()
        if world.now - since >= grace and eligible(world, unit := world.units[uid], disrupted)
    ]
    return sorted(found, key=lambda s: (-s.unit.kueue_priority, -s.unit.pod_priority, s.since, s.unit.key))


def starvation_deadlines(world: World, disrupted: AbstractSet[str]) -> Iterator[datetime]:
    """When units that wait for a node reach `starvationGrace` (for `next_wakeup`)."""
    grace = world.config.starvation_grace
    if not grace:
        return
    for uid, since in world.unbound.items():
        if eligible(world, world.units[uid], disrupted):
            yield since + grace


def covered_by(world: World, needs: Mapping[SliceShape, int], free: list[str]) -> set[str] | None:
    """Free-slice guard: slices of `free` covering every needed shape, or None if there are not enough.
    kube-scheduler binds the pods there (or they wait for something the reconciler cannot fix); holding work
    would only churn."""
    taken: set[str] = set()
    for shape, need in needs.items():
        matching = [p for p in free if p not in taken and world.slices[p].shape.matches(shape)][:need]
        if len(matching) < need:
            return None
        taken.update(matching)
    return taken


def lower_occupants(world: World, preemptor: Unit, needs: Mapping[SliceShape, int]) -> bool:
    """Some strictly lower-priority JobSet occupies a usable slice of a needed shape. Without one, waiting is
    ordinary queueing behind equal or higher work: nothing to warn about."""
    for pool, uids in world.occupants.items():
        found = world.slices.get(pool)
        if found is None or not found.usable or not any(found.shape.matches(s) for s in needs):
            continue
        for uid in uids:
            other = world.units.get(uid)
            if other is not None and other.uid != preemptor.uid and lower_priority(preemptor, other):
                return True
    return False
