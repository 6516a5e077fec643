"""The simulated cluster as the API server would send it: raw JSON objects of realistic size.

The scaling benchmark feeds these through the reconciler's own ingest path (hotswap/kube/store.py and the
converters of hotswap/kube/snapshot.py), so a measured pass starts where the process starts: from API objects.
Each object carries what real ones carry besides the fields the reconciler reads (managedFields of several
managers, env, volumes, tolerations, kubectl's last-applied copy on JobSets), at sizes measured on GKE objects:
about 9 KB per TPU pod, 10 KB per JobSet, 6 KB per Workload, 5 KB per Node (see `FILLER`).

Converting these back gives the simulator's typed snapshot (tests/sim/test_raw_objects.py), so the benchmark
plans on the very cluster the simulator describes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from gke_tpu_priority.hotswap.annotations import NODEPOOL_LABEL
from gke_tpu_priority.hotswap.kube.snapshot import (
    ACCELERATOR_LABEL,
    INSTANCE_TYPE_LABEL,
    JOB_INDEX_LABEL,
    JOBSET_LABEL,
    REPLICATED_JOB_LABEL,
    RESTART_ATTEMPT_LABEL,
    TOPOLOGY_LABEL,
    TPU_RESOURCE,
)
from gke_tpu_priority.hotswap.model import ClusterQueue, ClusterSnapshot, JobSet, Node, Pod, Workload
from gke_tpu_priority.hotswap.slices import CAPACITY_LABEL

JsonObj = dict[str, Any]

FILLER = {"pod": 6000, "jobset": 4000, "workload": 4500, "node": 3500}
"""Bytes of managedFields-like bulk per object, on top of its real fields (sizes of GKE objects)."""


def _time(moment: datetime | None) -> str | None:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ") if moment is not None else None


def _managed_fields(size: int, managers: tuple[str, ...]) -> list[JsonObj]:
    """managedFields entries totalling about `size` bytes of JSON (the apiserver's bookkeeping)."""
    per = max(1, size // len(managers))
    fields: JsonObj = {f"f:field{i:03d}": {} for i in range(max(1, per // 20))}
    return [
        {
            "manager": manager,
            "operation": "Update",
            "apiVersion": "v1",
            "time": "2026-01-01T00:00:00Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": fields},
        }
        for manager in managers
    ]


def _conditions(conditions: tuple[Any, ...]) -> list[JsonObj]:
    out = []
    for c in conditions:
        item = {"type": c.type, "status": c.status.value, "reason": c.reason, "message": c.message}
        if c.last_transition_time is not None:
            item["lastTransitionTime"] = _time(c.last_transition_time)
        out.append(item)
    return out


def node_object(node: Node) -> JsonObj:
    labels = {"kubernetes.io/hostname": node.name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}
    for key, value in (
        (NODEPOOL_LABEL, node.node_pool),
        (ACCELERATOR_LABEL, node.accelerator),
        (TOPOLOGY_LABEL, node.topology),
        (INSTANCE_TYPE_LABEL, node.machine_type),
        (CAPACITY_LABEL, node.capacity),
    ):
        if value is not None:
            labels[key] = value
    ready: JsonObj = {"type": "Ready", "status": node.ready.value, "reason": "KubeletReady"}
    if node.ready_transition_time is not None:
        ready["lastTransitionTime"] = _time(node.ready_transition_time)
    taints = []
    for t in node.taints:
        taint: JsonObj = {"key": t.key, "effect": t.effect.value}
        if t.value:
            taint["value"] = t.value
        if t.time_added is not None:
            taint["timeAdded"] = _time(t.time_added)
        taints.append(taint)
    allocatable = {"cpu": "179", "memory": "705Gi", "pods": "110"}
    if node.tpu_chips is not None:
        allocatable[TPU_RESOURCE] = str(node.tpu_chips)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": node.name,
            "uid": f"uid-{node.name}",
            "resourceVersion": "1",
            "labels": labels,
            "creationTimestamp": _time(node.creation_timestamp),
            "managedFields": _managed_fields(FILLER["node"], ("kubelet", "gke-node-controller", "kube-controller")),
        },
        "spec": {
            "taints": taints,
            "providerID": f"gce://project/zone/{node.name}",
            "unschedulable": node.unschedulable,
        },
        "status": {
            "conditions": [
                ready,
                {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory"},
            ],
            "allocatable": allocatable,
            "capacity": allocatable,
            "nodeInfo": {"kubeletVersion": "v1.33.5-gke.1000000", "containerRuntimeVersion": "containerd://2.0.6"},
        },
    }


def pod_object(pod: Pod, chips: int = 4) -> JsonObj:
    labels = {
        JOBSET_LABEL: pod.jobset_name,
        REPLICATED_JOB_LABEL: pod.replicated_job_name,
        JOB_INDEX_LABEL: str(pod.job_index),
        RESTART_ATTEMPT_LABEL: str(pod.restart_attempt),
        "batch.kubernetes.io/job-completion-index": "0",
        "jobset.sigs.k8s.io/global-replicas": "1",
    }
    status: JsonObj = {"phase": pod.phase.value, "podIP": "10.0.0.1", "qosClass": "Guaranteed"}
    conditions: list[JsonObj] = [{"type": "PodScheduled", "status": "True"}]
    if pod.disruption_reason is not None:
        conditions.append(
            {
                "type": "DisruptionTarget",
                "status": "True",
                "reason": pod.disruption_reason,
                "lastTransitionTime": _time(pod.disruption_time),
            }
        )
    status["conditions"] = conditions
    spec: JsonObj = {
        "containers": [
            {
                "name": "train",
                "image": "us-docker.pkg.dev/project/train/trainer:2026.01",
                "resources": {"limits": {TPU_RESOURCE: str(chips)}, "requests": {TPU_RESOURCE: str(chips)}},
                "env": [{"name": f"ENV_{i}", "value": f"value-{i}"} for i in range(20)],
                "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
            }
        ],
        "tolerations": [{"key": TPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}],
        "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}],
        "restartPolicy": "Never",
    }
    if pod.node_name is not None:
        spec["nodeName"] = pod.node_name
    if pod.priority is not None:
        spec["priority"] = pod.priority
    meta: JsonObj = {
        "name": pod.name,
        "namespace": pod.namespace,
        "uid": pod.uid,
        "resourceVersion": "1",
        "labels": labels,
        "creationTimestamp": _time(pod.creation_timestamp),
        "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": f"{pod.jobset_name}-job", "uid": "j"}],
        "finalizers": ["batch.kubernetes.io/job-tracking"],
        "managedFields": _managed_fields(FILLER["pod"], ("kube-controller-manager", "kubelet", "kube-scheduler")),
    }
    if pod.deletion_timestamp is not None:
        meta["deletionTimestamp"] = _time(pod.deletion_timestamp)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def jobset_object(js: JobSet, priority_class: str | None = None) -> JsonObj:
    replicated = []
    for rj in js.replicated_jobs:
        pod_spec: JsonObj = {"containers": [{"name": "train", "image": "trainer"}], "restartPolicy": "Never"}
        if rj.shape is not None:
            selector = {ACCELERATOR_LABEL: rj.shape.accelerator, TOPOLOGY_LABEL: rj.shape.topology}
            if rj.shape.capacity is not None:
                selector[CAPACITY_LABEL] = rj.shape.capacity
            pod_spec["nodeSelector"] = selector
            if rj.shape.chips_per_host is not None:
                pod_spec["containers"][0]["resources"] = {"limits": {TPU_RESOURCE: str(rj.shape.chips_per_host)}}
        if priority_class is not None:
            pod_spec["priorityClassName"] = priority_class
        elif js.pod_priority is not None:
            pod_spec["priority"] = js.pod_priority
        replicated.append(
            {"name": rj.name, "replicas": rj.replicas, "template": {"spec": {"template": {"spec": pod_spec}}}}
        )
    spec: JsonObj = {"replicatedJobs": replicated, "suspend": js.suspended}
    if js.max_restarts is not None:
        spec["failurePolicy"] = {"maxRestarts": js.max_restarts, "restartStrategy": "BlockingRecreate"}
    status: JsonObj = {
        "restarts": js.restarts,
        "restartsCountTowardsMax": js.restarts_count_towards_max,
        "conditions": _conditions(js.conditions),
    }
    if js.terminal_state is not None:
        status["terminalState"] = js.terminal_state
    annotations = dict(js.annotations)
    annotations["kubectl.kubernetes.io/last-applied-configuration"] = "x" * FILLER["jobset"]
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {
            "name": js.name,
            "namespace": js.namespace,
            "uid": js.uid,
            "resourceVersion": "1",
            "labels": dict(js.labels),
            "annotations": annotations,
            "creationTimestamp": _time(js.creation_timestamp),
            "managedFields": _managed_fields(FILLER["jobset"] // 2, ("kubectl", "jobset-controller", "kueue")),
        },
        "spec": spec,
        "status": status,
    }


def workload_object(wl: Workload) -> JsonObj:
    spec: JsonObj = {"active": wl.active, "podSets": [{"name": "workers", "count": 4}]}
    if wl.priority is not None:
        spec["priority"] = wl.priority
    if wl.queue_name is not None:
        spec["queueName"] = wl.queue_name
    if wl.priority_class_ref is not None:
        ref = wl.priority_class_ref
        spec["priorityClassRef"] = {"group": ref.group, "kind": ref.kind, "name": ref.name}
    status: JsonObj = {"conditions": _conditions(wl.conditions)}
    if wl.cluster_queue is not None:
        status["admission"] = {"clusterQueue": wl.cluster_queue, "podSetAssignments": [{"name": "workers"}]}
    meta: JsonObj = {
        "name": wl.name,
        "namespace": wl.namespace,
        "uid": wl.uid,
        "resourceVersion": wl.resource_version,
        "annotations": dict(wl.annotations),
        "creationTimestamp": _time(wl.creation_timestamp),
        "managedFields": _managed_fields(FILLER["workload"], ("kueue-admission", "kueue", "hotswap")),
    }
    if wl.owner_jobset_uid is not None:
        meta["ownerReferences"] = [
            {
                "apiVersion": "jobset.x-k8s.io/v1alpha2",
                "kind": "JobSet",
                "name": wl.owner_jobset_name,
                "uid": wl.owner_jobset_uid,
            }
        ]
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": meta,
        "spec": spec,
        "status": status,
    }


def cluster_queue_object(cq: ClusterQueue) -> JsonObj:
    spec: JsonObj = {"resourceGroups": [{"coveredResources": [TPU_RESOURCE], "flavors": [{"name": "v6e"}]}]}
    if cq.cohort_name is not None:
        spec["cohortName"] = cq.cohort_name
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": cq.name}, "spec": spec}


def raw_objects(snapshot: ClusterSnapshot) -> Iterator[tuple[str, JsonObj]]:
    """(kind, raw object) for every object of `snapshot` (departed pods are process memory, not API objects)."""
    for node in snapshot.nodes:
        yield "nodes", node_object(node)
    for pod in snapshot.pods:
        yield "pods", pod_object(pod)
    for js in snapshot.jobsets:
        yield "jobsets", jobset_object(js)
    for wl in snapshot.workloads:
        yield "workloads", workload_object(wl)
    for cq in snapshot.cluster_queues:
        yield "clusterqueues", cluster_queue_object(cq)


def pages(snapshot: ClusterSnapshot, page_size: int = 500) -> Iterator[bytes]:
    """The objects as LIST pages (one JSON line per page: `{"kind": ..., "items": [...]}`), as the API sends them."""
    kind_now, items = "", list[JsonObj]()
    for kind, obj in raw_objects(snapshot):
        if (kind != kind_now or len(items) >= page_size) and items:
            yield json.dumps({"kind": kind_now, "items": items}).encode() + b"\n"
            items = []
        kind_now = kind
        items.append(obj)
    if items:
        yield json.dumps({"kind": kind_now, "items": items}).encode() + b"\n"
