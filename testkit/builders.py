"""Kueue-style fluent test builders for the hotswap model: `NodeBuilder("n").pool("p").obj()`.

Each builder mutates itself and returns `self`; `.obj()` returns the immutable model object. `Fleet` wires the
pieces into a consistent `ClusterSnapshot` (nodes per slice, pods per host, Workloads per JobSet).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Self

from gke_tpu_priority.hotswap.annotations import JOBSET_EXCLUSIVE_TOPOLOGY, NODEPOOL_LABEL
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
    ReplicatedJob,
    SliceShape,
    Taint,
    TaintEffect,
    Workload,
)
from gke_tpu_priority.hotswap.slices import NOT_READY_TAINT, UNREACHABLE_TAINT, expected_host_count

T0 = datetime(2026, 9, 1, 12, 0, 0, tzinfo=UTC)
"""Reference 'now' for tests; objects default to being created an hour earlier."""
LONG_AGO = T0 - timedelta(hours=1)
V6E = "tpu-v6e-slice"
MACHINE_4T = "ct6e-standard-4t"
SHAPE_4X4 = SliceShape(V6E, "4x4", 4)
SHAPE_2X4 = SliceShape(V6E, "2x4", 4)
SHAPE_8X8 = SliceShape(V6E, "8x8", 4)

_uids = itertools.count(1)


def new_uid(prefix: str = "uid") -> str:
    return f"{prefix}-{next(_uids):06d}"


class NodeBuilder:
    def __init__(self, name: str) -> None:
        self._node = Node(
            name=name,
            node_pool=None,
            ready=ConditionStatus.TRUE,
            ready_transition_time=LONG_AGO,
            creation_timestamp=LONG_AGO,
            taints=(Taint("google.com/tpu", TaintEffect.NO_SCHEDULE, "present"),),
        )

    def pool(self, pool: str) -> Self:
        self._node = replace(self._node, node_pool=pool)
        return self

    def tpu(self, topology: str = "4x4", machine_type: str = MACHINE_4T, accelerator: str = V6E) -> Self:
        chips = int(machine_type.rsplit("-", 1)[-1].rstrip("t")) if machine_type.endswith("t") else None
        self._node = replace(
            self._node, accelerator=accelerator, topology=topology, machine_type=machine_type, tpu_chips=chips
        )
        return self

    def not_ready(self, since: datetime, status: ConditionStatus = ConditionStatus.FALSE) -> Self:
        self._node = replace(self._node, ready=status, ready_transition_time=since)
        return self

    def unreachable(self, since: datetime) -> Self:
        self.not_ready(since, ConditionStatus.UNKNOWN)
        return self.taint(UNREACHABLE_TAINT, TaintEffect.NO_EXECUTE, since).taint(
            UNREACHABLE_TAINT, TaintEffect.NO_SCHEDULE
        )

    def not_ready_tainted(self, since: datetime) -> Self:
        self.not_ready(since)
        return self.taint(NOT_READY_TAINT, TaintEffect.NO_EXECUTE, since)

    def ready_since(self, since: datetime) -> Self:
        self._node = replace(self._node, ready=ConditionStatus.TRUE, ready_transition_time=since)
        return self

    def created(self, at: datetime) -> Self:
        self._node = replace(self._node, creation_timestamp=at)
        return self

    def taint(self, key: str, effect: TaintEffect, added: datetime | None = None, value: str = "") -> Self:
        self._node = replace(self._node, taints=(*self._node.taints, Taint(key, effect, value, added)))
        return self

    def cordon(self) -> Self:
        self._node = replace(self._node, unschedulable=True)
        return self

    def deleting(self, at: datetime) -> Self:
        self._node = replace(self._node, deletion_timestamp=at)
        return self

    def obj(self) -> Node:
        return self._node


def slice_nodes(
    pool: str, topology: str = "4x4", machine_type: str = MACHINE_4T, hosts: int | None = None
) -> list[NodeBuilder]:
    """Builders for every host of one slice (node names `<pool>-<i>`)."""
    per_host = int(machine_type.rsplit("-", 1)[-1].rstrip("t"))
    count = hosts if hosts is not None else expected_host_count(topology, per_host) or 1
    return [NodeBuilder(f"{pool}-{i}").pool(pool).tpu(topology, machine_type) for i in range(count)]


class PodBuilder:
    def __init__(self, namespace: str, name: str, jobset: str) -> None:
        self._pod = Pod(namespace=namespace, name=name, uid=new_uid("pod"), jobset_name=jobset)

    def job(self, replicated_job: str, index: int) -> Self:
        self._pod = replace(self._pod, replicated_job_name=replicated_job, job_index=index)
        return self

    def attempt(self, attempt: int) -> Self:
        self._pod = replace(self._pod, restart_attempt=attempt)
        return self

    def on(self, node: str, pool: str | None = None) -> Self:
        self._pod = replace(self._pod, node_name=node, node_pool=pool, phase=PodPhase.RUNNING)
        return self

    def phase(self, phase: PodPhase) -> Self:
        self._pod = replace(self._pod, phase=phase)
        return self

    def priority(self, value: int | None) -> Self:
        self._pod = replace(self._pod, priority=value)
        return self

    def terminating(self, since: datetime) -> Self:
        self._pod = replace(self._pod, deletion_timestamp=since)
        return self

    def created(self, at: datetime) -> Self:
        self._pod = replace(self._pod, creation_timestamp=at)
        return self

    def disrupted(self, reason: str, at: datetime) -> Self:
        self._pod = replace(self._pod, disruption_reason=reason, disruption_time=at)
        return self

    def obj(self) -> Pod:
        return self._pod


class JobSetBuilder:
    def __init__(self, namespace: str, name: str) -> None:
        self._js = JobSet(
            namespace=namespace,
            name=name,
            uid=new_uid("js"),
            exclusive_topology=NODEPOOL_LABEL,
            max_restarts=10,
            creation_timestamp=LONG_AGO,
            annotations={JOBSET_EXCLUSIVE_TOPOLOGY: NODEPOOL_LABEL},
        )

    def uid(self, uid: str) -> Self:
        self._js = replace(self._js, uid=uid)
        return self

    def replicated_job(self, name: str, replicas: int, shape: SliceShape | None = SHAPE_4X4) -> Self:
        rjs = (*self._js.replicated_jobs, ReplicatedJob(name, replicas, shape))
        self._js = replace(self._js, replicated_jobs=rjs)
        return self

    def pod_priority(self, value: int | None) -> Self:
        self._js = replace(self._js, pod_priority=value)
        return self

    def restarts(self, value: int) -> Self:
        self._js = replace(self._js, restarts=value)
        return self

    def exclusive(self, topology_key: str) -> Self:
        """Exclusive placement on another topology key (the default is the node pool)."""
        annotations = {**self._js.annotations, JOBSET_EXCLUSIVE_TOPOLOGY: topology_key}
        self._js = replace(self._js, exclusive_topology=topology_key, annotations=annotations)
        return self

    def not_exclusive(self) -> Self:
        self._js = replace(self._js, exclusive_topology=None, annotations={})
        return self

    def node_selector_strategy(self) -> Self:
        self._js = replace(self._js, node_selector_strategy=True)
        return self

    def managed_by(self, controller: str) -> Self:
        self._js = replace(self._js, managed_by=controller)
        return self

    def terminal(self, state: str) -> Self:
        self._js = replace(self._js, terminal_state=state)
        return self

    def suspended(self) -> Self:
        self._js = replace(self._js, suspended=True)
        return self

    def annotation(self, key: str, value: str) -> Self:
        self._js = replace(self._js, annotations={**self._js.annotations, key: value})
        return self

    def obj(self) -> JobSet:
        return self._js


class WorkloadBuilder:
    def __init__(self, namespace: str, name: str) -> None:
        self._wl = Workload(
            namespace=namespace, name=name, uid=new_uid("wl"), resource_version="1", creation_timestamp=LONG_AGO
        )

    @classmethod
    def for_jobset(cls, js: JobSet) -> WorkloadBuilder:
        builder = cls(js.namespace, f"jobset-{js.name}-{js.uid[-5:]}")
        builder._wl = replace(builder._wl, owner_jobset_uid=js.uid, owner_jobset_name=js.name)
        return builder

    @classmethod
    def from_obj(cls, wl: Workload) -> WorkloadBuilder:
        builder = cls(wl.namespace, wl.name)
        builder._wl = wl
        return builder

    def priority(self, value: int | None) -> Self:
        self._wl = replace(self._wl, priority=value)
        return self

    def admitted(self, cluster_queue: str, at: datetime = LONG_AGO) -> Self:
        conditions = (
            Condition("QuotaReserved", ConditionStatus.TRUE, "QuotaReserved", at),
            Condition("Admitted", ConditionStatus.TRUE, "Admitted", at),
        )
        self._wl = replace(self._wl, cluster_queue=cluster_queue, conditions=conditions)
        return self

    def condition(self, kind: str, status: ConditionStatus, reason: str = "", at: datetime = LONG_AGO) -> Self:
        others = tuple(c for c in self._wl.conditions if c.type != kind)
        self._wl = replace(self._wl, conditions=(*others, Condition(kind, status, reason, at)))
        return self

    def active(self, value: bool) -> Self:
        self._wl = replace(self._wl, active=value)
        return self

    def annotation(self, key: str, value: str) -> Self:
        self._wl = replace(self._wl, annotations={**self._wl.annotations, key: value})
        return self

    def obj(self) -> Workload:
        return self._wl


@dataclass
class Fleet:
    """A consistent cluster under construction: slices, JobSets running on them, their Workloads."""

    nodes: dict[str, Node] = field(default_factory=dict)
    pools: dict[str, list[str]] = field(default_factory=dict)
    jobsets: dict[str, JobSet] = field(default_factory=dict)
    workloads: dict[str, Workload] = field(default_factory=dict)
    pods: list[Pod] = field(default_factory=list)
    departed: list[DepartedPod] = field(default_factory=list)
    queues: dict[str, ClusterQueue] = field(default_factory=dict)

    def slices(self, *pools: str, topology: str = "4x4", machine_type: str = MACHINE_4T) -> Self:
        for pool in pools:
            builders = slice_nodes(pool, topology, machine_type)
            self.pools[pool] = [b.obj().name for b in builders]
            for b in builders:
                self.nodes[b.obj().name] = b.obj()
        return self

    def node(self, name: str, update: NodeBuilder) -> Self:
        """Replace a node (build from `NodeBuilder(name)...`)."""
        self.nodes[name] = update.obj()
        return self

    def fail(self, pool: str, since: datetime, how: str = "unreachable", hosts: int = 1) -> Self:
        for name in self.pools[pool][:hosts]:
            builder = NodeBuilder(name).pool(pool)
            old = self.nodes[name]
            builder.tpu(old.topology or "4x4", old.machine_type or MACHINE_4T, old.accelerator or V6E)
            if how == "unreachable":
                builder.unreachable(since)
            elif how == "not-ready":
                builder.not_ready_tainted(since)
            elif how == "cordon":
                builder.cordon()
            elif how == "deleted":
                del self.nodes[name]
                continue
            self.nodes[name] = builder.obj()
        return self

    def queue(self, name: str, cohort: str | None = "cohort", tas: bool = False) -> Self:
        self.queues[name] = ClusterQueue(name, cohort, tas)
        return self

    def run(
        self,
        js: JobSetBuilder,
        on: list[str],
        priority: int,
        cluster_queue: str = "cq",
        workload: WorkloadBuilder | None = None,
        pod_priority: int | None = None,
        admitted_at: datetime = LONG_AGO,
        pod_phase: PodPhase = PodPhase.RUNNING,
    ) -> JobSet:
        """Add a JobSet admitted by Kueue with one Running pod per host on each slice in `on`."""
        jobset = js.obj()
        if jobset.pod_priority is None:
            jobset = replace(jobset, pod_priority=priority if pod_priority is None else pod_priority)
        if not jobset.replicated_jobs:
            jobset = replace(jobset, replicated_jobs=(ReplicatedJob("workers", len(on), SHAPE_4X4),))
        self.jobsets[jobset.uid] = jobset
        if cluster_queue not in self.queues:
            self.queue(cluster_queue)
        wl_builder = workload or WorkloadBuilder.for_jobset(jobset)
        wl = wl_builder.obj()
        if wl.owner_jobset_uid is None:
            wl = replace(wl, owner_jobset_uid=jobset.uid, owner_jobset_name=jobset.name)
        if wl.priority is None:
            wl = replace(wl, priority=priority)
        if not wl.conditions:
            wl = WorkloadBuilder.from_obj(wl).admitted(cluster_queue, admitted_at).obj()
        self.workloads[wl.uid] = wl
        rj = jobset.replicated_jobs[0].name
        for index, pool in enumerate(on):
            for host, node in enumerate(self.pools[pool]):
                self.pods.append(
                    PodBuilder(jobset.namespace, f"{jobset.name}-{rj}-{index}-{host}", jobset.name)
                    .job(rj, index)
                    .attempt(jobset.restarts)
                    .on(node, pool)
                    .phase(pod_phase)
                    .priority(jobset.pod_priority)
                    .obj()
                )
        return jobset

    def wait(self, js: JobSet, since: datetime, pods: int | None = None) -> Self:
        """Unbound leader pods of the JobSet's current attempt created at `since`, one per replica (`pods`)."""
        count = sum(rj.replicas for rj in js.replicated_jobs) if pods is None else pods
        rj = js.replicated_jobs[0].name
        for index in range(count):
            self.pods.append(
                PodBuilder(js.namespace, f"{js.name}-{rj}-{index}-0-a{js.restarts}", js.name)
                .job(rj, index)
                .attempt(js.restarts)
                .priority(js.pod_priority)
                .created(since)
                .obj()
            )
        return self

    def workload_of(self, js: JobSet) -> Workload:
        return next(w for w in self.workloads.values() if w.owner_jobset_uid == js.uid)

    def set_workload(self, wl: Workload) -> Self:
        self.workloads[wl.uid] = wl
        return self

    def evict_pods(self, js: JobSet, pool: str, at: datetime, reason: str = "DeletionByTaintManager") -> Self:
        """Mark the JobSet's pods on `pool` Failed with a DisruptionTarget reason."""
        self.pods = [
            replace(p, phase=PodPhase.FAILED, disruption_reason=reason, disruption_time=at)
            if p.jobset_name == js.name and p.namespace == js.namespace and p.node_pool == pool
            else p
            for p in self.pods
        ]
        return self

    def depart_pods(self, js: JobSet, pool: str, at: datetime, failed: bool = False) -> Self:
        """The JobSet's pods on `pool` vanished (restart deleted them); remember them as departed (`failed`:
        they were Failed when they went)."""
        keep = []
        for p in self.pods:
            if p.jobset_name == js.name and p.namespace == js.namespace and p.node_pool == pool:
                self.departed.append(
                    DepartedPod(
                        p.namespace, p.jobset_name, p.restart_attempt, p.node_name, pool, at, p.priority, failed=failed
                    )
                )
            else:
                keep.append(p)
        self.pods = keep
        return self

    def snapshot(self) -> ClusterSnapshot:
        return ClusterSnapshot(
            nodes=tuple(self.nodes.values()),
            pods=tuple(self.pods),
            jobsets=tuple(self.jobsets.values()),
            workloads=tuple(self.workloads.values()),
            cluster_queues=tuple(self.queues.values()),
            departed_pods=tuple(self.departed),
        )
