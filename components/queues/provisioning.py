"""Kueue objects for queued provisioning (GKE Dynamic Workload Scheduler): the ProvisioningRequestConfig, the
AdmissionCheck that uses it, and the ClusterQueue parts that apply the check and order a capacity ladder.

A workload admitted on a queued-provisioning flavor holds its quota while Kueue's ProvisioningRequest controller
asks GKE for all of its nodes at once (`queued-provisioning.gke.io`); it starts only when the check is Ready.
"""

from __future__ import annotations

from typing import Any

from gke_tpu_priority.components import tpu_shapes
from gke_tpu_priority.components.config.queues import ClusterQueueSpec, QueuedProvisioningSettings
from gke_tpu_priority.components.config.resolved import Flavor
from gke_tpu_priority.components.config.tpu import GKE_PROVISIONING_REQUEST_LABEL
from gke_tpu_priority.components.queues import objects
from gke_tpu_priority.components.queues.objects import KUEUE_API, MANAGED_BY

PROVISIONING_CONTROLLER = "kueue.x-k8s.io/provisioning-request"
QUEUED_PROVISIONING_CLASS = "queued-provisioning.gke.io"
CONFIG_KIND = "ProvisioningRequestConfig"
# GKE reports the resize request behind a ProvisioningRequest in its status detail `ResizeRequestName`; its nodes carry
# that name in GKE_PROVISIONING_REQUEST_LABEL, so pinning the pods to it keeps them on the capacity made for them.
RESIZE_REQUEST_DETAIL = "ResizeRequestName"
MAX_RUN_DURATION_PARAMETER = "maxRunDurationSeconds"


def provisioning_request_config(settings: QueuedProvisioningSettings, max_run_duration: str | None) -> dict[str, Any]:
    """The ProvisioningRequestConfig: GKE's queued-provisioning class, TPU pods only, GKE's node selector update."""
    spec: dict[str, Any] = {
        "provisioningClassName": QUEUED_PROVISIONING_CLASS,
        # Only pod sets that request TPU chips need DWS capacity; a CPU-only pod set schedules on the system pool.
        "managedResources": [tpu_shapes.TPU_RESOURCE],
        "retryStrategy": {
            "backoffLimitCount": settings.backoff_limit_count,
            "backoffBaseSeconds": settings.backoff_base_seconds,
            "backoffMaxSeconds": settings.backoff_max_seconds,
        },
        "podSetUpdates": {
            "nodeSelector": [
                {"key": GKE_PROVISIONING_REQUEST_LABEL, "valueFromProvisioningClassDetail": RESIZE_REQUEST_DETAIL}
            ]
        },
    }
    if max_run_duration is not None:
        spec["parameters"] = {MAX_RUN_DURATION_PARAMETER: max_run_duration.removesuffix("s")}
    return {
        "apiVersion": KUEUE_API,
        "kind": CONFIG_KIND,
        "metadata": {"name": settings.name, "labels": dict(MANAGED_BY)},
        "spec": spec,
    }


def admission_check(settings: QueuedProvisioningSettings) -> dict[str, Any]:
    """The AdmissionCheck run by Kueue's built-in ProvisioningRequest controller, with the config above."""
    return objects.admission_check(settings.name, PROVISIONING_CONTROLLER, CONFIG_KIND)


def admission_checks_strategy(check: str, queued_flavors: list[str]) -> dict[str, Any]:
    """Run the check only for workloads assigned a queued-provisioning flavor; the others start on quota alone."""
    return {"admissionChecks": [{"name": check, "onFlavors": list(queued_flavors)}]}


def ladder_fungibility(spec: ClusterQueueSpec) -> dict[str, Any]:
    """How Kueue walks a ladder's rungs (its flavors, in order) for a workload.

    Without a preference: stop at the first rung where the workload fits, borrowing if need be (`MayStopSearch`),
    and try the next rung rather than preempt on this one (`TryNextFlavor`), so queued flex-start is reached only
    when every cheaper rung is full. With one, Kueue requires both to be `TryNextFlavor`
    (clusterqueue_webhook.go validateFlavorFungibility) and uses it when every rung needs borrowing or preemption.
    """
    if spec.ladder_preference is None:
        return {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"}
    return {
        "whenCanBorrow": "TryNextFlavor",
        "whenCanPreempt": "TryNextFlavor",
        "preference": spec.ladder_preference.value,
    }


def cluster_queue_extras(spec: ClusterQueueSpec, flavors: list[Flavor], check: str) -> dict[str, Any]:
    """The ClusterQueue spec fields this module adds: the admission check on its queued flavors, the ladder's order."""
    queued = {f.name for f in flavors if f.queued}
    extra: dict[str, Any] = {}
    on = [q.flavor for q in spec.flavor_quotas if q.flavor in queued]
    if on:
        extra["admissionChecksStrategy"] = admission_checks_strategy(check, on)
    if spec.ladder is not None:
        extra["flavorFungibility"] = ladder_fungibility(spec)
    return extra
