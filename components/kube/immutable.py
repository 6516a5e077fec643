"""Which fields of each kind the package emits cannot change in place, so a change to them is a replacement.

pulumi-kubernetes replaces an object only for the fields in its own table (`provider/pkg/provider/diff.go`), which
has no entry for PriorityClass or for any custom resource: anything else it updates in place (server-side apply),
and the API server refuses an immutable field with "field is immutable", failing `pulumi up` on an ordinary config
change. This table names, for every kind the package emits, the fields the API server, a CRD's CEL rules or an
admission webhook refuse to change, so `replace_on_changes` turns such a change into a replacement. Every object
here has a fixed name (others refer to it by name), so a replacement must delete the old one first.

A kind with no immutable field is listed with an empty tuple: the tests check that every emitted kind is listed
and that the lists match the pinned CRDs and webhooks, so a new kind or a chart upgrade that adds a rule fails a
test instead of an update.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi


@dataclass(frozen=True)
class ImmutableFields:
    paths: tuple[str, ...]
    """Pulumi property paths (as the engine names them) whose change the API server refuses in place."""
    source: str
    """Where the API says so."""
    when_topology: tuple[str, ...] = ()
    """Paths that are immutable only while `spec.topologyName` is set (ResourceFlavor's CEL rules)."""


def type_token(api_version: str, kind: str) -> str:
    """The provider's type token, which names the core group `core/v1`."""
    group_version = api_version if "/" in api_version else f"core/{api_version}"
    return f"kubernetes:{group_version}:{kind}"


IMMUTABLE: dict[str, ImmutableFields] = {
    # --- core API (kubernetes/pkg/apis/*/validation) ---------------------------------------------------------
    type_token("scheduling.k8s.io/v1", "PriorityClass"): ImmutableFields(
        # ValidatePriorityClassUpdate: "may not be changed in an update" for value and preemptionPolicy.
        # `hotswap.mode` flips every tier's preemptionPolicy; a new top tier changes the controllers' value.
        ("value", "preemptionPolicy"),
        "core API: scheduling/validation ValidatePriorityClassUpdate",
    ),
    type_token("v1", "Secret"): ImmutableFields(("type",), "core API: core/validation ValidateSecretUpdate"),
    type_token("v1", "Service"): ImmutableFields(
        ("spec.clusterIP", "spec.clusterIPs"), "core API: core/validation ValidateServiceUpdate"
    ),
    type_token("apps/v1", "Deployment"): ImmutableFields(
        ("spec.selector",), "core API: apps/validation ValidateDeploymentUpdate"
    ),
    type_token("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): ImmutableFields(
        ("roleRef",), "core API: rbac/validation ValidateClusterRoleBindingUpdate"
    ),
    type_token("rbac.authorization.k8s.io/v1", "RoleBinding"): ImmutableFields(
        ("roleRef",), "core API: rbac/validation ValidateRoleBindingUpdate"
    ),
    type_token("v1", "Namespace"): ImmutableFields((), "core API: no immutable spec field"),
    type_token("v1", "ServiceAccount"): ImmutableFields((), "core API: no immutable field"),
    # Immutable only with `immutable: true`, which the package never sets.
    type_token("v1", "ConfigMap"): ImmutableFields((), "core API: only with immutable: true (never set)"),
    type_token("policy/v1", "PodDisruptionBudget"): ImmutableFields((), "core API: mutable since 1.15"),
    type_token("networking.k8s.io/v1", "NetworkPolicy"): ImmutableFields((), "core API: no immutable field"),
    type_token("rbac.authorization.k8s.io/v1", "ClusterRole"): ImmutableFields((), "core API: no immutable field"),
    type_token("rbac.authorization.k8s.io/v1", "Role"): ImmutableFields((), "core API: no immutable field"),
    type_token("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy"): ImmutableFields(
        (), "core API: no immutable field"
    ),
    type_token("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding"): ImmutableFields(
        (), "core API: no immutable field"
    ),
    # --- GKE Managed Service for Prometheus (hotswap.monitoring) -----------------------------------------------
    # Its CRDs are GKE's and not pinned here; their schemas declare no `self == oldSelf` rule known here.
    type_token("monitoring.googleapis.com/v1", "PodMonitoring"): ImmutableFields(
        (), "GKE Managed Prometheus: no immutable field known (CRD not pinned)"
    ),
    type_token("monitoring.googleapis.com/v1", "Rules"): ImmutableFields(
        (), "GKE Managed Prometheus: no immutable field known (CRD not pinned)"
    ),
    # --- Kueue v0.19.2 (CRD CEL rules and pkg/webhooks) ------------------------------------------------------
    type_token("kueue.x-k8s.io/v1beta2", "LocalQueue"): ImmutableFields(
        ("spec.clusterQueue",), "Kueue CRD: spec.clusterQueue `self == oldSelf`"
    ),
    type_token("kueue.x-k8s.io/v1beta2", "AdmissionCheck"): ImmutableFields(
        ("spec.controllerName",), "Kueue CRD: spec.controllerName `self == oldSelf`"
    ),
    type_token("kueue.x-k8s.io/v1beta2", "ClusterQueue"): ImmutableFields(
        ("spec.concurrentAdmissionPolicy",), "Kueue webhook: ValidateClusterQueueUpdate"
    ),
    type_token("kueue.x-k8s.io/v1beta2", "ResourceFlavor"): ImmutableFields(
        (),
        "Kueue CRD: nodeLabels, tolerations and topologyName are immutable while topologyName is set",
        when_topology=("spec.nodeLabels", "spec.tolerations", "spec.topologyName"),
    ),
    type_token("kueue.x-k8s.io/v1beta2", "Cohort"): ImmutableFields((), "Kueue: no immutable field"),
    type_token("kueue.x-k8s.io/v1beta2", "WorkloadPriorityClass"): ImmutableFields((), "Kueue: no immutable field"),
    type_token("kueue.x-k8s.io/v1beta2", "MultiKueueCluster"): ImmutableFields((), "Kueue: no immutable field"),
    type_token("kueue.x-k8s.io/v1beta2", "MultiKueueConfig"): ImmutableFields((), "Kueue: no immutable field"),
    type_token("kueue.x-k8s.io/v1beta2", "ProvisioningRequestConfig"): ImmutableFields((), "Kueue: no immutable field"),
    # --- JobSet v0.12.0 (CRD CEL rules and pkg/webhooks), with Kueue's JobSet webhook ------------------------
    type_token("jobset.x-k8s.io/v1alpha2", "JobSet"): ImmutableFields(
        (
            # JobSet webhook ValidateUpdate: replicatedJobs (beyond what Kueue may set while suspended), managedBy.
            "spec.replicatedJobs",
            "spec.managedBy",
            # JobSet CRD `self == oldSelf` (replicatedJobs[*].dependsOn is under replicatedJobs above).
            "spec.failurePolicy",
            "spec.network",
            "spec.startupPolicy",
            "spec.successPolicy",
            "spec.volumeClaimPolicies",
            # Kueue's JobSet webhook: the queue of a running JobSet (jobframework validateUpdateForQueueName).
            'metadata.labels["kueue.x-k8s.io/queue-name"]',
        ),
        "JobSet webhook ValidateUpdate and CRD `self == oldSelf`; Kueue jobframework ValidateJobOnUpdate",
    ),
}


def immutable_paths(obj: Mapping[str, Any]) -> list[str]:
    """The fields of `obj` whose change needs a replacement. Unknown kinds raise: add them to IMMUTABLE."""
    token = type_token(str(obj["apiVersion"]), str(obj["kind"]))
    if token not in IMMUTABLE:
        raise KeyError(f"{token}: not in components.kube.immutable.IMMUTABLE; list its immutable fields there")
    entry = IMMUTABLE[token]
    spec = obj.get("spec")
    topology = isinstance(spec, Mapping) and spec.get("topologyName") is not None
    return [*entry.paths, *(entry.when_topology if topology else ())]


def replacement_options(obj: Mapping[str, Any]) -> pulumi.ResourceOptions:
    """`replace_on_changes` for the object's immutable fields, deleting first (the names are fixed)."""
    paths = immutable_paths(obj)
    if not paths:
        return pulumi.ResourceOptions()
    return pulumi.ResourceOptions(replace_on_changes=paths, delete_before_replace=True)


# The charts' own objects are pulumi-kubernetes resources the package does not build: their replacements come from
# the provider's table (which covers their core kinds), their CRDs are retained (components/kueue/crds.py), and some
# templates are off with the values the package passes. Every kind the pinned charts' templates can render is here,
# so a chart upgrade that adds one fails a test until it is accounted for.
PROVIDER_TABLE = "pulumi-kubernetes' replacement table"
NOT_RENDERED = "not rendered: the package leaves this chart feature off"
CHART_KINDS: dict[str, str] = {
    "Deployment": f"{PROVIDER_TABLE} (spec.selector)",
    "Service": f"{PROVIDER_TABLE} (spec.clusterIP)",
    "Secret": f"{PROVIDER_TABLE} (type, data)",
    "ConfigMap": f"{PROVIDER_TABLE} (data)",
    "RoleBinding": f"{PROVIDER_TABLE} (roleRef)",
    "ClusterRoleBinding": f"{PROVIDER_TABLE} (roleRef)",
    "ClusterRole": "no immutable field",
    "Role": "no immutable field",
    "ServiceAccount": "no immutable field",
    "PodDisruptionBudget": "no immutable field (policy/v1)",
    "MutatingWebhookConfiguration": "no immutable field",
    "ValidatingWebhookConfiguration": "no immutable field",
    # An APIService's group and version are its name (version.group): changing them is a new object anyway.
    "APIService": "no field that can change without its name",
    "FlowSchema": f"{NOT_RENDERED} (enableVisibilityAPF)",
    "PriorityLevelConfiguration": f"{NOT_RENDERED} (enableVisibilityAPF)",
    "MutatingAdmissionPolicy": f"{NOT_RENDERED} (enableMutatingAdmissionPolicy)",
    "MutatingAdmissionPolicyBinding": f"{NOT_RENDERED} (enableMutatingAdmissionPolicy)",
    "Certificate": f"{NOT_RENDERED} (cert-manager)",
    "Issuer": f"{NOT_RENDERED} (cert-manager)",
    "ServiceMonitor": f"{NOT_RENDERED} (Prometheus operator)",
    "Ingress": f"{NOT_RENDERED} (KueueViz)",
}
