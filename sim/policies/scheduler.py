"""`scheduler`: GKE's documented hotswap pattern.

PriorityClasses with preemptionPolicy: PreemptLowerPriority, priority-scoped exclusive placement, JobSet
failurePolicy restarts. All behaviour lives in the shared kube-scheduler/JobSet/Kueue model: per-pod
preemption, leader then followers, each child Job picking its pool independently, victims restarting and
burning maxRestarts, victims' Workloads staying admitted with pending pods. No controller acts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sim.host import SimHost


class SchedulerPolicy:
    name = "scheduler"
    scheduler_preemption = True

    def attach(self, sim: SimHost) -> None:
        del sim

    def plan_admission(self, now: float) -> None:
        del now  # Kueue without TAS: the simulator's quota model

    def on_change(self) -> None:
        return None


class SchedulerRecreatePolicy(SchedulerPolicy):
    """The same pattern with JobSet's own default restart strategy, `Recreate` (jobset v0.12.0
    api/jobset/v1alpha2/jobset_types.go), instead of the platform's `BlockingRecreate` (GKE's best-practice page
    uses BlockingRecreate too): each child Job is recreated as soon as its own old pods are gone, so the crashed
    child's leader starts preempting about 30 s earlier (it does not wait for its healthy siblings' grace)."""

    name = "scheduler-recreate"
    restart_strategy = "Recreate"
