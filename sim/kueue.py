"""Kueue admission for one ClusterQueue (pure decisions).

Quota is the fleet's nominal TPU chips and does not shrink when slices fail (Kueue does not see physical
capacity). Queue order is priority, then creation time (BestEffortFIFO). A pending workload that does not fit
may preempt admitted lower-priority workloads (withinClusterQueue: LowerPriority): candidates lowest priority
first, most recently admitted first, greedy then a minimising reverse pass. Preemption is whole-Workload.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import accumulate

from sim.cohort import Cohort
from sim.params import Capacity
from sim.state import Job, JobState, Slice


@dataclass(frozen=True)
class AdmissionPlan:
    admit: list[Job] = field(default_factory=list)
    preempt: list[Job] = field(default_factory=list)
    placement: dict[Job, list[Slice]] = field(default_factory=dict)
    """TAS only: the slices (one per child Job) each admitted workload is assigned to."""
    topology_victims: set[Job] = field(default_factory=set)
    """TAS only: preempted although quota alone would have fitted (the preemptor needed a free domain)."""
    flavor: dict[Job, Capacity] = field(default_factory=dict)
    """Capacity ladder only: the ResourceFlavor each admitted workload got."""


def _demand(job: Job, chips_per_slice: int) -> int:
    return job.slices * chips_per_slice


def plan_admission(
    jobs: Iterable[Job], quota_chips: int, chips_per_slice: int, now: float = 0.0, cohort: Cohort | None = None
) -> AdmissionPlan:
    jobs = list(jobs)
    if cohort is not None:
        return plan_cohort_admission(jobs, cohort, chips_per_slice, now)
    admitted = [j for j in jobs if j.quota_reserved]
    used = sum(_demand(j, chips_per_slice) for j in admitted)
    queued = sorted(
        (j for j in jobs if j.state is JobState.QUEUED and j.active and not j.quota_reserved and j.requeue_at <= now),
        key=lambda j: (-j.priority, j.created, j.id),
    )
    plan = AdmissionPlan()
    # Ranked once: the candidates for a queued workload are the prefix of lower priority (nothing is marked for
    # preemption before the loop ends), and a prefix that cannot cover the need is skipped by its total. A deep
    # queue of low-priority work behind a full fleet used to rescan every admitted job per queued workload.
    ranked = sorted(
        (j for j in admitted if j.state is JobState.ADMITTED),
        key=lambda j: (j.priority, -(j.last_admitted_at or 0.0), j.id),
    )
    priorities = [j.priority for j in ranked]
    totals = [0, *accumulate(_demand(j, chips_per_slice) for j in ranked)]
    for w in queued:
        need = _demand(w, chips_per_slice)
        if used + need <= quota_chips:
            plan.admit.append(w)
            used += need
            continue
        lower = bisect_left(priorities, w.priority)
        if used - totals[lower] + need > quota_chips:
            continue
        chosen = _minimal_victims(ranked[:lower], used, need, quota_chips, chips_per_slice)
        if chosen is None:
            continue
        plan.preempt.extend(chosen)
        # The preemptor is admitted on a later cycle, once the victims' quota is released.
        break
    return plan


def queued_in_order(jobs: Iterable[Job], now: float) -> list[Job]:
    """Pending workloads Kueue may admit now, in queue order (priority, then creation)."""
    return sorted(
        (j for j in jobs if j.state is JobState.QUEUED and j.active and not j.quota_reserved and j.requeue_at <= now),
        key=lambda j: (-j.priority, j.created, j.id),
    )


def plan_cohort_admission(jobs: list[Job], cohort: Cohort, chips_per_slice: int, now: float) -> AdmissionPlan:
    """`plan_admission` for several ClusterQueues in one cohort (`sim.cohort`): each queue's heads in
    one priority order (Kueue's scheduler takes the heads of every ClusterQueue and orders them the same way),
    borrowing when the cohort has quota to lend, preempting as `Cohort.victims` allows."""
    used = cohort.usage(jobs, chips_per_slice)
    ranked = [j for j in jobs if j.quota_reserved and j.state is JobState.ADMITTED]
    plan = AdmissionPlan()
    for w in queued_in_order(jobs, now):
        need = _demand(w, chips_per_slice)
        if cohort.fits(used, w.cls.queue, need):
            plan.admit.append(w)
            used[w.cls.queue] += need
            continue
        chosen = cohort.victims(w, ranked, used, chips_per_slice)
        if not chosen:
            continue
        plan.preempt.extend(chosen)
        break  # as in `plan_admission`: the preemptor is admitted once its victims are gone
    return plan


LADDER = (Capacity.RESERVATION, Capacity.SPOT, Capacity.QUEUED)
"""Flavor order of the ladder ClusterQueue (components/config/queues.py LADDER_ORDER without the modes the
simulator does not model: plain flex-start and on-demand)."""


def rungs(w: Job, spot_max_priority: int | None) -> tuple[Capacity, ...]:
    """The flavors of `LADDER` a workload may take: all of them, or without spot above `spot_max_priority`; only the
    one its pod templates were pinned to by a rung switch (a nodeSelector contradicting every other flavor)."""
    if w.pinned is not None:
        return (w.pinned,)
    if spot_max_priority is not None and w.priority > spot_max_priority:
        return tuple(c for c in LADDER if c is not Capacity.SPOT)
    return LADDER


def plan_ladder_admission(
    jobs: Iterable[Job],
    quotas: dict[Capacity, int],
    chips_per_slice: int,
    now: float = 0.0,
    spot_max_priority: int | None = None,
) -> AdmissionPlan:
    """`plan_admission` for a ClusterQueue with one ResourceFlavor per capacity mode, in `LADDER` order.

    Kueue's default flavor fungibility (whenCanPreempt: TryNextFlavor) tries every flavor in order and takes the
    first where the workload fits as is; only when none does, it preempts in the first flavor where lower-priority
    workloads of that flavor can make room. A JobSet has one pod set, so all its slices get one flavor. Quota per
    flavor is its nominal slices and does not shrink while spot VMs are gone (Kueue does not see capacity).
    Borrowing and cohorts are left out: one ClusterQueue. A workload above `spot_max_priority` never takes spot.
    """
    jobs = list(jobs)
    used = {c: 0 for c in LADDER}
    for j in jobs:
        if j.quota_reserved and j.flavor is not None:
            used[j.flavor] += _demand(j, chips_per_slice)
    queued = sorted(
        (j for j in jobs if j.state is JobState.QUEUED and j.active and not j.quota_reserved and j.requeue_at <= now),
        key=lambda j: (-j.priority, j.created, j.id),
    )
    plan = AdmissionPlan()
    for w in queued:
        need = _demand(w, chips_per_slice)
        allowed = rungs(w, spot_max_priority)
        fits = next((c for c in allowed if used[c] + need <= quotas.get(c, 0)), None)
        if fits is not None:
            plan.admit.append(w)
            plan.flavor[w] = fits
            used[fits] += need
            continue
        for c in allowed:
            chosen = _victims_in_flavor(w, jobs, c, used[c], quotas.get(c, 0), chips_per_slice)
            if chosen is not None:
                plan.preempt.extend(chosen)
                return plan  # as in `plan_admission`: the preemptor is admitted once its victims are gone
    return plan


def _victims_in_flavor(
    w: Job, jobs: list[Job], flavor: Capacity, used: int, quota: int, chips_per_slice: int
) -> list[Job] | None:
    """Kueue's minimal lower-priority victim set within one flavor (greedy, then a minimising reverse pass)."""
    need = _demand(w, chips_per_slice)
    if need > quota:
        return None
    ranked = sorted(
        (
            j
            for j in jobs
            if j.quota_reserved and j.flavor is flavor and j.state is JobState.ADMITTED and j.priority < w.priority
        ),
        key=lambda j: (j.priority, -(j.last_admitted_at or 0.0), j.id),
    )
    return _minimal_victims(ranked, used, need, quota, chips_per_slice)


def _minimal_victims(ranked: Iterable[Job], used: int, need: int, quota: int, chips_per_slice: int) -> list[Job] | None:
    """Kueue's victim set: the fewest of `ranked` (cheapest first) that make room for `need` (greedy, then a
    reverse pass dropping those not needed after all); None when all of them cannot."""
    chosen: list[Job] = []
    freed = 0
    for c in ranked:
        if used - freed + need <= quota:
            break
        chosen.append(c)
        freed += _demand(c, chips_per_slice)
    if used - freed + need > quota:
        return None
    for c in list(reversed(chosen)):
        if used - (freed - _demand(c, chips_per_slice)) + need <= quota:
            chosen.remove(c)
            freed -= _demand(c, chips_per_slice)
    return chosen
