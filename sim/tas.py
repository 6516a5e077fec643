"""Kueue Topology-Aware Scheduling admission at slice granularity (pure decisions; Kueue v0.19.2).

A v6e multi-host slice is one node pool; a JobSet child Job requires all its pods in one pool (the required
topology level), so a topology domain here is one slice and a workload needs one free slice per child Job.
Kueue admits a workload only when both quota and topology fit, and records the domains in the Workload's
TopologyAssignment; the topology ungater then pins the pods there (`Job.topology`).

When quota fits but topology does not, v0.19.2 still looks for preemption victims: `assignFlavors`
(pkg/scheduler/flavorassigner/flavorassigner.go) turns a TAS failure into mode Preempt unless the workload is
looking for a failed-node replacement, and the preemptor's `workloadFits` (pkg/scheduler/preemption/
preemption.go) requires the TAS assignment to fit after removing candidates. So a requeued workload does preempt
lower-priority workloads for topology (`preempt_for_topology`); only the node replacement itself never does.
Candidates are ranked as in `kueue.plan_admission` (lowest priority, most recently admitted first), removed
greedily until quota and topology fit, then added back in reverse while they still fit.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from sim.cohort import Cohort, fill_back
from sim.kueue import LADDER, AdmissionPlan, _victims_in_flavor, queued_in_order, rungs
from sim.params import Capacity
from sim.state import Job, JobState, Slice


def _usable(s: Slice, job: Job) -> bool:
    """A domain Kueue's TAS cache counts for `job`: nodes Ready, untainted or tolerated. Queued flex-start slices
    are never a free domain: they exist only for the workload whose ProvisioningRequest made them."""
    return s.schedulable and (s.reserved_for is None or s.reserved_for is job) and s.capacity is not Capacity.QUEUED


def assigned(jobs: Iterable[Job]) -> set[int]:
    """Slice ids held by admitted workloads' topology assignments."""
    return {s.id for j in jobs if j.quota_reserved and j.topology is not None for s in j.topology.values()}


def free_domains(jobs: Iterable[Job], slices: Sequence[Slice], job: Job) -> list[Slice]:
    """Domains the TAS cache shows free for `job` (pods still terminating there do not count: their workload
    no longer holds an assignment, and kube-scheduler waits for them)."""
    taken = assigned(jobs)
    return [s for s in slices if s.id not in taken and _usable(s, job)]


def plan_admission(
    jobs: Iterable[Job],
    slices: Sequence[Slice],
    quota_chips: int,
    chips_per_slice: int,
    now: float,
    *,
    preempt_for_topology: bool = True,
    cohort: Cohort | None = None,
) -> AdmissionPlan:
    jobs = list(jobs)
    if cohort is not None:
        return _plan_cohort(jobs, slices, cohort, chips_per_slice, now, preempt_for_topology)
    admitted = [j for j in jobs if j.quota_reserved]
    used = sum(j.slices * chips_per_slice for j in admitted)
    taken = assigned(admitted)
    queued = sorted(
        (j for j in jobs if j.state is JobState.QUEUED and j.active and not j.quota_reserved and j.requeue_at <= now),
        key=lambda j: (-j.priority, j.created, j.id),
    )
    ranked = sorted(
        (j for j in admitted if j.state is JobState.ADMITTED),
        key=lambda j: (j.priority, -(j.last_admitted_at or 0.0), j.id),
    )
    plan = AdmissionPlan()
    for w in queued:
        need = w.slices * chips_per_slice
        free = [s for s in slices if s.id not in taken and _usable(s, w)]
        quota_fits = used + need <= quota_chips
        if quota_fits and len(free) >= w.slices:
            chosen = free[: w.slices]
            plan.admit.append(w)
            plan.placement[w] = chosen
            taken.update(s.id for s in chosen)
            used += need
            continue
        if quota_fits and not preempt_for_topology:
            continue  # TAS NoFit, no preemption: BestEffortFIFO tries the next workload
        victims = _victims(w, ranked, free, used, quota_chips, chips_per_slice)
        if victims is None:
            continue
        plan.preempt.extend(victims)
        if quota_fits:
            plan.topology_victims.update(victims)
        break  # the preemptor is admitted on a later cycle, once the victims are evicted
    return plan


def _victims(
    w: Job, ranked: list[Job], free: list[Slice], used: int, quota_chips: int, chips_per_slice: int
) -> list[Job] | None:
    """The minimal candidate set (Kueue's greedy + fill-back) after which `w` fits quota and topology."""
    candidates = [c for c in ranked if c.priority < w.priority]

    def freed_domains(c: Job) -> int:
        return sum(1 for s in (c.topology or {}).values() if _usable(s, w))

    def fits(chosen: list[Job]) -> bool:
        quota = used - sum(c.slices * chips_per_slice for c in chosen) + w.slices * chips_per_slice
        return quota <= quota_chips and len(free) + sum(freed_domains(c) for c in chosen) >= w.slices

    chosen: list[Job] = []
    for c in candidates:
        if fits(chosen):
            break
        chosen.append(c)
    if not fits(chosen):
        return None
    return fill_back(chosen, fits)


def _plan_cohort(
    jobs: list[Job],
    slices: Sequence[Slice],
    cohort: Cohort,
    chips_per_slice: int,
    now: float,
    preempt_for_topology: bool,
) -> AdmissionPlan:
    """`plan_admission` for several ClusterQueues in one cohort: quota as `sim.cohort` checks it, topology
    as above. For topology, the candidates are what the cohort's rules allow (own queue's lower priorities, other
    queues' borrowed workloads of lower priority); within-quota workloads of other teams never are."""
    admitted = [j for j in jobs if j.quota_reserved]
    used = cohort.usage(admitted, chips_per_slice)
    taken = assigned(admitted)
    ranked = [j for j in admitted if j.state is JobState.ADMITTED]
    queued = sorted(
        (j for j in jobs if j.state is JobState.QUEUED and j.active and not j.quota_reserved and j.requeue_at <= now),
        key=lambda j: (-j.priority, j.created, j.id),
    )
    plan = AdmissionPlan()
    for w in queued:
        need = w.slices * chips_per_slice
        free = [s for s in slices if s.id not in taken and _usable(s, w)]
        quota_fits = cohort.fits(used, w.cls.queue, need)
        if quota_fits and len(free) >= w.slices:
            chosen = free[: w.slices]
            plan.admit.append(w)
            plan.placement[w] = chosen
            taken.update(s.id for s in chosen)
            used[w.cls.queue] += need
            continue
        if quota_fits and not preempt_for_topology:
            continue

        def domains_fit(chosen: list[Job], w: Job = w, free: list[Slice] = free) -> bool:
            freed = sum(1 for c in chosen for s in (c.topology or {}).values() if _usable(s, w))
            return len(free) + freed >= w.slices

        victims = cohort.victims(w, ranked, used, chips_per_slice, also=domains_fit)
        if not victims:
            continue
        plan.preempt.extend(victims)
        if quota_fits:
            plan.topology_victims.update(victims)
        break
    return plan


def plan_ladder_admission(
    jobs: Iterable[Job],
    slices: Sequence[Slice],
    quotas: dict[Capacity, int],
    chips_per_slice: int,
    now: float,
    *,
    preempt_for_topology: bool = True,
    spot_max_priority: int | None = None,
) -> AdmissionPlan:
    """TAS admission on a capacity ladder: one ResourceFlavor per capacity mode in `LADDER` order, the same flavor
    order and quotas as `kueue.plan_ladder_admission` gives the quota-model
    policies, so the peers compare like for like.

    With the default flavor fungibility (whenCanPreempt: TryNextFlavor) a workload takes the first flavor where
    quota and topology both fit; its domains are free slices of that flavor (a spot slice whose VMs are gone has
    no Ready nodes, so TAS sees the capacity disappear). The queued flex-start flavor has no domains before its
    ProvisioningRequest is filled: quota alone admits there, and the topology follows the provisioned nodes
    (Kueue's delayed topology request), so its pods are placed on the slices GKE made for it. When no flavor
    fits, preemption runs in the first flavor where lower-priority workloads of that flavor make room (quota and,
    outside the queued flavor, topology; for topology alone only with `preempt_for_topology`). A workload above
    `spot_max_priority` never takes spot."""
    jobs = list(jobs)
    used = dict.fromkeys(LADDER, 0)
    for j in jobs:
        if j.quota_reserved and j.flavor is not None:
            used[j.flavor] += j.slices * chips_per_slice
    taken = assigned(jobs)
    plan = AdmissionPlan()
    for w in queued_in_order(jobs, now):
        need = w.slices * chips_per_slice
        allowed = rungs(w, spot_max_priority)
        admitted = False
        for c in allowed:
            if used[c] + need > quotas.get(c, 0):
                continue
            if c is Capacity.QUEUED:
                plan.admit.append(w)
                plan.flavor[w] = c
                used[c] += need
                admitted = True
                break
            free = [s for s in slices if s.capacity is c and s.id not in taken and _usable(s, w)]
            if len(free) >= w.slices:
                chosen = free[: w.slices]
                plan.admit.append(w)
                plan.placement[w] = chosen
                plan.flavor[w] = c
                taken.update(s.id for s in chosen)
                used[c] += need
                admitted = True
                break
        if admitted:
            continue
        for c in allowed:
            quota = quotas.get(c, 0)
            quota_fits = used[c] + need <= quota
            if c is Capacity.QUEUED:
                victims = _victims_in_flavor(w, jobs, c, used[c], quota, chips_per_slice)
            else:
                if quota_fits and not preempt_for_topology:
                    continue
                ranked = sorted(
                    (j for j in jobs if j.quota_reserved and j.flavor is c and j.state is JobState.ADMITTED),
                    key=lambda j: (j.priority, -(j.last_admitted_at or 0.0), j.id),
                )
                free = [s for s in slices if s.capacity is c and s.id not in taken and _usable(s, w)]
                victims = _victims(w, ranked, free, used[c], quota, chips_per_slice)
            if victims:
                plan.preempt.extend(victims)
                if quota_fits:
                    plan.topology_victims.update(victims)
                return plan  # the preemptor is admitted on a later cycle, once its victims are gone
    return plan
