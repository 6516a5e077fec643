"""Pure builders for the MultiKueue objects of a fleet (kueue.x-k8s.io/v1beta2) and the manager's derived queues."""

from __future__ import annotations

import copy
from typing import Any

from gke_tpu_priority.components.config.fleet import (
    DISPATCHER_NAMES,
    CheckGroup,
    DispatcherMode,
    FleetConfig,
    check_groups,
)
from gke_tpu_priority.components.config.platform import PlatformConfig
from gke_tpu_priority.components.config.queues import ClusterQueueSpec, Quota
from gke_tpu_priority.components.config.resolved import Flavor, effective_cluster_queues
from gke_tpu_priority.components.kueue.manager_config import kueue_manager_config
from gke_tpu_priority.components.queues import objects
from gke_tpu_priority.components.queues.objects import KUEUE_API, MANAGED_BY, cluster_queue

MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"


def kubeconfig_secret_name(worker: str) -> str:
    return f"multikueue-{worker}"


def admission_check(group: CheckGroup) -> dict[str, Any]:
    return objects.admission_check(group.name, MULTIKUEUE_CONTROLLER, "MultiKueueConfig")


def multikueue_config(group: CheckGroup) -> dict[str, Any]:
    # The order is the dispatch preference of the Incremental dispatcher: the order of `workers`.
    return {
        "apiVersion": KUEUE_API,
        "kind": "MultiKueueConfig",
        "metadata": {"name": group.name, "labels": dict(MANAGED_BY)},
        "spec": {"clusters": list(group.workers)},
    }


def multikueue_cluster(worker: str) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE_API,
        "kind": "MultiKueueCluster",
        "metadata": {"name": worker, "labels": dict(MANAGED_BY)},
        "spec": {
            "clusterSource": {"kubeConfig": {"locationType": "Secret", "location": kubeconfig_secret_name(worker)}}
        },
    }


def manager_flavors(config: FleetConfig) -> list[Flavor]:
    """The union of the workers' flavors by name (the first worker's labels); chips are the fleet's sum."""
    out: dict[str, Flavor] = {}
    for worker in config.workers:
        for f in worker.platform.flavors:
            if f.name in out:
                prev = out[f.name]
                out[f.name] = Flavor(f.name, prev.node_labels, prev.chips + f.chips, prev.slices + f.slices, ())
            else:
                out[f.name] = Flavor(f.name, f.node_labels, f.chips, f.slices, ())
    return list(out.values())


def manager_cluster_queues(config: FleetConfig) -> list[ClusterQueueSpec]:
    """Worker 0's ClusterQueues with each flavor's quota the workers' sum (or `managerQuotas`).

    Borrowing and lending limits are per cluster and are left to the workers; the manager's cohorts still share.
    """
    backing = config.worker_quota()
    overrides = {(q.cluster_queue, q.flavor): q.chips for q in config.manager_quotas}
    first = config.workers[0].platform
    flavor_order = [f.name for f in manager_flavors(config)]
    specs: list[ClusterQueueSpec] = []
    for cq in effective_cluster_queues(first.queues, first.flavors):
        flavors = [f for f in flavor_order if (cq.name, f) in backing]
        quotas = [
            Quota(flavor=f, chips=overrides.get((cq.name, f), sum(backing[cq.name, f].values()))) for f in flavors
        ]
        specs.append(cq.model_copy(update={"quotas": quotas}))
    return specs


def manager_cluster_queue(spec: ClusterQueueSpec, groups: list[CheckGroup]) -> dict[str, Any]:
    obj = cluster_queue(spec)
    # Exactly one MultiKueue check, on every flavor: Kueue leaves a ClusterQueue with several, or with one
    # restricted by onFlavors, inactive (pkg/cache/scheduler/clusterqueue.go updateWithAdmissionChecks).
    checks = [{"name": group.name} for group in groups if spec.name in group.cluster_queues]
    obj["spec"]["admissionChecksStrategy"] = {"admissionChecks": checks}
    return obj


def sizing_platform(config: FleetConfig) -> PlatformConfig:
    """Worker 0's platform with the manager's Kueue/JobSet and every worker's pools (controller sizing)."""
    first = config.workers[0].platform
    pools = [g for w in config.workers for g in w.platform.tpu_pools]
    return first.model_copy(update={"kueue": config.manager.kueue, "jobset": config.manager.jobset, "tpu_pools": pools})


def manager_kueue_config(config: FleetConfig) -> dict[str, Any]:
    """The manager's Kueue Configuration: a worker's, plus the multiKueue section (JobSet integration on)."""
    manager = copy.deepcopy(kueue_manager_config(sizing_platform(config)))
    mk = config.multi_kueue
    section: dict[str, Any] = {
        "gcInterval": mk.gc_interval,
        "origin": mk.origin,
        "workerLostTimeout": mk.worker_lost_timeout,
        "dispatcherName": DISPATCHER_NAMES[mk.dispatcher],
    }
    if mk.dispatcher is DispatcherMode.INCREMENTAL and mk.incremental_step_size is not None:
        section["incrementalDispatcherConfig"] = {"stepSize": mk.incremental_step_size}
    manager["multiKueue"] = section
    # No pod runs on the manager: all-or-nothing start and recovery are the workers' Kueue's job.
    manager.pop("waitForPodsReady", None)
    # Only JobSets are dispatched; batch/job stays on so plain Jobs are still queued (and dispatched) too.
    frameworks = manager["integrations"]["frameworks"]
    if "jobset.x-k8s.io/jobset" not in frameworks:
        frameworks.insert(0, "jobset.x-k8s.io/jobset")
    return manager


def fleet_groups(config: FleetConfig) -> list[CheckGroup]:
    return check_groups(config)
