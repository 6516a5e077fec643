"""Raw Kubernetes objects for a small TPU v6e cluster in the fake API server, plus Kueue/JobSet reactions.

The objects have the shapes the real controllers write (GKE node labels and taints, JobSet v1alpha2 with
the exclusive-topology annotation, Kueue v1beta2 Workloads owned by their JobSet). Tests play Kueue, the
JobSet controller and GKE by calling the helpers here between reconcile passes.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from testkit.apiserver import FakeApiServer

JsonObj = dict[str, Any]

NODES = "nodes"
PODS = "pods"
JOBSETS = "jobsets.jobset.x-k8s.io"
WORKLOADS = "workloads.kueue.x-k8s.io"
CLUSTER_QUEUES = "clusterqueues.kueue.x-k8s.io"
HOSTS_PER_SLICE = 4  # v6e 4x4 on ct6e-standard-4t: 16 chips, 4 chips per host
NS = "ml"


def ts(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def ago(**delta: float) -> str:
    return ts(datetime.now(UTC) - timedelta(**delta))


def tpu_node(name: str, pool: str) -> JsonObj:
    return {
        "metadata": {
            "name": name,
            "labels": {
                "cloud.google.com/gke-nodepool": pool,
                "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
                "cloud.google.com/gke-tpu-topology": "4x4",
                "node.kubernetes.io/instance-type": "ct6e-standard-4t",
            },
            "creationTimestamp": ago(hours=2),
        },
        "spec": {"taints": [{"key": "google.com/tpu", "value": "present", "effect": "NoSchedule"}]},
        "status": {
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": ago(hours=2)}],
            "allocatable": {"google.com/tpu": "4"},
        },
    }


def add_slices(api: FakeApiServer, *pools: str) -> None:
    for pool in pools:
        for host in range(HOSTS_PER_SLICE):
            api.put(NODES, tpu_node(f"{pool}-{host}", pool))


def fail_node(api: FakeApiServer, name: str, seconds_ago: float = 60) -> None:
    """GKE/kubelet view of an unreachable host: Ready=Unknown and the unreachable taints."""
    since = ago(seconds=seconds_ago)
    current = api.get(NODES, name)
    assert current is not None
    taints = [
        *current["spec"].get("taints", []),
        {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "timeAdded": since},
        {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"},
    ]
    api.patch(
        NODES,
        name,
        {
            "spec": {"taints": taints},
            "status": {"conditions": [{"type": "Ready", "status": "Unknown", "lastTransitionTime": since}]},
        },
    )


def recover_node(api: FakeApiServer, name: str, minutes_ago: float = 10) -> None:
    api.put(NODES, tpu_node(name, name.rsplit("-", 1)[0]) | {})
    api.patch(
        NODES,
        name,
        {
            "status": {
                "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": ago(minutes=minutes_ago)}]
            }
        },
    )


def jobset(name: str, replicas: int, priority_class: str) -> JsonObj:
    pod_spec = {
        "priorityClassName": priority_class,
        "restartPolicy": "Never",
        "nodeSelector": {
            "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
            "cloud.google.com/gke-tpu-topology": "4x4",
        },
        "containers": [
            {
                "name": "train",
                "image": "trainer:1",
                "resources": {"limits": {"google.com/tpu": "4"}, "requests": {"google.com/tpu": "4"}},
            }
        ],
    }
    return {
        "metadata": {
            "name": name,
            "namespace": NS,
            "labels": {"kueue.x-k8s.io/queue-name": "lq"},
            "annotations": {"alpha.jobset.sigs.k8s.io/exclusive-topology": "cloud.google.com/gke-nodepool"},
            "creationTimestamp": ago(hours=1),
        },
        "spec": {
            "failurePolicy": {"maxRestarts": 10},
            "replicatedJobs": [
                {
                    "name": "workers",
                    "replicas": replicas,
                    "template": {
                        "spec": {
                            "parallelism": HOSTS_PER_SLICE,
                            "completions": HOSTS_PER_SLICE,
                            "template": {"spec": pod_spec},
                        }
                    },
                }
            ],
        },
        "status": {"restarts": 0},
    }


def workload(js: JsonObj, priority: int, cluster_queue: str = "cq") -> JsonObj:
    meta = js["metadata"]
    admitted_at = ago(hours=1)
    return {
        "metadata": {
            "name": f"jobset-{meta['name']}",
            "namespace": meta["namespace"],
            "labels": {"kueue.x-k8s.io/job-uid": meta["uid"]},
            "ownerReferences": [
                {
                    "apiVersion": "jobset.x-k8s.io/v1alpha2",
                    "kind": "JobSet",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                }
            ],
            "creationTimestamp": ago(hours=1),
        },
        "spec": {
            "active": True,
            "queueName": "lq",
            "priority": priority,
            "priorityClassRef": {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": f"p{priority}"},
            "podSets": [{"name": "workers", "count": HOSTS_PER_SLICE}],
        },
        "status": {
            "admission": {"clusterQueue": cluster_queue},
            "conditions": [
                {
                    "type": "QuotaReserved",
                    "status": "True",
                    "reason": "QuotaReserved",
                    "lastTransitionTime": admitted_at,
                },
                {"type": "Admitted", "status": "True", "reason": "Admitted", "lastTransitionTime": admitted_at},
            ],
        },
    }


def pod(js: JsonObj, node: str, index: int, host: int, attempt: int, priority: int) -> JsonObj:
    name = js["metadata"]["name"]
    return {
        "metadata": {
            "name": f"{name}-workers-{index}-{host}-a{attempt}",
            "namespace": NS,
            "labels": {
                "jobset.sigs.k8s.io/jobset-name": name,
                "jobset.sigs.k8s.io/replicatedjob-name": "workers",
                "jobset.sigs.k8s.io/job-index": str(index),
                "jobset.sigs.k8s.io/restart-attempt": str(attempt),
            },
        },
        "spec": {"nodeName": node, "priority": priority, "containers": [{"name": "train", "image": "trainer:1"}]},
        "status": {"phase": "Running"},
    }


def run_jobset(
    api: FakeApiServer, name: str, pools: list[str], priority: int, attempt: int = 0
) -> tuple[JsonObj, JsonObj]:
    """Create (or restart on ``pools``) an admitted JobSet with a Running pod on every host of each slice."""
    existing = api.get(JOBSETS, name, NS)
    js = existing or api.put(JOBSETS, jobset(name, len(pools), f"p{priority}"))
    wl = api.get(WORKLOADS, f"jobset-{name}", NS) or api.put(WORKLOADS, workload(js, priority))
    for index, pool in enumerate(pools):
        for host in range(HOSTS_PER_SLICE):
            api.put(PODS, pod(js, f"{pool}-{host}", index, host, attempt, priority))
    return js, wl


def base_cluster(api: FakeApiServer) -> None:
    """Priority classes, one ClusterQueue in a cohort."""
    for value in (10, 1000):
        api.put(
            "priorityclasses.scheduling.k8s.io",
            {"metadata": {"name": f"p{value}"}, "value": value, "preemptionPolicy": "Never"},
        )
    api.put(
        CLUSTER_QUEUES,
        {
            "metadata": {"name": "cq"},
            "spec": {
                "cohortName": "tpu",
                "resourceGroups": [
                    {
                        "coveredResources": ["google.com/tpu"],
                        "flavors": [{"name": "v6e", "resources": [{"name": "google.com/tpu", "nominalQuota": 128}]}],
                    }
                ],
            },
        },
    )


def evict_pods_on(api: FakeApiServer, jobset_name: str, pool: str) -> None:
    """Taint-manager eviction of a JobSet's pods on a failed slice: Failed with DisruptionTarget."""
    for obj in api.list_objects(PODS):
        labels = obj["metadata"]["labels"]
        if labels.get("jobset.sigs.k8s.io/jobset-name") == jobset_name and obj["spec"]["nodeName"].startswith(
            f"{pool}-"
        ):
            api.patch(
                PODS,
                obj["metadata"]["name"],
                {
                    "status": {
                        "phase": "Failed",
                        "conditions": [
                            {
                                "type": "DisruptionTarget",
                                "status": "True",
                                "reason": "DeletionByTaintManager",
                                "lastTransitionTime": ago(seconds=50),
                            }
                        ],
                    }
                },
                NS,
            )


def delete_pods(api: FakeApiServer, jobset_name: str) -> None:
    for obj in api.list_objects(PODS):
        if obj["metadata"]["labels"].get("jobset.sigs.k8s.io/jobset-name") == jobset_name:
            api.delete(PODS, obj["metadata"]["name"], NS)


def kueue_deactivated(api: FakeApiServer, jobset_name: str) -> None:
    """What Kueue + JobSet do after ``spec.active=false``: evict, suspend, pods gone, quota released."""
    now = ago(seconds=0)
    api.patch(
        WORKLOADS,
        f"jobset-{jobset_name}",
        {
            "status": {
                "admission": None,
                "conditions": [
                    {"type": "QuotaReserved", "status": "False", "reason": "Pending", "lastTransitionTime": now},
                    {"type": "Admitted", "status": "False", "reason": "NoReservation", "lastTransitionTime": now},
                    {"type": "Evicted", "status": "True", "reason": "Deactivated", "lastTransitionTime": now},
                ],
            }
        },
        NS,
    )
    api.patch(JOBSETS, jobset_name, {"spec": {"suspend": True}}, NS)
    delete_pods(api, jobset_name)


def jobset_restarted(api: FakeApiServer, name: str, pools: list[str], priority: int, attempt: int) -> None:
    """The JobSet controller recreated all Jobs (attempt ``attempt``) and every pod became ready."""
    delete_pods(api, name)
    api.patch(
        JOBSETS,
        name,
        {"status": {"restarts": attempt, "conditions": [{"type": "StartupPolicyCompleted", "status": "True"}]}},
        NS,
    )
    run_jobset(api, name, pools, priority, attempt)
    api.patch(
        WORKLOADS,
        f"jobset-{name}",
        {
            "status": {
                "conditions": [
                    {
                        "type": "QuotaReserved",
                        "status": "True",
                        "reason": "QuotaReserved",
                        "lastTransitionTime": ago(hours=1),
                    },
                    {"type": "Admitted", "status": "True", "reason": "Admitted", "lastTransitionTime": ago(hours=1)},
                    {
                        "type": "PodsReady",
                        "status": "True",
                        "reason": "PodsReady",
                        "lastTransitionTime": ago(seconds=0),
                    },
                ]
            }
        },
        NS,
    )
