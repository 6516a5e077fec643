"""`kueue-tas`: Kueue's native node hot swap (TAS + TASFailedNodeReplacement, FailFast, ReplaceNodeOnPodTermination).

What it reproduces (kubernetes-sigs/kueue v0.19.2, all three gates beta and on by default since 0.14,
pkg/features/kube_features.go):

- Admission with Topology-Aware Scheduling, one slice (node pool) per child Job, pods pinned to the assigned
  domain (`sim.tas`).
- The node failure controller (pkg/controller/tas/node_controller.go, `nodeReconciler.Reconcile`,
  `getWorkloadStatus`, `checkPodsOnNode`): a NotReady node of a TAS assignment is failed as soon as the
  workload's pods on it are no longer progressing (TASReplaceNodeOnPodTermination; without it, after
  NodeFailureDelay = 30 s, pkg/controller/tas/constants.go). `handleUnhealthyNode` records the first failed node
  for replacement, and `evictWorkloadIfNeeded` evicts the workload (reason NodeFailures) as soon as a second
  node of its assignment fails.
- Replacement (pkg/cache/scheduler/tas_flavor_snapshot.go `findReplacementAssignment`, confined to
  `requiredReplacementDomain`) and, with FailFast, eviction after the first failed try
  (pkg/scheduler/scheduler.go `schedule` -> `handleFailedTASReplacement` ->
  `evictWorkloadAfterFailedTASReplacement`). The search never preempts (flavorassigner.go: "Don't preempt other
  workloads if looking for a failed node replacement").
- A NodeFailures eviction requeues at once (pkg/controller/jobframework/reconciler.go sets Requeued for it as for
  Preempted) and clears the unhealthy nodes (pkg/workload/evict/evict.go), so the workload is admitted again like
  any pending one: on free domains if any, else through admission-time preemption, which in v0.19.2 does fire when
  quota fits but topology does not (`sim.tas`; `preempt_for_topology=False` gives the reading in which
  topology never preempts, for comparison).

At slice granularity: a v6e multi-host slice is a node pool with exactly its own hosts, and the simulator's
failures take the whole slice, so a failed workload has several failed nodes at once and is evicted by the node
controller; there is never a free node in the same domain to replace into. (A single-host failure would get one
replacement try in its pool, which has no spare node either, then FailFast eviction: the same outcome one
scheduling cycle later.) Left out: partial-slice failures, multi-level topologies (block/rack), the scheduler's
retry pacing, and kube-scheduler preemption (TAS pods are placed by Kueue, PriorityClasses do not preempt).
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial
from typing import TYPE_CHECKING

from sim import tas
from sim.kueue import LADDER, AdmissionPlan
from sim.state import Job, JobState

if TYPE_CHECKING:
    from sim.host import SimHost


class KueueTASPolicy:
    name = "kueue-tas"
    scheduler_preemption = False

    def __init__(self, *, preempt_for_topology: bool = True) -> None:
        self.preempt_for_topology = preempt_for_topology
        self._sim: SimHost | None = None
        self._evicting: set[Job] = set()
        self.node_failure_evictions = 0

    @property
    def sim(self) -> SimHost:
        assert self._sim is not None, "attach() first"
        return self._sim

    def attach(self, sim: SimHost) -> None:
        self._sim = sim

    def plan_admission(self, now: float) -> AdmissionPlan:
        return self._plan(self.sim.live, now)

    def _plan(self, jobs: Iterable[Job], now: float) -> AdmissionPlan:
        """Kueue TAS admission of `jobs`: on a capacity ladder with the quota-model policies' flavor order and
        queued capacity (`tas.plan_ladder_admission`), else one flavor, or a cohort's ClusterQueues."""
        sim = self.sim
        fleet = sim.scenario.fleet
        if fleet.ladder:
            quotas = {c: fleet.slices_of(c) * sim.chips_per_slice for c in LADDER}
            return tas.plan_ladder_admission(
                jobs,
                sim.slices,
                quotas,
                sim.chips_per_slice,
                now,
                preempt_for_topology=self.preempt_for_topology,
                spot_max_priority=fleet.spot_max_priority,
            )
        return tas.plan_admission(
            jobs,
            sim.slices,
            sim.quota_chips,
            sim.chips_per_slice,
            now,
            preempt_for_topology=self.preempt_for_topology,
            cohort=sim.cohort,
        )

    def on_change(self) -> None:
        """The TAS node controller: evict admitted workloads with a failed node in their assignment."""
        sim = self.sim
        for job in sim.live:
            if job in self._evicting or job.state is not JobState.ADMITTED or job.topology is None:
                continue
            if any(self._node_failed(job, child) for child in job.topology):
                self._evicting.add(job)
                sim.loop.after(sim.timing.kueue_admission_s, partial(self._evict, job))

    def _node_failed(self, job: Job, child: int) -> bool:
        """NotReady and none of the workload's pods on the slice still progressing (ReplaceNodeOnPodTermination).
        A slice repaired before its nodes went NotReady is never seen by the controller: the JobSet restarts in
        place on its assigned domain."""
        assert job.topology is not None
        s = job.topology[child]
        if s.node_ready:
            return False
        return not any(p is not None and p.job is job for p in s.hosts)

    def _evict(self, job: Job) -> None:
        self._evicting.discard(job)
        if job.state is not JobState.ADMITTED or job.topology is None:
            return
        self.node_failure_evictions += 1
        self.sim.rec.count("kueue_node_failure_evictions")
        self.sim.note(f"kueue evicts {job.name} (NodeFailures: no replacement in its domain)")
        self.sim.evict_requeue(job)
