"""Must a preemptor wait before it takes victims, and until when: the eviction delays of a failure and of starvation.

`evictionDelay` is a bet on a failed slice coming back; `lowerTierEvictionDelay` is the price a preemptor below
`topTierPriority` pays for a costly victim (one that would lose more than `evictionDelayMinLoss` of training).
The instants returned here are also the pass's next wake-ups (`Ledger.wait`).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from gke_tpu_priority.hotswap.planner.disruption import Disruption
from gke_tpu_priority.hotswap.planner.world import Unit, World
from gke_tpu_priority.hotswap.slices import SPOT_CAPACITY


def eviction_wait(world: World, evidence: Disruption, delay: timedelta) -> datetime | None:
    """When a new op for this failure may take victims, if not yet (`delay` after the failure). A slice that is
    back before then ends the infra evidence itself: the JobSet restarts in place, nobody is evicted.

    A failure that cannot be a transient (`Disruption.lasting`) is not waited for by a preemptor whose delay is
    `evictionDelay` (the top tier, or a victim set of opportunistic work): that delay is a bet on the slice coming
    back, and a deleted node does not. `lowerTierEvictionDelay` is waited for all the same: it is the price of a
    costly victim of a tier barely below the preemptor, not a bet on the failure, and in its minutes the victim
    publishes a checkpoint (it is then cheap and taken at once) or slices free up elsewhere."""
    if evidence.lasting and delay <= world.config.eviction_delay:
        return None
    until = evidence.since + delay
    return until if world.now < until else None


def starvation_wait(world: World, preemptor: Unit, starving: datetime, victims: list[Unit]) -> datetime | None:
    """When a starved preemptor below `topTierPriority` may take its costly victims, if not yet: the same
    `lowerTierEvictionDelay` as after an infrastructure failure, counted from when its pods began to wait. Without
    it the tier's own delay is undone by Kueue: waitForPodsReady requeues a JobSet whose slices stay down, Kueue
    re-admits it on the quota it freed, and its pods, unbound again, make it a starvation preemptor a minute later.
    Each re-admission starts the wait again (`unbound_since`): with a waitForPodsReady timeout shorter than the
    delay, as on the platform, such a JobSet takes only cheap and opportunistic victims. The top tier keeps
    `starvationGrace` alone.

    Demand on the spot rung does not start that wait again: there a JobSet admitted without a slice is one whose
    VMs GCP reclaimed (quota-only Kueue re-admits it on the spot quota its eviction freed). It already waited on the
    infrastructure path, from the reclamation until Kueue requeued it, and deleted capacity returns on GCP's
    schedule, not within a transient's minutes, so waiting again would cost more than it saves."""
    if eviction_delay(world, preemptor, None) <= world.config.eviction_delay:
        return None  # the top tier, or every tier waits alike: no victim's cost needs weighing
    if any(shape.capacity == SPOT_CAPACITY for shape in preemptor.demand):
        return None
    costly = costly_victims(world, victims)
    if not costly:
        return None
    delay = eviction_delay(world, preemptor, costly)
    if delay <= world.config.eviction_delay:
        return None
    until = starving + delay
    return until if world.now < until else None


def eviction_delay(world: World, preemptor: Unit, costly: list[Unit] | None) -> timedelta:
    """`lowerTierEvictionDelay` for a preemptor below `topTierPriority` whose costly victims (`costly`; None: not
    chosen yet, so any) include work of a tier that may preempt itself; otherwise `evictionDelay`. A victim below
    `preemptorMinPriority` is opportunistic work (a tier declared `preempts: false`): nobody waits longer for it."""
    config = world.config
    top = config.top_tier_priority
    if top is None or preemptor.kueue_priority >= top:
        return config.eviction_delay
    floor = config.preemptor_min_priority
    if costly is not None and floor is not None and all(v.kueue_priority < floor for v in costly):
        return config.eviction_delay
    return config.lower_tier_eviction_delay


def costly_victims(world: World, victims: list[Unit]) -> list[Unit]:
    """The victims that would lose more training than `evictionDelayMinLoss` (they wait out the delay)."""
    limit = world.config.eviction_delay_min_loss.total_seconds()
    return [v for v in victims if v.progress_at_risk_s(world.now) > limit]


__all__ = ["costly_victims", "eviction_delay", "eviction_wait", "starvation_wait"]
