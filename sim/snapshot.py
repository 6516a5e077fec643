"""Convert simulator state into the reconciler's `ClusterSnapshot`, as the I/O layer would from the API.

Names and uids are stable functions of simulator ids so the planner's actions map back to simulator objects.
Finished JobSets are left out (as if garbage-collected by ttlSecondsAfterFinished).

Capacity ladder (`Fleet.ladder`): nodes carry the labels GKE and the platform put on them (`node_labels`), and the
`Node.request_owned` flag is derived from those labels and taints exactly as the I/O layer derives it
(hotswap/kube/snapshot.py). A spot slice during its preemption notice shows NotReady nodes (the kubelet's graceful
shutdown) and pods with a DisruptionTarget; after the notice its Node objects are gone (the VMs were deleted) until
GCP gives the capacity back, and the slice is simply absent from the snapshot. Queued flex-start capacity nobody
has requested, or that went back to GKE, has no nodes either.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from gke_tpu_priority.hotswap.annotations import JOBSET_EXCLUSIVE_TOPOLOGY, NODEPOOL_LABEL, format_time
from gke_tpu_priority.hotswap.config import HotswapConfig
from gke_tpu_priority.hotswap.model import (
    ClusterQueue,
    ClusterSnapshot,
    Condition,
    ConditionStatus,
    DepartedPod,
    JobSet,
    Node,
    Pod,
    PodPhase,
    PriorityClassRef,
    ReplicatedJob,
    SliceShape,
    Taint,
    TaintEffect,
    Workload,
)
from gke_tpu_priority.hotswap.slices import (
    CAPACITY_LABEL,
    QUEUED_LABEL,
    QUEUED_TAINT,
    UNREACHABLE_TAINT,
    request_owned_labels,
)
from sim.params import Capacity
from sim.state import Job, JobState, Slice, checkpointed_s
from sim.state import Pod as SimPod
from sim.state import PodPhase as SimPhase

SIM_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
NAMESPACE = "training"
CLUSTER_QUEUE = "tpu-v6e"
LOCAL_QUEUE = "tpu"
REPLICATED_JOB = "workers"

_TPU_TAINT = Taint("google.com/tpu", TaintEffect.NO_SCHEDULE, "present")
_QUEUED_TAINT = Taint(QUEUED_TAINT, TaintEffect.NO_SCHEDULE, "true")
SPOT_LABEL = "cloud.google.com/gke-spot"
"""`true` on GKE spot nodes (GKE 'Spot VMs'); GKE adds no spot taint by default."""


def at(seconds: float) -> datetime:
    """Simulated seconds -> the datetime the planner sees."""
    return SIM_EPOCH + timedelta(seconds=seconds)


def node_name(s: Slice, host: int) -> str:
    return f"{s.pool}-{host}"


def workload_uid(job: Job) -> str:
    """A Workload Kueue recreated (after a rung switch deleted it) is a new object with a new uid."""
    return f"wl-{job.id}" if not job.workload_generation else f"wl-{job.id}-{job.workload_generation}"


def jobset_uid(job: Job) -> str:
    return f"js-{job.id}"


def pod_uid(pod: SimPod) -> str:
    return f"pod-{pod.uid}"


def node_labels(s: Slice) -> dict[str, str]:
    """Capacity labels of the slice's nodes: the platform's `gke-tpu-priority.io/capacity` (its values in
    components/config/tpu.py), GKE's `cloud.google.com/gke-spot` on spot nodes and `cloud.google.com/gke-queued` on
    nodes made for a ProvisioningRequest. None outside the capacity ladder."""
    if s.capacity is None:
        return {}
    labels = {CAPACITY_LABEL: s.capacity.value}
    if s.capacity is Capacity.SPOT:
        labels[SPOT_LABEL] = "true"
    elif s.capacity is Capacity.QUEUED:
        labels[QUEUED_LABEL] = "true"
    return labels


def _nodes(s: Slice, shape: SliceShape, machine_type: str) -> list[Node]:
    if not s.present or s.nodes_deleted:
        return []
    taints: tuple[Taint, ...]
    if s.node_ready:
        ready, taints = ConditionStatus.TRUE, (_TPU_TAINT,)
    elif s.unreachable:
        ready = ConditionStatus.UNKNOWN
        taints = (
            _TPU_TAINT,
            Taint(UNREACHABLE_TAINT, TaintEffect.NO_EXECUTE, time_added=at(s.node_transition)),
            Taint(UNREACHABLE_TAINT, TaintEffect.NO_SCHEDULE),
        )
    else:
        ready, taints = ConditionStatus.FALSE, (_TPU_TAINT,)
    labels = node_labels(s)
    if labels.get(QUEUED_LABEL) == "true":
        taints = (*taints, _QUEUED_TAINT)
    owned = request_owned_labels(labels) or any(t.key == QUEUED_TAINT for t in taints)
    return [
        Node(
            name=node_name(s, h),
            node_pool=s.pool,
            accelerator=shape.accelerator,
            topology=shape.topology,
            machine_type=machine_type,
            tpu_chips=shape.chips_per_host,
            capacity=labels.get(CAPACITY_LABEL),
            ready=ready,
            ready_transition_time=at(s.node_transition),
            taints=taints,
            creation_timestamp=at(s.created_at),
            request_owned=owned,
        )
        for h in range(len(s.hosts))
    ]


def _pod(pod: SimPod) -> Pod:
    bound = pod.slice is not None and pod.slice.hosts[pod.host] is pod
    phase = PodPhase.RUNNING if pod.phase in (SimPhase.RUNNING, SimPhase.TERMINATING) else PodPhase.PENDING
    if pod.phase is SimPhase.TERMINATING and pod.running_at is None:
        phase = PodPhase.PENDING
    return Pod(
        namespace=NAMESPACE,
        name=pod.name,
        uid=pod_uid(pod),
        jobset_name=pod.job.name,
        replicated_job_name=REPLICATED_JOB,
        job_index=pod.child,
        restart_attempt=pod.attempt,
        node_name=node_name(pod.slice, pod.host) if bound and pod.slice is not None else None,
        node_pool=pod.slice.pool if bound and pod.slice is not None else None,
        phase=phase,
        priority=pod.priority,
        deletion_timestamp=at(pod.deleted_at) if pod.deleted_at is not None else None,
        disruption_reason=pod.disruption,
        disruption_time=at(pod.disruption_at) if pod.disruption_at is not None else None,
        creation_timestamp=at(pod.created),
    )


@dataclass(frozen=True, slots=True)
class CheckpointSignal:
    """How simulated training code publishes its checkpoints: the annotation key, the interval, and the clock."""

    key: str
    interval_s: float
    now: float
    share: float = 1.0
    """Of the JobSets, the share that publishes (`Scenario.checkpoint_share`); the others publish nothing."""
    seed: int = 0

    def publishes(self, job: Job) -> bool:
        """Whether this JobSet's training code publishes its checkpoints: one draw per JobSet name and seed, so the
        same JobSets publish under every policy and in every pass."""
        if self.share >= 1.0:
            return True
        if self.share <= 0.0:
            return False
        return zlib.crc32(f"{self.seed}/{job.name}".encode()) / 2**32 < self.share

    def last(self, job: Job) -> float | None:
        """When the running attempt last completed a checkpoint; None before its first one, when not running, or
        when the JobSet does not publish."""
        if job.run_start is None or not self.publishes(job):
            return None
        saved = checkpointed_s(self.now - job.run_start, self.interval_s)
        return job.run_start + saved if saved > 0 else None


def _admitted_shape(job: Job, shape: SliceShape) -> SliceShape:
    """The template's shape as Kueue leaves it: while admitted to a ladder flavor, its nodeSelector names the
    flavor's capacity; suspended again, the original nodeSelector is back (with a rung switch's pin)."""
    if job.flavor is None or not job.quota_reserved:
        if job.pinned is not None:
            return SliceShape(shape.accelerator, shape.topology, shape.chips_per_host, job.pinned.value)
        return shape
    return SliceShape(shape.accelerator, shape.topology, shape.chips_per_host, job.flavor.value)


def _jobset(job: Job, shape: SliceShape, checkpoints: CheckpointSignal | None = None) -> JobSet:
    annotations = {JOBSET_EXCLUSIVE_TOPOLOGY: NODEPOOL_LABEL}
    if checkpoints is not None and (last := checkpoints.last(job)) is not None:
        annotations[checkpoints.key] = format_time(at(last))
    return JobSet(
        namespace=NAMESPACE,
        name=job.name,
        uid=jobset_uid(job),
        replicated_jobs=(ReplicatedJob(REPLICATED_JOB, job.slices, _admitted_shape(job, shape)),),
        exclusive_topology=NODEPOOL_LABEL,
        max_restarts=job.cls.max_restarts,
        restarts=job.attempt,
        restarts_count_towards_max=job.restarts_counted,
        suspended=job.state is not JobState.ADMITTED or job.awaiting_capacity,
        pod_priority=job.priority,
        creation_timestamp=at(job.created),
        annotations=annotations,
    )


def _workload(job: Job) -> Workload:
    admitted = job.quota_reserved
    checks_ready = admitted and not job.awaiting_capacity  # a ProvisioningRequest check still Pending: not Admitted
    since = at(job.last_admitted_at if job.last_admitted_at is not None else job.created)
    conditions = [
        Condition("QuotaReserved", ConditionStatus.TRUE if admitted else ConditionStatus.FALSE, "", since),
        Condition("Admitted", ConditionStatus.TRUE if checks_ready else ConditionStatus.FALSE, "", since),
        Condition(
            "PodsReady",
            ConditionStatus.TRUE if job.running else ConditionStatus.FALSE,
            "",
            at(job.run_start if job.run_start is not None else job.not_ready_since or job.created),
        ),
    ]
    if job.state is JobState.HELD:
        conditions.append(Condition("Evicted", ConditionStatus.TRUE, "Deactivated"))
    return Workload(
        namespace=NAMESPACE,
        name=f"jobset-{job.name}",
        uid=workload_uid(job),
        resource_version=str(job.rv),
        owner_jobset_uid=jobset_uid(job),
        owner_jobset_name=job.name,
        active=job.active,
        priority=job.priority,
        priority_class_ref=PriorityClassRef("scheduling.k8s.io", "PriorityClass", job.cls.name),
        cluster_queue=CLUSTER_QUEUE if admitted else None,
        queue_name=LOCAL_QUEUE,
        conditions=tuple(conditions),
        annotations=dict(job.annotations),
        creation_timestamp=at(job.created),
    )


def build_snapshot(
    slices: list[Slice],
    jobs: list[Job],
    departures: list[tuple[SimPod, Slice, int, float]],
    shape: SliceShape,
    machine_type: str,
    checkpoints: CheckpointSignal | None = None,
    queued_room_chips: int = 0,
) -> ClusterSnapshot:
    """One consistent snapshot of the simulated cluster (with `checkpoints`, JobSets publish their last one;
    `queued_room_chips`: the ClusterQueue's unreserved quota on the queued flex-start flavor of a ladder)."""
    nodes = [n for s in slices for n in _nodes(s, shape, machine_type)]
    pods = [_pod(p) for job in jobs for p in job.all_pods() if p.slice is not None or p.phase is SimPhase.PENDING]
    departed = [
        DepartedPod(
            namespace=NAMESPACE,
            jobset_name=p.job.name,
            restart_attempt=p.attempt,
            node_name=node_name(s, host),
            node_pool=s.pool,
            gone_at=at(gone_at),
            priority=p.priority,
            disruption_reason=p.disruption,
            failed=p.failed,
        )
        for p, s, host, gone_at in departures
    ]
    return ClusterSnapshot(
        nodes=tuple(nodes),
        pods=tuple(pods),
        jobsets=tuple(_jobset(j, shape, checkpoints) for j in jobs),
        workloads=tuple(_workload(j) for j in jobs),
        cluster_queues=(ClusterQueue(CLUSTER_QUEUE, cohort_name="tpu", queued_room_chips=queued_room_chips),),
        departed_pods=tuple(departed),
    )


def default_config() -> HotswapConfig:
    return HotswapConfig()
