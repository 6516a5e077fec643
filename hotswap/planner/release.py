"""Release held victims (B.7): capacity in priority order, preemptor gone, maxHold backstop, manual reactivation."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime

from gke_tpu_priority.hotswap.annotations import format_time, parse_time
from gke_tpu_priority.hotswap.config import ReleaseOnPreemptorGone
from gke_tpu_priority.hotswap.model import SliceShape, Workload
from gke_tpu_priority.hotswap.planner.actions import (
    Decision,
    EndRungSwitch,
    EventReason,
    EventType,
    ObjectRef,
    ReleaseReason,
    ReleaseVictim,
)
from gke_tpu_priority.hotswap.planner.claims import Blocked, Ledger
from gke_tpu_priority.hotswap.planner.disruption import deficit, supply
from gke_tpu_priority.hotswap.planner.queued_room import queued_room
from gke_tpu_priority.hotswap.planner.world import Unit, World, hold_since
from gke_tpu_priority.hotswap.slices import SPOT_CAPACITY, SliceHealth


def _release(world: World, ledger: Ledger, victim: Unit, reason: ReleaseReason, note: str) -> None:
    wl = victim.workload
    assert wl is not None
    keys = world.keys
    ledger.act(
        ReleaseVictim(
            workload=victim.workload_ref(),
            op_id=wl.annotations.get(keys.op_id, ""),
            reason=reason,
            remove_annotations=keys.victim_hold_keys(),
            set_annotations={keys.released_at: format_time(world.now)},
        )
    )
    ledger.event(
        Decision(
            EventReason.VICTIM_RELEASED,
            victim.jobset_ref(),
            f"released ({reason.value}): {note}",
            wl.annotations.get(keys.op_id, ""),
        )
    )


def _release_stray(world: World, ledger: Ledger, wl: Workload) -> None:
    """Release a held Workload whose JobSet is outside the view: no rule (capacity, preemptor, maxHold) can
    be evaluated for it, and nothing else would ever give it back."""
    keys = world.keys
    op_id = wl.annotations.get(keys.op_id, "")
    ref = ObjectRef("Workload", wl.namespace, wl.name, wl.uid, wl.resource_version)
    if not wl.annotations.get(keys.held_by):  # held for a rung switch, not as a victim: give the switch up
        reason = "rung switch given up: its JobSet is outside the reconciler's namespaces or label selector, or gone"
        ledger.act(EndRungSwitch(ref, keys.rung_switch_keys(), reason))
        event_ref = ObjectRef("Workload", wl.namespace, wl.name, wl.uid)
        ledger.event(Decision(EventReason.RUNG_SWITCH, event_ref, reason, type=EventType.WARNING))
        return
    ledger.act(
        ReleaseVictim(
            workload=ref,
            op_id=op_id,
            reason=ReleaseReason.OUT_OF_SCOPE,
            remove_annotations=keys.victim_hold_keys(),
            set_annotations={keys.released_at: format_time(world.now)},
        )
    )
    ledger.event(
        Decision(
            EventReason.VICTIM_RELEASED,
            ObjectRef("Workload", wl.namespace, wl.name, wl.uid),
            f"released ({ReleaseReason.OUT_OF_SCOPE.value}): its JobSet is outside the reconciler's namespaces "
            "or label selector, or gone",
            op_id,
        )
    )


def recovering_idle(world: World, ledger: Ledger) -> list[str]:
    """Empty Recovering slices nobody reserved: back from a repair for less than `recoveryStabilization`.

    A released victim may go there (a preemptor waits for Healthy). The stabilization guards a preemptor's
    restart against a flapping host; a victim waiting for capacity gains nothing from it but idle time, and if
    the host does flap it loses only what it ran since its restart. Kube-scheduler and Kueue TAS place work on a
    Ready node at once, so waiting there would be the reconciler's alone, leaving a repaired slice empty while victims
    wait.

    Not spot slices: spot VMs back from a reclamation are what JobSets starved on the spot rung take victims for at
    once, so a victim released there would soon be held again."""
    reserved = ledger.reserved
    return [
        name
        for name, found in world.slices.items()
        if found.health is SliceHealth.RECOVERING
        and not found.request_owned
        and found.shape.capacity != SPOT_CAPACITY
        and name not in world.occupants
        and name not in reserved
    ]


def _take(world: World, free: list[str], needs: Mapping[SliceShape, int]) -> list[str] | None:
    """Slices from `free` covering every shape's need, or None (all or nothing)."""
    taken: list[str] = []
    for shape, need in sorted(needs.items(), key=lambda sn: (sn[0].key, sn[0].chips_per_host or 0)):
        matching = [p for p in free if p not in taken and world.slices[p].shape.matches(shape)]
        if len(matching) < need:
            return None
        taken.extend(matching[:need])
    return taken


def _book(world: World, free: list[str], needs: Mapping[SliceShape, int]) -> None:
    """Remove from `free` what `needs` asks for, shape by shape: what exists, even if it is not enough."""
    for shape, need in needs.items():
        for pool in [p for p in free if world.slices[p].shape.matches(shape)][:need]:
            free.remove(pool)


def _settling(world: World, units: Iterable[Unit]) -> list[dict[SliceShape, int]]:
    """Demand still unplaced of recently released Workloads: it is booked against free slices (E5)."""
    booked = []
    released_at = world.keys.released_at
    for unit in units:
        wl = unit.workload
        if wl is None or unit.held_by is not None or not wl.active or released_at not in wl.annotations:
            continue
        released = parse_time(wl.annotations[released_at])
        if released is None or world.now - released >= world.config.release_settle:
            continue
        missing = {s: n - supply(world, unit, s) for s, n in unit.demand.items()}
        missing = {s: n for s, n in missing.items() if n > 0}
        if missing:
            booked.append(missing)
    return booked


def wl_queue(world: World, victim: Unit) -> str | None:
    """The ClusterQueue a held victim goes back to (recorded when it was held), if the snapshot has it."""
    wl = victim.workload
    name = wl.annotations.get(world.keys.held_queue) if wl is not None else None
    return name if name in world.queues else None


def reclaim_exposed(world: World) -> Callable[[Unit], Unit | None]:
    """Under `reclaimWithinCohort: Any` Kueue admits a workload that fits its queue's nominal quota by evicting
    borrowing workloads of other queues in the cohort irrespective of priority: a victim released then could
    evict the very JobSet it was held for. Returns, per victim, a running unit of strictly higher Kueue priority
    such an admission could evict (None: the release is safe as far as the snapshot tells).

    A held victim was evicted, so Kueue cleared its admission and its queue is usually unknown: then every
    `Any` queue of a borrower's cohort other than the borrower's own counts. Hierarchical cohorts are matched
    by cohort name only.
    """
    any_queues: dict[str, set[str]] = {}
    for queue in world.queues.values():
        if queue.reclaim_any and queue.cohort_name is not None:
            any_queues.setdefault(queue.cohort_name, set()).add(queue.name)
    if not any_queues:
        return lambda _victim: None
    borrowers = sorted(
        (
            u
            for u in world.running
            if (q := u.cluster_queue) is not None
            and q.borrowing
            and q.cohort_name in any_queues
            and any_queues[q.cohort_name] - {q.name}
        ),
        key=lambda u: (-u.kueue_priority, u.key),
    )

    def exposed(victim: Unit) -> Unit | None:
        own = victim.cluster_queue
        for borrower in borrowers:
            queue = borrower.cluster_queue
            assert queue is not None and queue.cohort_name is not None
            if borrower.kueue_priority <= victim.kueue_priority:
                break  # sorted by priority: nobody further is higher
            if own is None or (own.reclaim_any and own.cohort_name == queue.cohort_name and own.name != queue.name):
                return borrower
        return None

    return exposed


def plan_releases(world: World, ledger: Ledger, blocked: list[Blocked], room: dict[str, int] | None = None) -> int:
    """Append release actions; returns how many victims are released. `room`: `queued_room` as earlier rules of
    the pass left it (rung switches book theirs first)."""
    config, now = world.config, world.now
    for stray in sorted(world.stray_held, key=lambda w: w.key):
        _release_stray(world, ledger, stray)
    released = len(world.stray_held)
    waiting: list[tuple[Unit, bool, datetime]] = []
    exposed = reclaim_exposed(world)
    held = sorted(
        (u for u in world.annotated if u.held_by is not None and u.workload is not None),
        key=lambda u: u.key,
    )
    for victim in held:
        wl = victim.workload
        assert wl is not None and victim.held_by is not None
        if wl.active:
            _release(world, ledger, victim, ReleaseReason.REACTIVATED_EXTERNALLY, "reactivated by someone else")
            released += 1
            continue
        since = hold_since(world, wl)
        if since is None or now - since >= config.max_hold:
            _release(world, ledger, victim, ReleaseReason.MAX_HOLD, f"held longer than {config.max_hold}")
            released += 1
            continue
        preemptor = world.units.get(victim.held_by.uid)
        gone = preemptor is None or not preemptor.running_in_kueue
        op = ledger.open_ops.get(victim.held_by.uid)
        if gone and config.release_on_preemptor_gone is ReleaseOnPreemptorGone.IMMEDIATE and exposed(victim) is None:
            _release(world, ledger, victim, ReleaseReason.PREEMPTOR_GONE, "preemptor finished or gone")
            released += 1
            continue
        if op is not None and wl.key in op.victims:
            continue  # E3: stay held until the preemptor's attempt is placed
        waiting.append((victim, gone, since))

    if not waiting:
        return released  # the common pass: nothing to place, so no free or Recovering slice needs looking at
    recovering = recovering_idle(world, ledger)
    for uid in world.unbound:  # admitted JobSets with pods waiting for a node bind there by themselves first
        _book(world, recovering, deficit(world, world.units[uid]))
    free = [*ledger.free_slices(world), *recovering]
    for needs in [*(b.needs for b in blocked), *_settling(world, world.annotated)]:
        _book(world, free, needs)
    room = queued_room(world) if room is None else room
    waiting.sort(key=lambda vgs: (-vgs[0].kueue_priority, -vgs[0].pod_priority, vgs[2], vgs[0].key))
    for victim, gone, _since in waiting:
        if exposed(victim) is not None:
            ledger.defer()
            continue  # maxHold stays the backstop
        taken = _take(world, free, victim.demand)
        queue = wl_queue(world, victim)
        if taken is None and queue is not None and room.get(queue, 0) >= victim.chips:
            # Its own rung has nothing free, but Kueue can admit it on the queue's queued-provisioning flavor,
            # whose slices GKE makes for it alone: waiting for a slice here would leave that quota idle.
            room[queue] -= victim.chips
            _release(world, ledger, victim, ReleaseReason.QUEUED_CAPACITY, f"queued-provisioning quota of {queue}")
            released += 1
            continue
        if taken is None:
            # B.7(a): no over-release, and no lower victim takes capacity this one waits for. What exists of its
            # shapes is booked for it, as for a blocked preemptor; lower victims may still fit other shapes.
            _book(world, free, victim.demand)
            continue
        for pool in taken:
            free.remove(pool)
        reason = ReleaseReason.PREEMPTOR_GONE if gone else ReleaseReason.CAPACITY
        _release(world, ledger, victim, reason, f"capacity on {', '.join(taken) or 'no TPU slices needed'}")
        released += 1
    return released
