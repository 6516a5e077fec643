"""What a policy may see of and do to the simulated cluster: the interface the simulator implements.

Policies are typed against this protocol, not against `Simulator`, so the policy modules never import the
simulator that drives them (the simulator imports the policy interface; the reverse import was a cycle, even
when hidden behind TYPE_CHECKING). tests/sim/test_import_graph.py keeps it that way.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from sim.cohort import Cohort
from sim.engine import EventLoop
from sim.metrics import Recorder
from sim.params import Capacity, FailureKind, Scenario, Timing
from sim.state import Departure, Job, Pod, Slice


class SimHost(Protocol):
    """The simulator as a policy sees it: state to read, and the API calls a controller could make."""

    scenario: Scenario
    timing: Timing
    loop: EventLoop
    rec: Recorder
    slices: list[Slice]
    live: dict[Job, None]
    track_departures: bool
    chips_per_slice: int
    quota_chips: int
    cohort: Cohort | None
    """Several ClusterQueues in a cohort (multi-team scenario); None: one ClusterQueue of quota_chips."""

    @property
    def now(self) -> float: ...

    def kick(self) -> None:
        """Ask for a control pass (Kueue, kube-scheduler, policy) at the current instant."""

    def pods(self) -> Iterable[Pod]: ...

    def recent_departures(self, window_s: float) -> list[Departure]: ...

    def force_fail(self, pod: Pod) -> None:
        """Mark the pod Failed and delete it with grace 0."""

    def deactivate(self, job: Job) -> None:
        """Workload.spec.active=false: Kueue evicts and does not requeue."""

    def reactivate(self, job: Job) -> None:
        """Workload.spec.active=true: Kueue requeues."""

    def evict_requeue(self, job: Job) -> None:
        """A Kueue eviction that requeues the Workload at once (NodeFailures)."""

    def hold_for_rung_switch(self, job: Job) -> None:
        """spec.active=false to move the JobSet to another rung (nobody's victim)."""

    def recreate_workload(self, job: Job, capacity: Capacity) -> None:
        """Pin the suspended JobSet to `capacity` and delete its Workload; Kueue recreates and queues it."""

    def end_rung_switch(self, job: Job) -> None:
        """Give a rung switch up: spec.active=true, Kueue requeues the Workload as it was."""

    def lasting_after_s(self, kind: FailureKind) -> float:
        """A repair longer than this outlasts detection and the JobSet's own restart."""

    def note(self, what: str) -> None:
        """Append to the event log when tracing."""
