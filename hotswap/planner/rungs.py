"""Rung switch: move a JobSet whose spot VMs GCP reclaimed to its ClusterQueue's queued flex-start rung.

Quota-only Kueue (v0.19.2) gives a requeued workload the first flavor whose quota fits, and evicting a JobSet frees
exactly the spot quota it held, so it lands on spot again, where the next reclamation strikes it; taking a lower
JobSet's spot slice instead costs that JobSet its progress. Kueue TAS sees that the capacity is gone and assigns the
next flavor, and KEP-2560's flavor fallback would; neither is open to a quota-only ClusterQueue of v0.19.2. What
is: a nodeSelector on the JobSet's pod templates, which Kueue's flavor assigner matches against every flavor's
nodeLabels. The JobSet webhook lets a template's nodeSelector change only while the JobSet is suspended, and Kueue
keeps a suspended JobSet's Workload as it was until the Workload is deleted (both checked on the real servers,
e2e/test_rung_switch.py). So a switch takes three steps, each in a pass of its own, its state in the Workload's
annotations:

1. start: the Workload is held (`rung-switch` annotations and `spec.active=false` in one write); Kueue evicts it
   and suspends the JobSet;
2. once the JobSet is suspended and its quota released: its TPU pod templates are pinned to the queued capacity and
   the Workload is deleted; Kueue recreates it from the pinned template and admits it on the queued rung, where
   GKE provisions slices for it alone (its ProvisioningRequest);
3. or the switch is given up (the Workload reactivated as it was): when the template already selects a capacity,
   when someone else reactivated it, or when Kueue has not suspended it within `rungSwitchTimeout`.

Every tier that may preempt moves (not those below `preemptorMinPriority`), higher priority first, each only when
Kueue can admit it on the queued rung: free quota there, or quota lower-priority work holds there. Without that
room check a JobSet moved at every reclamation would wait for queued capacity higher tiers hold, and lose more than
the eviction it avoided (docs/benchmarks.md measures both).
"""

from __future__ import annotations

from collections.abc import Mapping

from gke_tpu_priority.hotswap.annotations import format_time, parse_time
from gke_tpu_priority.hotswap.planner.actions import (
    Decision,
    EndRungSwitch,
    EventReason,
    EventType,
    PinRung,
    StartRungSwitch,
)
from gke_tpu_priority.hotswap.planner.claims import Ledger
from gke_tpu_priority.hotswap.planner.disruption import Disruption
from gke_tpu_priority.hotswap.planner.world import Unit, World, preemptor_refusal
from gke_tpu_priority.hotswap.slices import CAPACITY_LABEL, QUEUED_CAPACITY, SPOT_CAPACITY


def plan_rung_switches(world: World, ledger: Ledger, disrupted: Mapping[str, Disruption], room: dict[str, int]) -> None:
    """Advance switches in flight, then start one for each eligible disrupted JobSet, highest priority first, that
    Kueue can admit on its ClusterQueue's queued rung: the rung's free quota (`room`, chips per queue, booked down as
    switches start) and the quota lower-priority Workloads hold there, which Kueue's own preemption
    (`withinClusterQueue: LowerPriority`) takes for it, cover its chips (less what this pass's earlier switches took
    from such work). A JobSet started this pass is claimed in `ledger`, so no rule of the pass takes it as a
    preemptor or a victim (`Ledger.rung_switches` counts those started)."""
    keys = world.keys
    for unit in world.annotated:
        wl = unit.workload
        if wl is not None and keys.rung_switch in wl.annotations:
            ledger.exclude(wl.key)
            _advance(world, ledger, unit)
    if not world.config.spot_rung_switch:
        return
    on_queued: dict[str, list[tuple[int, int]]] | None = None  # built on first need: most passes have no candidate
    taken: dict[str, int] = {}  # chips of lower-priority queued Workloads spoken for by this pass's switches
    for uid, evidence in sorted(disrupted.items(), key=lambda ue: (-world.units[ue[0]].kueue_priority, ue[1].since)):
        unit = world.units[uid]
        queue = _eligible(world, ledger, unit, evidence)
        if queue is None:
            continue
        if on_queued is None:
            on_queued = _reserved_on_queued(world)
        free = room.get(queue, 0)
        lower = sum(chips for priority, chips in on_queued.get(queue, ()) if priority < unit.kueue_priority)
        if free + lower - taken.get(queue, 0) < unit.chips:
            continue
        from_room = min(free, unit.chips)
        room[queue] = free - from_room
        taken[queue] = taken.get(queue, 0) + unit.chips - from_room
        _start(world, ledger, unit, evidence, queue)


def _reserved_on_queued(world: World) -> dict[str, list[tuple[int, int]]]:
    """Per ClusterQueue, (priority, chips) of each Workload holding quota on its queued-provisioning flavor (its pod
    templates select the queued capacity, as Kueue writes the flavor's nodeLabels on admission)."""
    found: dict[str, list[tuple[int, int]]] = {}
    for unit in world.units.values():
        wl = unit.workload
        if wl is None or wl.cluster_queue is None or not wl.quota_reserved:
            continue
        if unit.only_on(QUEUED_CAPACITY):
            found.setdefault(wl.cluster_queue, []).append((unit.kueue_priority, unit.chips))
    return found


def _eligible(world: World, ledger: Ledger, unit: Unit, evidence: Disruption) -> str | None:
    """The ClusterQueue of a JobSet admitted to the spot rung whose spot capacity is gone for good (a node deleted or
    shutting down: `Disruption.lasting`), free to move (no operation of its own, not claimed, a possible preemptor:
    its tier may preempt); None otherwise."""
    wl = unit.workload
    if wl is None or not evidence.lasting:
        return None
    if unit.op is not None or unit.uid in ledger.open_ops or wl.key in ledger.claimed:
        return None  # victims already held for it stay its operation's business
    if preemptor_refusal(world, unit) is not None or unit.cluster_queue is None:
        return None
    if not unit.only_on(SPOT_CAPACITY):
        return None
    return unit.cluster_queue.name


def _start(world: World, ledger: Ledger, unit: Unit, evidence: Disruption, queue: str) -> None:
    keys = world.keys
    annotations = {keys.rung_switch: QUEUED_CAPACITY, keys.rung_switch_since: format_time(world.now)}
    assert unit.workload is not None
    ledger.start_rung_switch(
        unit.workload.key,
        StartRungSwitch(unit.workload_ref(), unit.jobset_ref(), QUEUED_CAPACITY, annotations),
        world.now + world.config.rung_switch_timeout,
        Decision(
            EventReason.RUNG_SWITCH,
            unit.jobset_ref(),
            f"spot capacity reclaimed on {', '.join(evidence.pools)}: moving to {QUEUED_CAPACITY} "
            f"(queued-provisioning quota of {queue}) instead of evicting lower-priority work on spot",
        ),
    )


def _advance(world: World, ledger: Ledger, unit: Unit) -> None:
    wl, js = unit.workload, unit.jobset
    assert wl is not None
    keys = world.keys
    target = wl.annotations.get(keys.rung_switch, "")
    since = parse_time(wl.annotations.get(keys.rung_switch_since, ""))
    if wl.active:
        _give_up(ledger, unit, keys.rung_switch_keys(), "the Workload was reactivated by someone else")
        return
    if js.suspended and not wl.quota_reserved:
        tpu = [rj for rj in js.replicated_jobs if rj.shape is not None]
        other = sorted({rj.shape.capacity for rj in tpu if rj.shape and rj.shape.capacity not in (None, target)})
        if other or not tpu or target != QUEUED_CAPACITY:
            why = f"its pod template already selects {CAPACITY_LABEL}={other[0]}" if other else "nothing to pin"
            _give_up(ledger, unit, keys.rung_switch_keys(), f"rung switch to {target!r} given up: {why}")
            return
        ledger.act(
            PinRung(unit.workload_ref(), unit.jobset_ref(), target, CAPACITY_LABEL, tuple(rj.name for rj in tpu))
        )
        return
    timeout = world.config.rung_switch_timeout
    if since is None or world.now - since >= timeout:
        _give_up(
            ledger,
            unit,
            keys.rung_switch_keys(),
            f"Kueue did not suspend the JobSet within {timeout.total_seconds():g}s of the rung switch's hold",
        )
        return
    ledger.wake_at(since + timeout)


def _give_up(ledger: Ledger, unit: Unit, remove: tuple[str, ...], reason: str) -> None:
    ledger.act(EndRungSwitch(unit.workload_ref(), remove, reason))
    ledger.event(Decision(EventReason.RUNG_SWITCH, unit.jobset_ref(), reason, type=EventType.WARNING))
