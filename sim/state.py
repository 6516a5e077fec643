"""Mutable simulation state: slices (node pools of hosts), JobSets with their Kueue Workload, pods."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum

from sim.engine import Handle
from sim.params import Capacity, FailureKind, JobClass


def checkpointed_s(ran_s: float, interval_s: float) -> float:
    """Of `ran_s` seconds of training, what the last checkpoint saved (checkpoints every `interval_s` from the
    start of the run; none when `interval_s` is 0)."""
    return math.floor(ran_s / interval_s) * interval_s if interval_s > 0 else 0.0


class PodPhase(StrEnum):
    PENDING = "Pending"  # created, not bound
    STARTING = "Starting"  # bound, containers starting (k8s phase Pending with nodeName)
    RUNNING = "Running"
    TERMINATING = "Terminating"  # deletionTimestamp set, still holds its host


class JobState(StrEnum):
    """Lifecycle of a JobSet + Workload pair; conservation: every job is in exactly one."""

    QUEUED = "queued"  # Workload active, waiting for Kueue quota (JobSet suspended)
    ADMITTED = "admitted"  # quota reserved; pods pending, starting, running or restarting
    HELD = "held"  # Workload.spec.active=false (hotswap hold), JobSet suspended
    FINISHED = "finished"
    FAILED = "failed"  # terminal: maxRestarts exhausted


@dataclass(eq=False)
class Pod:
    job: Job
    attempt: int
    child: int  # child Job (replica) index = job-index label
    index: int  # completion index; 0 = leader
    created: float
    uid: int
    phase: PodPhase = PodPhase.PENDING
    slice: Slice | None = None
    host: int = -1
    nominated: tuple[Slice, int] | None = None
    bound_at: float | None = None
    running_at: float | None = None
    deleted_at: float | None = None
    failed: bool = False  # terminal Failed (container exit / force-deleted)
    disruption: str | None = None  # DisruptionTarget reason, e.g. PreemptionByScheduler
    disruption_at: float | None = None

    @property
    def job_key(self) -> tuple[int, int]:
        """JobSet's job-key: identical across restart attempts of the same child Job."""
        return (self.job.id, self.child)

    @property
    def name(self) -> str:
        return f"{self.job.name}-w-{self.child}-{self.index}-a{self.attempt}"

    @property
    def priority(self) -> int:
        return self.job.priority


@dataclass(frozen=True)
class Departure:
    """A pod that left its node: the I/O layer remembers these for infra attribution."""

    pod: Pod
    slice: Slice
    host: int
    at: float


@dataclass(eq=False)
class Job:
    id: int
    name: str
    cls: JobClass
    work_s: float
    created: float
    state: JobState = JobState.QUEUED
    attempt: int = 0  # JobSet status.restarts
    restarts_counted: int = 0  # status.restartsCountTowardsMax
    pods: list[Pod] = field(default_factory=list)  # current attempt
    terminating: set[Pod] = field(default_factory=set)  # pods of earlier attempts / suspended pods
    progress_s: float = 0.0  # checkpointed progress
    run_start: float | None = None  # all pods of the current attempt Running since
    restarting: bool = False  # waiting for old pods to go before recreating (BlockingRecreate)
    admitted_at: float | None = None
    last_admitted_at: float | None = None
    completion: Handle | None = None
    recreate: Handle | None = None
    quota_reserved: bool = False
    active: bool = True  # Workload.spec.active
    requeue_at: float = 0.0  # Kueue backoff after PodsReadyTimeout
    requeue_count: int = 0
    ready_token: int = 0  # invalidates stale waitForPodsReady checks
    not_ready_since: float | None = None  # Workload PodsReady=False lastTransitionTime (admission or failure)
    rv: int = 1  # Workload resourceVersion
    finished_at: float | None = None
    # Hold bookkeeping (reconciler): the Workload annotations the planner persists.
    annotations: dict[str, str] = field(default_factory=dict)
    held_since: float | None = None
    # Metrics bookkeeping
    incident_start: float | None = None  # infra fault that disrupted the current attempt
    incident_lasting: bool = True  # that fault outlasted detection and the restart (Simulator.lasting_after_s)
    victim_since: float | None = None  # policy eviction awaiting a running attempt again
    # Kueue TAS: the slice (topology domain) each child Job was admitted to; pods are pinned there (the topology
    # ungater's nodeSelector). None outside topology-aware policies, so kube-scheduler places pods freely.
    topology: dict[int, Slice] | None = None
    # Capacity ladder (Fleet.ladder only): the ResourceFlavor Kueue assigned (its node label becomes the pods'
    # nodeSelector), and for the queued flex-start flavor the slices GKE provisioned for its ProvisioningRequest.
    flavor: Capacity | None = None
    awaiting_capacity: bool = False  # quota reserved, ProvisioningRequest not yet filled (admission check Pending)
    provisioned: list[Slice] = field(default_factory=list)
    # Rung switch (reconciler, `planner.rungs`): the capacity its pod templates were pinned to (Kueue assigns only
    # that flavor from then on), and how many times its Workload was deleted for Kueue to recreate (a new uid).
    pinned: Capacity | None = None
    workload_generation: int = 0

    @property
    def priority(self) -> int:
        return self.cls.priority

    @property
    def slices(self) -> int:
        return self.cls.slices

    @property
    def running(self) -> bool:
        return self.run_start is not None

    def all_pods(self) -> list[Pod]:
        return [*self.pods, *self.terminating]


@dataclass(eq=False)
class Slice:
    id: int
    pool: str
    hosts: list[Pod | None]
    healthy: bool = True  # physical truth
    schedulable: bool = True  # nodes Ready and not cordoned, as kube-scheduler sees them
    node_ready: bool = True  # as the API server shows it
    node_transition: float = 0.0  # lastTransitionTime of the Ready condition
    unreachable: bool = False  # node.kubernetes.io/unreachable taint present
    fault_kind: FailureKind | None = None
    failed_at: float | None = None
    repair_at: float | None = None
    idle_since: float | None = 0.0  # healthy and empty since
    vacated_by_victim: bool = False  # the last emptying was a policy eviction
    occupied_since: float | None = None  # healthy with at least one pod bound since (fleet goodput ledger)
    reserved_for: Job | None = None
    """A NoSchedule taint only this JobSet tolerates (a hero drain, a clairvoyant reservation); None: no taint."""
    capacity: Capacity | None = None  # Fleet.capacity_of: None outside the capacity ladder
    present: bool = True  # nodes exist; False for queued flex-start capacity nobody has requested
    owner: Job | None = None  # queued capacity: the JobSet whose ProvisioningRequest made these nodes
    created_at: float = 0.0  # creationTimestamp of the nodes (a queued slice's provisioning, a spot VM's return)
    nodes_deleted: bool = False  # the Node objects are gone (spot VMs reclaimed), until capacity comes back
    absent_since: float | None = None  # not present since (queued capacity), for the provisioned-capacity ledger

    @property
    def empty(self) -> bool:
        return all(p is None for p in self.hosts)

    def occupants(self) -> set[Job]:
        return {p.job for p in self.hosts if p is not None}
