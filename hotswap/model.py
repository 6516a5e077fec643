"""Typed, immutable cluster snapshot the planner decides on.

The I/O layer (`hotswap/kube/snapshot.py`) converts watched Kubernetes objects into these types; the planner
never sees raw dicts. Everything is a frozen, slotted dataclass of tuples so a snapshot of thousands of
objects is cheap to build and safe to share. Mappings (labels, annotations) are plain dicts, by
convention read-only. All times are timezone-aware UTC datetimes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

# Shared empty mapping default; never mutated.
_EMPTY: Mapping[str, str] = {}


class ConditionStatus(StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class PodPhase(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"


class TaintEffect(StrEnum):
    NO_SCHEDULE = "NoSchedule"
    PREFER_NO_SCHEDULE = "PreferNoSchedule"
    NO_EXECUTE = "NoExecute"


@dataclass(frozen=True, slots=True)
class Condition:
    """A status condition (Node, Workload, JobSet)."""

    type: str
    status: ConditionStatus
    reason: str = ""
    last_transition_time: datetime | None = None
    message: str = ""


def find_condition(conditions: tuple[Condition, ...], kind: str) -> Condition | None:
    for condition in conditions:
        if condition.type == kind:
            return condition
    return None


def condition_true(conditions: tuple[Condition, ...], kind: str) -> bool:
    condition = find_condition(conditions, kind)
    return condition is not None and condition.status is ConditionStatus.TRUE


@dataclass(frozen=True, slots=True)
class Taint:
    """`node.spec.taints[]`; `time_added` is only set by Kubernetes for NoExecute taints."""

    key: str
    effect: TaintEffect
    value: str = ""
    time_added: datetime | None = None


@dataclass(frozen=True, slots=True)
class SliceShape:
    """What a pod template selects: `cloud.google.com/gke-tpu-accelerator` and `…/gke-tpu-topology`.

    `chips_per_host` disambiguates layouts with the same topology (v6e 2x4 = one 8-chip VM or two 4-chip
    VMs): on a node it comes from the machine type or `google.com/tpu` allocatable, on a pod template from its
    `google.com/tpu` request. None means "not known"; two shapes then match on accelerator and topology only.

    `capacity` is the platform's `gke-tpu-priority.io/capacity` label (reservation, spot, flex-start, …): on a node
    its pool's, on a pod template what Kueue's ResourceFlavor put in its nodeSelector at admission. On a capacity
    ladder a JobSet admitted to the reservation flavor cannot run on a spot slice, so a spot slice freed for it
    frees nothing. None on either side (a pool or a flavor that does not split by capacity) matches any.
    """

    accelerator: str
    topology: str
    chips_per_host: int | None = None
    capacity: str | None = None

    def matches(self, other: SliceShape) -> bool:
        if self.accelerator != other.accelerator or self.topology != other.topology:
            return False
        if self.capacity is not None and other.capacity is not None and self.capacity != other.capacity:
            return False
        return (
            self.chips_per_host is None or other.chips_per_host is None or self.chips_per_host == other.chips_per_host
        )

    @property
    def key(self) -> str:
        """Shape identity ignoring chips-per-host (used to group; `matches` refines)."""
        return f"{self.accelerator}/{self.topology}"

    @property
    def chips(self) -> int | None:
        """TPU chips in one slice of this shape (the product of the topology's dimensions); None if unparsable."""
        dims = self.topology.lower().split("x")
        if not all(d.isdigit() for d in dims):
            return None
        return math.prod(int(d) for d in dims)


@dataclass(frozen=True, slots=True)
class Node:
    """A Kubernetes Node. Only TPU nodes (with accelerator and topology labels) matter to the planner."""

    name: str
    node_pool: str | None
    """`cloud.google.com/gke-nodepool` label: the slice identity (nodes may be recreated with new names)."""
    accelerator: str | None = None
    """`cloud.google.com/gke-tpu-accelerator`, e.g. `tpu-v6e-slice`."""
    topology: str | None = None
    """`cloud.google.com/gke-tpu-topology`, e.g. `4x4`."""
    machine_type: str | None = None
    """`node.kubernetes.io/instance-type`, e.g. `ct6e-standard-4t`."""
    tpu_chips: int | None = None
    """`status.allocatable["google.com/tpu"]`, when known."""
    capacity: str | None = None
    """`gke-tpu-priority.io/capacity` label of the platform's TPU pools (see `SliceShape.capacity`)."""
    ready: ConditionStatus = ConditionStatus.TRUE
    """Status of the `Ready` condition (Unknown when the kubelet stopped reporting)."""
    ready_transition_time: datetime | None = None
    """`lastTransitionTime` of the `Ready` condition: start of the current Ready / NotReady period."""
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    """`spec.unschedulable` (cordon or drain)."""
    creation_timestamp: datetime | None = None
    deletion_timestamp: datetime | None = None
    request_owned: bool = False
    """The node was made for a GKE ProvisioningRequest (queued provisioning, `hotswap.slices.request_owned_labels`):
    its capacity belongs to the workload admitted through that request, never to anyone else."""


@dataclass(frozen=True, slots=True)
class Pod:
    """A pod carrying JobSet labels (`jobset.sigs.k8s.io/*`), or any other pod using TPU chips (`jobset_name` empty):
    those occupy their slice but belong to no JobSet. Pods using no TPU chips are not in the snapshot."""

    namespace: str
    name: str
    uid: str
    jobset_name: str
    """Label `jobset.sigs.k8s.io/jobset-name`; the JobSet is in the pod's namespace. Empty: no JobSet's pod."""
    replicated_job_name: str = ""
    """Label `jobset.sigs.k8s.io/replicatedjob-name`."""
    job_index: int = 0
    """Label `jobset.sigs.k8s.io/job-index`: which replica (and so which slice) of the replicated job."""
    restart_attempt: int = 0
    """Label `jobset.sigs.k8s.io/restart-attempt`: the JobSet `status.restarts` value the pod belongs to."""
    node_name: str | None = None
    """`spec.nodeName`; None while unscheduled."""
    node_pool: str | None = None
    """Node pool of `node_name` if the I/O layer knows it even after the Node vanished; else looked up."""
    phase: PodPhase = PodPhase.PENDING
    priority: int | None = None
    """`spec.priority` (set from the PriorityClass by the admission plugin); also label `…/priority`."""
    deletion_timestamp: datetime | None = None
    disruption_reason: str | None = None
    """Reason of the `DisruptionTarget` condition when True, e.g. `DeletionByTaintManager`."""
    disruption_time: datetime | None = None
    creation_timestamp: datetime | None = None
    """`metadata.creationTimestamp`: an unbound pod has waited for a node since then (starvation)."""

    @property
    def terminal(self) -> bool:
        return self.phase in (PodPhase.SUCCEEDED, PodPhase.FAILED)


@dataclass(frozen=True, slots=True)
class DepartedPod:
    """A JobSet pod that disappeared recently, remembered by the I/O layer for infra attribution.

    JobSet restarts delete the failed attempt's pods; without this memory the planner could not tell that a
    restarting JobSet was knocked off an unhealthy slice. Keep entries for `attributionWindow`.
    """

    namespace: str
    jobset_name: str
    restart_attempt: int
    node_name: str | None
    node_pool: str | None
    gone_at: datetime
    priority: int | None = None
    disruption_reason: str | None = None
    failed: bool = False
    """The pod was Failed or Unknown when it went (its containers died), not deleted while running."""


@dataclass(frozen=True, slots=True)
class ReplicatedJob:
    """`spec.replicatedJobs[]`: `replicas` child Jobs; each needs one slice when `shape` is a TPU shape."""

    name: str
    replicas: int
    shape: SliceShape | None = None
    """From the pod template nodeSelector (+ `google.com/tpu` request); None for CPU-only jobs."""


@dataclass(frozen=True, slots=True)
class JobSet:
    """A `jobset.x-k8s.io/v1alpha2` JobSet."""

    namespace: str
    name: str
    uid: str
    replicated_jobs: tuple[ReplicatedJob, ...] = ()
    exclusive_topology: str | None = None
    """`alpha.jobset.sigs.k8s.io/exclusive-topology` (metadata or replicated-job template); movable only
    when it is `cloud.google.com/gke-nodepool`."""
    node_selector_strategy: bool = False
    """`alpha.jobset.sigs.k8s.io/node-selector` is set: placement is static, never a victim or preemptor."""
    max_restarts: int | None = None
    """`spec.failurePolicy.maxRestarts`; None when there is no failurePolicy (any failure is final)."""
    restarts: int = 0
    """`status.restarts`: the current attempt number (pods carry it as `restart-attempt`)."""
    restarts_count_towards_max: int = 0
    terminal_state: str | None = None
    """`status.terminalState`: `Completed` | `Failed` | None while running."""
    suspended: bool = False
    """`spec.suspend`."""
    managed_by: str | None = None
    """`spec.managedBy`; None or `jobset.sigs.k8s.io/jobset-controller` is the default controller."""
    pod_priority: int | None = None
    """Value of the pod templates' PriorityClass (highest across replicated jobs), when resolvable."""
    creation_timestamp: datetime | None = None
    conditions: tuple[Condition, ...] = ()
    labels: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    annotations: Mapping[str, str] = field(default_factory=lambda: _EMPTY)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class PriorityClassRef:
    """Workload `spec.priorityClassRef` (kueue v1beta2)."""

    group: str
    kind: str
    name: str


@dataclass(frozen=True, slots=True)
class Workload:
    """A `kueue.x-k8s.io/v1beta2` Workload. For JobSets Kueue creates one per JobSet."""

    namespace: str
    name: str
    uid: str
    resource_version: str
    owner_jobset_uid: str | None = None
    """uid of the owning JobSet (ownerReference with kind JobSet, or label `kueue.x-k8s.io/job-uid`)."""
    owner_jobset_name: str | None = None
    active: bool = True
    """`spec.active` (defaults to true)."""
    priority: int | None = None
    """`spec.priority`."""
    priority_class_ref: PriorityClassRef | None = None
    cluster_queue: str | None = None
    """`status.admission.clusterQueue`; None when not admitted."""
    queue_name: str | None = None
    """`spec.queueName` (the LocalQueue)."""
    conditions: tuple[Condition, ...] = ()
    """QuotaReserved, Admitted, Evicted, Preempted, Requeued, PodsReady, Finished …"""
    annotations: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    creation_timestamp: datetime | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def admitted(self) -> bool:
        return condition_true(self.conditions, "Admitted")

    @property
    def quota_reserved(self) -> bool:
        return condition_true(self.conditions, "QuotaReserved")

    @property
    def evicted(self) -> bool:
        return condition_true(self.conditions, "Evicted")

    @property
    def finished(self) -> bool:
        return condition_true(self.conditions, "Finished")

    @property
    def pods_ready(self) -> bool:
        return condition_true(self.conditions, "PodsReady")


@dataclass(frozen=True, slots=True)
class ClusterQueue:
    """A `kueue.x-k8s.io/v1beta2` ClusterQueue, reduced to what scoping needs."""

    name: str
    cohort_name: str | None = None
    """`spec.cohortName`."""
    uses_tas: bool = False
    """A flavor with a Topology whose lowest level is `kubernetes.io/hostname`: Kueue handles node failures
    for these workloads itself, so the reconciler leaves them alone."""
    reclaim_any: bool = False
    """`spec.preemption.reclaimWithinCohort: Any`: a workload of this queue that fits its nominal quota makes
    Kueue evict borrowing workloads of other queues in the cohort irrespective of priority."""
    borrowing: bool = False
    """`status.flavorsReservation[].resources[].borrowed` is not zero: the queue uses quota lent by its cohort."""
    queued_room_chips: int = 0
    """TPU chips (`google.com/tpu`) of nominal quota not reserved on the queue's queued-provisioning flavors (a
    flavor whose `nodeLabels` select `cloud.google.com/gke-queued=true` or the platform's capacity label
    `flex-start-queued`). A workload Kueue admits there gets slices GKE provisions for it alone, so releasing a
    held victim into it takes no slice anyone else waits for."""


@dataclass(frozen=True, slots=True)
class ClusterSnapshot:
    """One consistent view of everything the planner reads."""

    nodes: tuple[Node, ...] = ()
    pods: tuple[Pod, ...] = ()
    jobsets: tuple[JobSet, ...] = ()
    workloads: tuple[Workload, ...] = ()
    cluster_queues: tuple[ClusterQueue, ...] = ()
    departed_pods: tuple[DepartedPod, ...] = ()
