"""How much queued-provisioning quota each ClusterQueue has free: the room a rung switch and a release may take.

The queued flex-start rung's slices are made by GKE for the JobSet Kueue admits there (its ProvisioningRequest), so
what limits a move or a release onto it is quota, not free slices.
"""

from __future__ import annotations

from gke_tpu_priority.hotswap.annotations import parse_time
from gke_tpu_priority.hotswap.planner.world import World
from gke_tpu_priority.hotswap.slices import QUEUED_CAPACITY


def queued_room(world: World) -> dict[str, int]:
    """Per ClusterQueue, TPU chips of queued-provisioning quota free for held victims: the queue's unreserved
    quota there, less what recently released Workloads Kueue has not reserved quota for yet may take, and what
    JobSets moving to the queued rung will (their queue is no longer known, so every queue counts them: a release
    waits rather than overfill). A move is spoken for from its hold (while Kueue still holds its spot quota) until
    Kueue admits the recreated Workload on the queued rung: room counted free in between would start a second
    switch, or release a victim, onto quota the first is about to take."""
    if not any(q.queued_room_chips > 0 for q in world.queues.values()):
        return {}  # no ladder, or its queued rung is full: spare the scan of every JobSet (each pass)
    pending = 0
    counted: set[str] = set()
    released_at, switching = world.keys.released_at, world.keys.rung_switch
    for unit in world.annotated:
        wl = unit.workload
        if wl is not None and wl.annotations.get(switching):
            pending += unit.chips  # held for the move (`rungs`), not yet pinned and recreated
            counted.add(unit.uid)
            continue
        if wl is None or unit.held_by is not None or not wl.active or wl.quota_reserved:
            continue
        released = parse_time(wl.annotations.get(released_at, ""))
        if released is not None and world.now - released < world.config.release_settle:
            pending += unit.chips
            counted.add(unit.uid)
    for unit in world.units.values():
        wl = unit.workload
        if unit.uid in counted or unit.held_by is not None:
            continue
        # No Workload: a switch just deleted it, and Kueue is about to recreate it from the suspended JobSet.
        waiting = unit.jobset.suspended if wl is None else wl.active and not wl.quota_reserved
        if waiting and unit.only_on(QUEUED_CAPACITY):
            # Pinned to the queued rung and not admitted yet: a move's recreated Workload, or the user's own.
            pending += unit.chips
    return {name: q.queued_room_chips - pending for name, q in world.queues.items() if q.queued_room_chips > pending}


__all__ = ["queued_room"]
