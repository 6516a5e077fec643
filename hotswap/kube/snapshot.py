"""Convert cached raw Kubernetes objects into the planner's typed :class:`ClusterSnapshot`.

Every converter is pure and tolerant (fault F21): a missing or ill-typed field falls back to its model
default, an object that lacks its identity (name, uid, the JobSet label on a pod) is skipped, and any
unexpected shape is logged and skipped; nothing here raises on cluster data.

:class:`SnapshotBuilder` adds the little state the model needs that no single object carries: which node
pool a (possibly deleted) node belonged to, and JobSet pods that recently disappeared (``DepartedPod``,
for infra attribution), both fed by informer listeners.
"""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, TypeVar

from gke_tpu_priority.hotswap.annotations import (
    JOBSET_EXCLUSIVE_TOPOLOGY,
    JOBSET_NODE_SELECTOR_STRATEGY,
    NODEPOOL_LABEL,
    parse_time,
)
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
from gke_tpu_priority.hotswap.slices import CAPACITY_LABEL, QUEUED_TAINT, request_owned_labels

JsonObj = dict[str, Any]
T = TypeVar("T")

log = logging.getLogger(__name__)

ACCELERATOR_LABEL = "cloud.google.com/gke-tpu-accelerator"
TOPOLOGY_LABEL = "cloud.google.com/gke-tpu-topology"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
TPU_RESOURCE = "google.com/tpu"
HOSTNAME_LEVEL = "kubernetes.io/hostname"
KUEUE_JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
JOBSET_LABEL = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
JOB_INDEX_LABEL = "jobset.sigs.k8s.io/job-index"
RESTART_ATTEMPT_LABEL = "jobset.sigs.k8s.io/restart-attempt"


# ---- tolerant field access ---------------------------------------------------------------------------


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _key(value: Any) -> str | None:
    """A name the planner joins on (node, pool, namespace, JobSet): interned, so the many copies decoded from JSON
    become one object and every dict lookup on it compares by identity."""
    return sys.intern(value) if isinstance(value, str) and value else None


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value.strip())
    return None


def _time(value: Any) -> datetime | None:
    return _parsed_time(value) if isinstance(value, str) else None


@functools.lru_cache(maxsize=1 << 16)
def _parsed_time(text: str) -> datetime | None:
    # Times repeat across objects (a slice's hosts are created and go Ready together, a Workload's conditions flip
    # at once): one shared datetime each keeps the cached records small and close together.
    return parse_time(text)


def _shared(value: T) -> T:
    """One object per distinct small value (taints, shapes, conditions): the caches hold tens of thousands of equal
    copies, and records that point at shared objects are smaller and faster to walk (measured: a 4,096-slice pass
    took about a third less CPU). Each kind has its own table, emptied when full: sharing is an optimisation only."""
    table = _SHARED.setdefault(type(value), {})
    if len(table) >= SHARED_MAX:
        table.clear()
    shared: T = table.setdefault(value, value)
    return shared


_SHARED: dict[type, dict[Any, Any]] = {}
SHARED_MAX = 1 << 16


def _str_map(value: Any) -> dict[str, str]:
    return {k: v for k, v in _dict(value).items() if isinstance(k, str) and isinstance(v, str)}


def _meta(obj: JsonObj) -> dict[str, Any]:
    return _dict(obj.get("metadata"))


def conditions_from(value: Any) -> tuple[Condition, ...]:
    result = []
    for item in _list(value):
        item = _dict(item)
        kind, status = _str(item.get("type")), _str(item.get("status"))
        if kind is None or status not in ("True", "False", "Unknown"):
            continue
        result.append(
            _shared(
                Condition(
                    type=kind,
                    status=ConditionStatus(status),
                    reason=_str(item.get("reason")) or "",
                    last_transition_time=_time(item.get("lastTransitionTime")),
                    message=_str(item.get("message")) or "",
                )
            )
        )
    return _shared(tuple(result))


# ---- per-kind converters -----------------------------------------------------------------------------


def node_from(obj: JsonObj) -> Node | None:
    meta = _meta(obj)
    name = _key(meta.get("name"))
    if name is None:
        return None
    labels = _str_map(meta.get("labels"))
    spec, status = _dict(obj.get("spec")), _dict(obj.get("status"))
    ready = next((c for c in conditions_from(status.get("conditions")) if c.type == "Ready"), None)
    taints = []
    for taint in _list(spec.get("taints")):
        taint = _dict(taint)
        key, effect = _str(taint.get("key")), _str(taint.get("effect"))
        if key is None or effect not in {e.value for e in TaintEffect}:
            continue
        taints.append(
            _shared(
                Taint(
                    key=key,
                    effect=TaintEffect(effect),
                    value=_str(taint.get("value")) or "",
                    time_added=_time(taint.get("timeAdded")),
                )
            )
        )
    return Node(
        name=name,
        node_pool=_key(labels.get(NODEPOOL_LABEL)),
        accelerator=_key(labels.get(ACCELERATOR_LABEL)),
        topology=_key(labels.get(TOPOLOGY_LABEL)),
        machine_type=_key(labels.get(INSTANCE_TYPE_LABEL)),
        tpu_chips=_int(_dict(status.get("allocatable")).get(TPU_RESOURCE)),
        capacity=_key(labels.get(CAPACITY_LABEL)),
        # A node that never reported Ready is not known to be ready.
        ready=ready.status if ready is not None else ConditionStatus.UNKNOWN,
        ready_transition_time=ready.last_transition_time if ready is not None else None,
        taints=_shared(tuple(taints)),
        unschedulable=spec.get("unschedulable") is True,
        creation_timestamp=_time(meta.get("creationTimestamp")),
        deletion_timestamp=_time(meta.get("deletionTimestamp")),
        request_owned=request_owned_labels(labels) or any(t.key == QUEUED_TAINT for t in taints),
    )


def _disruption(status: dict[str, Any]) -> Condition | None:
    for condition in conditions_from(status.get("conditions")):
        if condition.type == "DisruptionTarget" and condition.status is ConditionStatus.TRUE:
            return condition
    return None


def uses_tpu(pod_spec: dict[str, Any]) -> bool:
    """The pod asks for TPU chips (a limit or request of `google.com/tpu` in any container or init container)."""
    for group in ("containers", "initContainers"):
        for container in _list(pod_spec.get(group)):
            resources = _dict(_dict(container).get("resources"))
            for amounts in (resources.get("limits"), resources.get("requests")):
                if (_int(_dict(amounts).get(TPU_RESOURCE)) or 0) > 0:
                    return True
    return False


def pod_from(obj: JsonObj, node_pools: Mapping[str, str] | None = None) -> Pod | None:
    """A JobSet pod, or any other pod using TPU chips (a `batch/v1` Job's, a bare pod...) with an empty
    `jobset_name`: it owns no unit but occupies its slice. Other pods (CPU work, DaemonSets) are None."""
    meta = _meta(obj)
    labels = _str_map(meta.get("labels"))
    name, namespace, uid = _str(meta.get("name")), _key(meta.get("namespace")), _str(meta.get("uid"))
    if name is None or namespace is None or uid is None:
        return None
    spec, status = _dict(obj.get("spec")), _dict(obj.get("status"))
    jobset = _key(labels.get(JOBSET_LABEL)) or ""
    if not jobset and not uses_tpu(spec):
        return None
    node_name = _key(spec.get("nodeName"))
    phase = _str(status.get("phase"))
    disruption = _disruption(status)
    return Pod(
        namespace=namespace,
        name=name,
        uid=uid,
        jobset_name=jobset,
        replicated_job_name=labels.get(REPLICATED_JOB_LABEL, ""),
        job_index=_int(labels.get(JOB_INDEX_LABEL)) or 0,
        restart_attempt=_int(labels.get(RESTART_ATTEMPT_LABEL)) or 0,
        node_name=node_name,
        node_pool=(node_pools or {}).get(node_name) if node_name else None,
        phase=PodPhase(phase) if phase in {p.value for p in PodPhase} else PodPhase.PENDING,
        priority=_int(spec.get("priority")),
        deletion_timestamp=_time(meta.get("deletionTimestamp")),
        disruption_reason=disruption.reason or None if disruption else None,
        disruption_time=disruption.last_transition_time if disruption else None,
        creation_timestamp=_time(meta.get("creationTimestamp")),
    )


def _pod_spec(replicated_job: dict[str, Any]) -> dict[str, Any]:
    job_template = _dict(replicated_job.get("template"))
    return _dict(_dict(_dict(job_template.get("spec")).get("template")).get("spec"))


def shape_from_pod_spec(pod_spec: dict[str, Any]) -> SliceShape | None:
    """The TPU slice shape a pod template selects via nodeSelector; None for non-TPU templates."""
    selector = _str_map(pod_spec.get("nodeSelector"))
    accelerator, topology = selector.get(ACCELERATOR_LABEL), selector.get(TOPOLOGY_LABEL)
    if not accelerator or not topology:
        return None
    chips = 0
    for container in _list(pod_spec.get("containers")):
        resources = _dict(_dict(container).get("resources"))
        amount = _int(_dict(resources.get("limits")).get(TPU_RESOURCE))
        if amount is None:
            amount = _int(_dict(resources.get("requests")).get(TPU_RESOURCE))
        chips += amount or 0
    # Kueue writes the admitted flavor's nodeLabels into the template, so a ladder's capacity rung shows here.
    return _shared(
        SliceShape(
            accelerator=accelerator,
            topology=topology,
            chips_per_host=chips or None,
            capacity=selector.get(CAPACITY_LABEL),
        )
    )


def _node_selector_strategy(
    jobset_annotations: Mapping[str, str], template_annotations: Mapping[str, str], exclusive: str | None
) -> bool:
    """JobSet's own rule (v0.12 `constructJob`): a child Job carries its replicatedJob template's annotations,
    plus the JobSet's node-selector annotation when the JobSet sets exclusive placement; with exclusive
    placement and the node-selector annotation both on the Job, placement is static (a nodeSelector on the
    Job's name), so the JobSet can neither be moved nor free a slice another JobSet could use."""
    if exclusive is None:
        return False
    return JOBSET_NODE_SELECTOR_STRATEGY in template_annotations or (
        JOBSET_EXCLUSIVE_TOPOLOGY in jobset_annotations and JOBSET_NODE_SELECTOR_STRATEGY in jobset_annotations
    )


def jobset_from(obj: JsonObj, priority_classes: Mapping[str, int] | None = None) -> JobSet | None:
    meta = _meta(obj)
    name, namespace, uid = _key(meta.get("name")), _key(meta.get("namespace")), _key(meta.get("uid"))
    if name is None or namespace is None or uid is None:
        return None
    spec, status = _dict(obj.get("spec")), _dict(obj.get("status"))
    annotations = _str_map(meta.get("annotations"))
    replicated: list[ReplicatedJob] = []
    exclusive = annotations.get(JOBSET_EXCLUSIVE_TOPOLOGY)
    node_selector = False
    priorities: list[int] = []
    for item in _list(spec.get("replicatedJobs")):
        item = _dict(item)
        rj_name = _str(item.get("name"))
        if rj_name is None:
            continue
        pod_spec = _pod_spec(item)
        replicas = _int(item.get("replicas"))
        replicated.append(
            _shared(
                ReplicatedJob(
                    name=rj_name,
                    replicas=1 if replicas is None else replicas,
                    shape=shape_from_pod_spec(pod_spec),
                )
            )
        )
        template_annotations = _str_map(_dict(_dict(item.get("template")).get("metadata")).get("annotations"))
        job_exclusive = template_annotations.get(JOBSET_EXCLUSIVE_TOPOLOGY) or annotations.get(
            JOBSET_EXCLUSIVE_TOPOLOGY
        )
        exclusive = exclusive or job_exclusive
        node_selector = node_selector or _node_selector_strategy(annotations, template_annotations, job_exclusive)
        class_name = _str(pod_spec.get("priorityClassName"))
        explicit = _int(pod_spec.get("priority"))
        if class_name and priority_classes and class_name in priority_classes:
            priorities.append(priority_classes[class_name])
        elif explicit is not None:
            priorities.append(explicit)
    failure_policy = spec.get("failurePolicy")
    terminal = _str(status.get("terminalState"))
    return JobSet(
        namespace=namespace,
        name=name,
        uid=uid,
        replicated_jobs=_shared(tuple(replicated)),
        exclusive_topology=exclusive,
        node_selector_strategy=node_selector,
        max_restarts=(_int(_dict(failure_policy).get("maxRestarts")) or 0)
        if isinstance(failure_policy, dict)
        else None,
        restarts=_int(status.get("restarts")) or 0,
        restarts_count_towards_max=_int(status.get("restartsCountTowardsMax")) or 0,
        terminal_state=terminal,
        suspended=spec.get("suspend") is True,
        managed_by=_str(spec.get("managedBy")),
        pod_priority=max(priorities) if priorities else None,
        creation_timestamp=_time(meta.get("creationTimestamp")),
        conditions=conditions_from(status.get("conditions")),
        labels=_str_map(meta.get("labels")),
        annotations=annotations,
    )


def workload_from(obj: JsonObj) -> Workload | None:
    meta = _meta(obj)
    name, namespace, uid = _str(meta.get("name")), _key(meta.get("namespace")), _str(meta.get("uid"))
    resource_version = _str(meta.get("resourceVersion"))
    if name is None or namespace is None or uid is None or resource_version is None:
        return None
    spec, status = _dict(obj.get("spec")), _dict(obj.get("status"))
    owner = next(
        (
            _dict(ref)
            for ref in _list(meta.get("ownerReferences"))
            if _dict(ref).get("kind") == "JobSet"
            and str(_dict(ref).get("apiVersion", "")).startswith("jobset.x-k8s.io/")
        ),
        {},
    )
    ref = _dict(spec.get("priorityClassRef"))
    ref_name = _str(ref.get("name"))
    return Workload(
        namespace=namespace,
        name=name,
        uid=uid,
        resource_version=resource_version,
        owner_jobset_uid=_key(_str(owner.get("uid")) or _str_map(meta.get("labels")).get(KUEUE_JOB_UID_LABEL)),
        owner_jobset_name=_key(owner.get("name")),
        active=spec.get("active") is not False,
        priority=_int(spec.get("priority")),
        priority_class_ref=PriorityClassRef(
            group=_str(ref.get("group")) or "", kind=_str(ref.get("kind")) or "", name=ref_name
        )
        if ref_name
        else None,
        cluster_queue=_str(_dict(status.get("admission")).get("clusterQueue")),
        queue_name=_str(spec.get("queueName")),
        conditions=conditions_from(status.get("conditions")),
        annotations=_str_map(meta.get("annotations")),
        creation_timestamp=_time(meta.get("creationTimestamp")),
    )


def cluster_queue_from(
    obj: JsonObj, tas_flavors: frozenset[str] = frozenset(), queued_flavors: frozenset[str] = frozenset()
) -> ClusterQueue | None:
    """``tas_flavors``: ResourceFlavors whose Topology's lowest level is ``kubernetes.io/hostname``;
    ``queued_flavors``: those whose nodes GKE provisions per workload (`queued_flavor_names`)."""
    meta = _meta(obj)
    name = _str(meta.get("name"))
    if name is None:
        return None
    spec = _dict(obj.get("spec"))
    flavors = {
        _str(_dict(flavor).get("name"))
        for group in _list(spec.get("resourceGroups"))
        for flavor in _list(_dict(group).get("flavors"))
    }
    return ClusterQueue(
        name=name,
        cohort_name=_str(spec.get("cohortName")),
        uses_tas=bool(flavors & tas_flavors),
        reclaim_any=_dict(spec.get("preemption")).get("reclaimWithinCohort") == "Any",
        borrowing=any(
            _dict(resource).get("borrowed") not in (None, 0, "0")
            for usage in _list(_dict(obj.get("status")).get("flavorsReservation"))
            for resource in _list(_dict(usage).get("resources"))
        ),
        queued_room_chips=_queued_room(spec, _dict(obj.get("status")), queued_flavors),
    )


TPU_RESOURCE = "google.com/tpu"


def _tpu_count(value: Any) -> int | None:
    """A `google.com/tpu` quantity as chips: TPU quotas and usage are whole numbers (`64` or `"64"`); anything
    else is unknown (None), and an unknown quota offers no room."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


def _queued_room(spec: JsonObj, status: JsonObj, queued_flavors: frozenset[str]) -> int:
    """Nominal `google.com/tpu` quota of the queue's queued-provisioning flavors not reserved
    (`status.flavorsReservation`), summed; 0 when any figure is unreadable."""
    if not queued_flavors:
        return 0
    nominal: dict[str, int] = {}
    for group in _list(spec.get("resourceGroups")):
        for flavor in _list(_dict(group).get("flavors")):
            name = _str(_dict(flavor).get("name"))
            if name not in queued_flavors:
                continue
            for resource in _list(_dict(flavor).get("resources")):
                if _dict(resource).get("name") == TPU_RESOURCE:
                    quota = _tpu_count(_dict(resource).get("nominalQuota"))
                    if quota is None:
                        return 0
                    nominal[name] = quota
    room = 0
    reserved = {
        _str(_dict(usage).get("name")): _dict(resource).get("total")
        for usage in _list(status.get("flavorsReservation"))
        for resource in _list(_dict(usage).get("resources"))
        if _dict(resource).get("name") == TPU_RESOURCE
    }
    for name, quota in nominal.items():
        used = _tpu_count(reserved.get(name, 0))
        if used is None:
            return 0
        room += max(quota - used, 0)
    return room


def queued_flavor_names(flavors: Iterable[JsonObj]) -> frozenset[str]:
    """ResourceFlavors (by name) whose `nodeLabels` select queued-provisioning nodes (`request_owned_labels`)."""
    return frozenset(
        name
        for flavor in flavors
        if (name := _str(_meta(flavor).get("name")))
        and request_owned_labels(_str_map(_dict(flavor.get("spec")).get("nodeLabels")))
    )


def tas_flavor_names(flavors: Iterable[JsonObj], topologies: Iterable[JsonObj]) -> frozenset[str]:
    """ResourceFlavors (by name) whose Topology ends at the hostname level: Kueue TAS handles node failures."""
    hostname_topologies = set()
    for topology in topologies:
        levels = [_str(_dict(level).get("nodeLabel")) for level in _list(_dict(topology.get("spec")).get("levels"))]
        name = _str(_meta(topology).get("name"))
        if name and levels and levels[-1] == HOSTNAME_LEVEL:
            hostname_topologies.add(name)
    return frozenset(
        name
        for flavor in flavors
        if (name := _str(_meta(flavor).get("name")))
        and _str(_dict(flavor.get("spec")).get("topologyName")) in hostname_topologies
    )


def priority_class_values(objs: Iterable[JsonObj]) -> dict[str, int]:
    """``scheduling.k8s.io/v1`` PriorityClass name -> value."""
    values = {}
    for obj in objs:
        name, value = _str(_meta(obj).get("name")), _int(obj.get("value"))
        if name is not None and value is not None:
            values[name] = value
    return values


# ---- builder -----------------------------------------------------------------------------------------


def _convert_all(objs: Iterable[JsonObj], convert: Callable[[JsonObj], T | None], kind: str) -> tuple[T, ...]:
    result = []
    for obj in objs:
        try:
            converted = convert(obj) if isinstance(obj, dict) else None
        except Exception:  # F21: never let one odd object stop the reconciler
            log.exception("cannot convert object, ignoring it", extra={"resource": kind})
            continue
        if converted is None:
            log.debug("ignoring object without identity", extra={"resource": kind})
            continue
        result.append(converted)
    return tuple(result)


@dataclass(frozen=True, slots=True)
class CachedJobSet:
    """A JobSet as cached: converted once, its pod priority resolved against the PriorityClasses known then."""

    jobset: JobSet
    class_names: tuple[str, ...]
    """`priorityClassName`s of the pod templates, to resolve again when the PriorityClasses change."""
    explicit: tuple[int, ...]
    """Explicit `priority` values of templates without a known class."""
    generation: int
    """The builder's PriorityClass generation `jobset.pod_priority` was resolved against."""

    def resolve(self, values: Mapping[str, int], generation: int) -> JobSet:
        if generation == self.generation or not self.class_names:
            return self.jobset
        priorities = [values[c] for c in self.class_names if c in values] or list(self.explicit)
        priority = max(priorities) if priorities else None
        return self.jobset if priority == self.jobset.pod_priority else replace(self.jobset, pod_priority=priority)


def template_priorities(obj: JsonObj) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """The pod templates' `priorityClassName`s and explicit `priority` values."""
    names, explicit = [], []
    for item in _list(_dict(obj.get("spec")).get("replicatedJobs")):
        pod_spec = _pod_spec(_dict(item))
        if class_name := _str(pod_spec.get("priorityClassName")):
            names.append(class_name)
        if (value := _int(pod_spec.get("priority"))) is not None:
            explicit.append(value)
    return tuple(names), tuple(explicit)


# Annotations nobody here reads that can be as large as the object itself (kubectl's client-side apply copy).
DROPPED_ANNOTATIONS = frozenset({"kubectl.kubernetes.io/last-applied-configuration"})


def trimmed(obj: JsonObj) -> JsonObj:
    """A small cluster-scoped object (ClusterQueue, PriorityClass, ResourceFlavor, Topology) without its
    managedFields: these stay raw and are converted each pass, as they are few."""
    meta = _meta(obj)
    if "managedFields" not in meta:
        return obj
    return obj | {"metadata": {k: v for k, v in meta.items() if k != "managedFields"}}


def _without_bulk(annotations: Mapping[str, str]) -> Mapping[str, str]:
    if DROPPED_ANNOTATIONS.isdisjoint(annotations):
        return annotations
    return {k: v for k, v in annotations.items() if k not in DROPPED_ANNOTATIONS}


@dataclass
class SnapshotBuilder:
    """Converts watched objects into snapshots; remembers node pools and recently departed JobSet pods.

    The informers of Nodes, pods, JobSets and Workloads cache the typed values this builder's ``*_value``
    transforms return, so a pass only assembles them (:meth:`assemble`); :meth:`build` converts raw objects
    the same way (tests, tools).
    """

    attribution_window: timedelta
    clock: Callable[[], datetime]
    namespaces: frozenset[str] = frozenset()
    """JobSets outside these namespaces are invisible (empty: all); their pods still occupy slices."""
    node_pools: dict[str, str] = field(default_factory=dict)
    departed: dict[str, DepartedPod] = field(default_factory=dict)
    priority_values: dict[str, int] = field(default_factory=dict)
    priority_generation: int = 0

    # ---- transforms (informer caches) ------------------------------------------------------------------

    def node_value(self, obj: JsonObj) -> Node | None:
        node = node_from(obj)
        if node is not None and node.node_pool:
            self.node_pools[node.name] = node.node_pool  # before the listing ends: pods listed later find it
        return node

    def pod_value(self, obj: JsonObj) -> Pod | None:
        return pod_from(obj, self.node_pools)

    def workload_value(self, obj: JsonObj) -> Workload | None:
        workload = workload_from(obj)
        if workload is None or DROPPED_ANNOTATIONS.isdisjoint(workload.annotations):
            return workload
        return replace(workload, annotations=_without_bulk(workload.annotations))

    def jobset_value(self, obj: JsonObj) -> CachedJobSet | None:
        namespace = _str(_meta(obj).get("namespace"))
        if self.namespaces and namespace not in self.namespaces:
            return None
        jobset = jobset_from(obj, self.priority_values)
        if jobset is None:
            return None
        if not DROPPED_ANNOTATIONS.isdisjoint(jobset.annotations):
            jobset = replace(jobset, annotations=_without_bulk(jobset.annotations))
        names, explicit = template_priorities(obj)
        return CachedJobSet(jobset, names, explicit, self.priority_generation)

    # ---- listeners -----------------------------------------------------------------------------------

    def on_node_event(self, kind: str, value: Node | JsonObj) -> None:
        """Informer listener: keep node -> pool even after the Node is deleted (pods may outlive it)."""
        node = node_from(value) if isinstance(value, dict) else value
        if node is not None and node.node_pool:
            self.node_pools[node.name] = node.node_pool

    def on_pod_event(self, kind: str, value: Pod | JsonObj) -> None:
        """Informer listener: remember deleted JobSet pods for ``attribution_window``."""
        if kind != "DELETED":
            return
        pod = pod_from(value, self.node_pools) if isinstance(value, dict) else value
        if pod is None or not pod.jobset_name:
            return
        self.departed[pod.uid] = DepartedPod(
            namespace=pod.namespace,
            jobset_name=pod.jobset_name,
            restart_attempt=pod.restart_attempt,
            node_name=pod.node_name,
            node_pool=pod.node_pool or (self.node_pools.get(pod.node_name) if pod.node_name else None),
            gone_at=self.clock(),
            priority=pod.priority,
            disruption_reason=pod.disruption_reason,
            failed=pod.phase in (PodPhase.FAILED, PodPhase.UNKNOWN),
        )

    def on_priority_classes(self, objs: Iterable[JsonObj]) -> None:
        """Newly resolved PriorityClass values: JobSets cached before are resolved again when assembled."""
        values = priority_class_values(o for o in objs if isinstance(o, dict))
        if values != self.priority_values:
            self.priority_values = values
            self.priority_generation += 1

    # ---- snapshots -----------------------------------------------------------------------------------

    def build(
        self,
        *,
        nodes: Iterable[JsonObj],
        pods: Iterable[JsonObj],
        jobsets: Iterable[JsonObj],
        workloads: Iterable[JsonObj],
        cluster_queues: Iterable[JsonObj],
        priority_classes: Iterable[JsonObj] = (),
        resource_flavors: Iterable[JsonObj] = (),
        topologies: Iterable[JsonObj] = (),
    ) -> ClusterSnapshot:
        """A snapshot from raw objects, converted as the informers convert them."""
        node_values = _convert_all(nodes, self.node_value, "nodes")
        for node in node_values:
            self.on_node_event("ADDED", node)
        priority_classes = list(priority_classes)
        self.on_priority_classes(priority_classes)
        return self.assemble(
            nodes=node_values,
            pods=_convert_all(pods, self.pod_value, "pods"),
            jobsets=_convert_all(jobsets, self.jobset_value, "jobsets"),
            workloads=_convert_all(workloads, self.workload_value, "workloads"),
            cluster_queues=cluster_queues,
            resource_flavors=resource_flavors,
            topologies=topologies,
        )

    def assemble(
        self,
        *,
        nodes: Iterable[Node],
        pods: Iterable[Pod],
        jobsets: Iterable[CachedJobSet],
        workloads: Iterable[Workload],
        cluster_queues: Iterable[JsonObj],
        resource_flavors: Iterable[JsonObj] = (),
        topologies: Iterable[JsonObj] = (),
    ) -> ClusterSnapshot:
        """A snapshot from cached values: no object is converted again unless what it depends on changed."""
        now = self.clock()
        horizon = now - self.attribution_window
        self.departed = {uid: p for uid, p in self.departed.items() if p.gone_at >= horizon}
        node_tuple = tuple(nodes)
        live = {n.name for n in node_tuple}
        pools = self.node_pools
        # The planner takes a live node's pool from the node; a pod's own `node_pool` matters only once its node is
        # gone. A pod converted before its node was seen learns that pool here; only such pods are copied.
        pod_tuple = tuple(
            p
            if p.node_pool is not None or p.node_name is None or p.node_name in live or p.node_name not in pools
            else replace(p, node_pool=pools[p.node_name])
            for p in pods
        )
        self._bound_node_pools(live, pod_tuple)
        values, generation = self.priority_values, self.priority_generation
        flavors = [o for o in resource_flavors if isinstance(o, dict)]
        tas = tas_flavor_names(flavors, (o for o in topologies if isinstance(o, dict)))
        queued = queued_flavor_names(flavors)
        return ClusterSnapshot(
            nodes=node_tuple,
            pods=pod_tuple,
            jobsets=tuple(entry.resolve(values, generation) for entry in jobsets),
            workloads=tuple(workloads),
            cluster_queues=_convert_all(cluster_queues, lambda o: cluster_queue_from(o, tas, queued), "clusterqueues"),
            departed_pods=tuple(sorted(self.departed.values(), key=lambda p: (p.gone_at, p.namespace))),
        )

    def _bound_node_pools(self, live: set[str], pods: tuple[Pod, ...]) -> None:
        """Forget pools of deleted nodes no pod and no departed pod refers to any more: the map would otherwise
        grow with every node name ever seen (spot, flex-start and autoscaling churn)."""
        pools = self.node_pools
        if len(pools) <= len(live) + NODE_POOL_SLACK:
            return
        keep = live | {p.node_name for p in pods if p.node_name} | {d.node_name for d in self.departed.values()}
        self.node_pools = {name: pool for name, pool in pools.items() if name in keep}


NODE_POOL_SLACK = 1024
"""How many pools of deleted nodes may accumulate before the map is pruned (a pruning walks every pod)."""
