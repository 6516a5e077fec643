"""Pure builders for the Kueue objects of a stack (kueue.x-k8s.io/v1beta2), one function per kind."""

from __future__ import annotations

from typing import Any

from gke_tpu_priority.components import tpu_shapes
from gke_tpu_priority.components.config.queues import ClusterQueueSpec, CohortSpec, LocalQueueSpec
from gke_tpu_priority.components.config.resolved import Flavor
from gke_tpu_priority.components.config.tpu import GKE_QUEUED_KEY
from gke_tpu_priority.policies.rules.tenancy import ALLOWED_TIERS_ANNOTATION, MAY_PROTECT_ANNOTATION

KUEUE_API = "kueue.x-k8s.io/v1beta2"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
MANAGED_BY = {"app.kubernetes.io/managed-by": "gke-tpu-priority"}
TPU_TOLERATION = {"key": tpu_shapes.TPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}
QUEUED_TOLERATION = {"key": GKE_QUEUED_KEY, "operator": "Exists", "effect": "NoSchedule"}
# TPU containers need no privileged mode on GKE >= 1.28, so team namespaces can enforce the baseline standard.
TEAM_NAMESPACE_LABELS = {
    "pod-security.kubernetes.io/enforce": "baseline",
    "pod-security.kubernetes.io/warn": "restricted",
    "pod-security.kubernetes.io/audit": "restricted",
}


def resource_flavor(flavor: Flavor) -> dict[str, Any]:
    tolerations = [dict(TPU_TOLERATION)]
    if flavor.queued:
        # GKE taints queued-provisioning nodes; Kueue adds the flavor's tolerations to the pods it admits there.
        tolerations.append(dict(QUEUED_TOLERATION))
    return {
        "apiVersion": KUEUE_API,
        "kind": "ResourceFlavor",
        "metadata": {"name": flavor.name, "labels": dict(MANAGED_BY)},
        "spec": {
            "nodeLabels": dict(flavor.node_labels),
            # Kueue adds these to admitted pods, so a JobSet needs no TPU toleration of its own to land here.
            "tolerations": tolerations,
        },
    }


def cohort(spec: CohortSpec) -> dict[str, Any]:
    body: dict[str, Any] = {}
    if spec.parent:
        body["parentName"] = spec.parent
    if spec.fair_sharing_weight:
        body["fairSharing"] = {"weight": spec.fair_sharing_weight}
    return {
        "apiVersion": KUEUE_API,
        "kind": "Cohort",
        "metadata": {"name": spec.name, "labels": dict(MANAGED_BY)},
        "spec": body,
    }


def namespace_selector(spec: ClusterQueueSpec) -> dict[str, Any]:
    if spec.namespace_selector is not None:
        return dict(spec.namespace_selector)
    return {"matchExpressions": [{"key": NAMESPACE_NAME_LABEL, "operator": "In", "values": sorted(spec.namespaces)}]}


def _quota(quota: Any) -> dict[str, Any]:
    # Quantities as the canonical strings the API server stores ("32", not 32): the Kubernetes provider compares a
    # custom resource's inputs with what the server returns, so a number would show as a change on every `up`.
    resource: dict[str, Any] = {"name": tpu_shapes.TPU_RESOURCE, "nominalQuota": str(quota.chips)}
    if quota.borrowing_limit is not None:
        resource["borrowingLimit"] = str(quota.borrowing_limit)
    if quota.lending_limit is not None:
        resource["lendingLimit"] = str(quota.lending_limit)
    return {"name": quota.flavor, "resources": [resource]}


def cluster_queue(spec: ClusterQueueSpec, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ClusterQueue; `extra` adds spec fields built elsewhere (the ladder's flavorFungibility, admission checks)."""
    preemption: dict[str, Any] = {
        "withinClusterQueue": spec.preemption.within_cluster_queue.value,
        "reclaimWithinCohort": spec.preemption.reclaim_within_cohort.value,
    }
    borrow = spec.preemption.borrow_within_cohort
    if borrow is not None:
        preemption["borrowWithinCohort"] = {"policy": borrow.policy.value}
        if borrow.max_priority_threshold is not None:
            preemption["borrowWithinCohort"]["maxPriorityThreshold"] = borrow.max_priority_threshold
    body: dict[str, Any] = {
        "namespaceSelector": namespace_selector(spec),
        "queueingStrategy": spec.queueing_strategy.value,
        # Quotas are in chips; CPU and memory are excluded from Kueue's accounting (kueue.excludeResourcePrefixes).
        "resourceGroups": [
            {"coveredResources": [tpu_shapes.TPU_RESOURCE], "flavors": [_quota(q) for q in spec.flavor_quotas]}
        ],
        "preemption": preemption,
    }
    if spec.cohort:
        body["cohortName"] = spec.cohort
    if spec.fair_sharing_weight:
        body["fairSharing"] = {"weight": spec.fair_sharing_weight}
    body.update(extra or {})
    return {
        "apiVersion": KUEUE_API,
        "kind": "ClusterQueue",
        "metadata": {"name": spec.name, "labels": dict(MANAGED_BY)},
        "spec": body,
    }


def admission_check(name: str, controller: str, parameters_kind: str) -> dict[str, Any]:
    """An AdmissionCheck run by `controller`; its parameters are the `parameters_kind` object of the same name."""
    return {
        "apiVersion": KUEUE_API,
        "kind": "AdmissionCheck",
        "metadata": {"name": name, "labels": dict(MANAGED_BY)},
        "spec": {
            "controllerName": controller,
            "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": parameters_kind, "name": name},
        },
    }


def local_queue(
    spec: LocalQueueSpec, allowed_tiers: tuple[str, ...] | None = None, may_protect: bool = True
) -> dict[str, Any]:
    """A LocalQueue; with ``allowed_tiers`` (its namespace's team entitlement) it carries the entitlement as
    annotations, so ``gke-tpu-priority-check`` and the pack read it from the platform's own objects."""
    metadata: dict[str, Any] = {"name": spec.name, "namespace": spec.namespace, "labels": dict(MANAGED_BY)}
    if allowed_tiers is not None:
        metadata["annotations"] = {
            ALLOWED_TIERS_ANNOTATION: ",".join(allowed_tiers),
            MAY_PROTECT_ANNOTATION: "true" if may_protect else "false",
        }
    return {
        "apiVersion": KUEUE_API,
        "kind": "LocalQueue",
        "metadata": metadata,
        "spec": {"clusterQueue": spec.cluster_queue},
    }
