"""When the plan changes by the clock alone (B.5): the earliest future instant a time-based rule flips.

Slice health, infra attribution, holds and release bookings all change at deadlines no watch event marks (a
node stays NotReady; a departed pod just ages). The controller schedules its next pass then instead of
waiting for the resync; the simulator does the same.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

from gke_tpu_priority.hotswap.annotations import is_true, parse_time
from gke_tpu_priority.hotswap.planner.actions import HoldVictim, ReleaseVictim
from gke_tpu_priority.hotswap.planner.claims import Ledger
from gke_tpu_priority.hotswap.planner.priority_inversions import inversion_deadlines
from gke_tpu_priority.hotswap.planner.starvation import starvation_deadlines
from gke_tpu_priority.hotswap.planner.world import World, hold_since
from gke_tpu_priority.hotswap.slices import SliceHealth, confirmation_deadline


def _deadlines(world: World) -> Iterator[datetime]:
    config = world.config
    fast_fail_key = world.keys.fast_fail
    for found in world.slices.values():
        if found.since is not None:
            if found.health is SliceHealth.SUSPECT:
                yield found.since + config.unhealthy_grace  # A1: Suspect -> Unhealthy
                failed = world.slice_failures.get(found.name)
                confirmed = (
                    None
                    if failed is None
                    else confirmation_deadline(found, failed, config.unhealthy_grace, config.confirmed_unhealthy_grace)
                )
                if confirmed is not None:
                    yield confirmed  # the workload confirmed the failure
            elif found.health is SliceHealth.RECOVERING:
                yield found.since + config.recovery_stabilization  # A9: Recovering -> Healthy
        if config.fast_fail.enabled and found.unreachable_since is not None:
            occupants = (world.units.get(uid) for uid in world.occupants.get(found.name, ()))
            if any(u is not None and is_true(u.jobset.annotations, fast_fail_key) for u in occupants):
                yield found.unreachable_since + config.fast_fail.after  # B.6.3
    for unit in world.with_pods:
        for gone in unit.departed:
            yield gone.gone_at + config.attribution_window  # B.3 (a): the evidence expires
    for unit in world.annotated:  # every rule below reads the Workload's annotations
        wl = unit.workload
        if wl is None or not wl.annotations:
            continue
        keys = world.keys
        if unit.held_by is not None:
            since = hold_since(world, wl)
            if since is not None:
                yield since + config.max_hold  # B.7 (c)
                preemptor = world.units.get(unit.held_by.uid)
                if preemptor is not None and preemptor.op is None:
                    yield since + config.attribution_window  # C3: too old to rebuild an op from
        released = parse_time(wl.annotations.get(keys.released_at, ""))
        if released is not None:
            yield released + config.release_settle  # E5: the booked demand is given back
        if keys.hold_history in wl.annotations:
            recent = world.hold_times(wl)
            if len(recent) >= config.max_holds_per_window:
                # I12: the oldest hold leaving the window makes the Workload a possible victim again.
                yield recent[len(recent) - config.max_holds_per_window] + config.hold_window
    yield from inversion_deadlines(world)  # inversionGrace: a slice priority inversion becomes due
    # starvationGrace: an admitted JobSet's unbound pods make it a preemptor. Infra evidence is not checked here
    # (it would cost a pass over every pod); a wake-up for an infra preemptor costs one idle pass.
    yield from starvation_deadlines(world, frozenset())


def next_wakeup(world: World) -> datetime | None:
    """Earliest deadline strictly after `world.now`, or None when nothing changes by the clock alone."""
    now = world.now
    return min((t for t in _deadlines(world) if t > now), default=None)


def pass_wakeup(world: World, ledger: Ledger) -> datetime | None:
    """`next_wakeup` of the snapshot; holds and releases written this pass add their own deadlines."""
    found = next_wakeup(world)
    config = world.config
    extra = [t for t in ledger.deadlines if t > world.now]
    if any(isinstance(a, HoldVictim) for a in ledger.actions):
        extra.append(world.now + config.max_hold)
    if any(isinstance(a, ReleaseVictim) for a in ledger.actions):
        extra.append(world.now + config.release_settle)
    return min([t for t in (found, *extra) if t is not None], default=None)
