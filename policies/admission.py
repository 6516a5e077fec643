"""Front end 3: the TPU workload rules as ValidatingAdmissionPolicies and bindings (admissionregistration/v1).

Built from every rule that has an in-cluster form (``Rule.admission``), with the stack's declared tiers and
LocalQueues written into the CEL, so a rule added to the rule set reaches the cluster on the next ``pulumi up``.
Pure data: ``components/admission`` declares the objects.

One policy per kind (JobSet, Job, Pod): the API server type-checks every expression against the schema of each
kind a policy matches (``validating/typechecking.go``), so an expression shared by three kinds reads fields some
of them lack. Per kind, every field is read once, from the typed ``object``, into the ``templates`` variable;
the validations read only that record, so the per-template shape key is computed once per request, not once per
validation (all of them share one runtime cost budget).

What the API server sends through it, and what is left alone:

- JobSets, Jobs and Pods on CREATE and UPDATE (a Pod's update is refused only when it gains a route to TPU), and
  Deployments, StatefulSets, ReplicaSets, DaemonSets and CronJobs on CREATE and UPDATE (these and Pods may not
  reach TPU at all), in every namespace but the exempt ones
  (Kubernetes' and GKE's system namespaces, where GKE's own DaemonSets tolerate every taint, and the platform's
  controllers'); status subresources are not matched. A namespace without a LocalQueue is covered too: a TPU
  workload there names no LocalQueue of it and is refused.
- What a controller made is told by who sends the request, never by what the object says: ``ownerReferences``
  are written by whoever creates the object. Requests from the Kueue and JobSet controllers (any service account
  of their namespaces) and from kube-controller-manager (and kube-system's controller service accounts) are
  skipped: a JobSet's Jobs carry neither the queue nor the priority label (their JobSet was checked), a Job's Pods
  are made by the job controller, Kueue rewrites a JobSet's pod templates when it admits it, and the garbage
  collector removes finalizers; refusing those would wedge work that was admitted before the policy.
- Objects being deleted are skipped, so a finalizer can always be removed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .rules import ADMISSION_RULES
from .rules.base import AdmissionContext, ObjectRule, Rule, cel_list, cel_string
from .rules.tpu_workloads import ADMISSION_KINDS, FORBIDDEN_TPU_KINDS, admission_variables, tpu_workload_match_cel

POLICY_NAME = "gke-tpu-priority-tpu-workloads"
"""Prefix of the policies' names: ``<prefix>-jobsets``, ``-jobs``, ``-pods``."""
API_VERSION = "admissionregistration.k8s.io/v1"
Action = Literal["Deny", "Warn", "Audit"]
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"  # set by the API server on every namespace
KUBE_CONTROLLER_MANAGER_USERS = ("system:kube-controller-manager",)
KUBE_SYSTEM_SERVICE_ACCOUNTS = "system:serviceaccount:kube-system:"


@dataclass(frozen=True)
class MatchedKind:
    """What a kind's policy matches: its API group, version and resource, and the operations checked."""

    group: str
    version: str
    resource: str
    operations: tuple[str, ...]


_MATCHED = {
    "JobSet": MatchedKind("jobset.x-k8s.io", "v1alpha2", "jobsets", ("CREATE", "UPDATE")),
    "Job": MatchedKind("batch", "v1", "jobs", ("CREATE", "UPDATE")),
    "Pod": MatchedKind("", "v1", "pods", ("CREATE", "UPDATE")),
    "Deployment": MatchedKind("apps", "v1", "deployments", ("CREATE", "UPDATE")),
    "StatefulSet": MatchedKind("apps", "v1", "statefulsets", ("CREATE", "UPDATE")),
    "ReplicaSet": MatchedKind("apps", "v1", "replicasets", ("CREATE", "UPDATE")),
    "DaemonSet": MatchedKind("apps", "v1", "daemonsets", ("CREATE", "UPDATE")),
    "CronJob": MatchedKind("batch", "v1", "cronjobs", ("CREATE", "UPDATE")),
}
POLICY_KINDS = (*ADMISSION_KINDS, *FORBIDDEN_TPU_KINDS)
"""Every kind with a policy of its own: the TPU workload kinds and the kinds that may not reach TPU."""
# The rule layer decides which policies exist; a kind without an entry fails at import.
MATCHED_KINDS = {kind: _MATCHED[kind] for kind in POLICY_KINDS}
SYSTEM_NAMESPACES = (
    "kube-system",
    "kube-public",
    "kube-node-lease",
    "gmp-system",
    "gmp-public",
    "gke-gmp-system",
    "gke-managed-system",
    "gke-managed-cim",
    "gke-managed-filestorecsi",
    "gke-managed-parallelstorecsi",
    "gke-managed-lustrecsi",
    "gke-managed-dpv2-observability",
)
"""Namespaces of Kubernetes and GKE components, never checked: GKE's DaemonSets there run on every node, TPU
nodes included, and tolerate every taint (the TPU device plugin, the metadata server, logging and metrics agents,
Dataplane V2, the persistent-disk CSI driver)."""


@dataclass(frozen=True)
class AdmissionSettings:
    context: AdmissionContext
    controller_namespaces: tuple[str, ...]
    """Namespaces of the Kueue and JobSet controllers, whose service accounts the policy never refuses."""
    action: Action = "Deny"
    name: str = POLICY_NAME
    exempt_namespaces: tuple[str, ...] = SYSTEM_NAMESPACES
    """Namespaces never checked (besides the controllers'): Kubernetes' and GKE's own."""
    platform_namespaces: tuple[str, ...] = ()
    """The platform's other namespaces (the reconciler's): never checked, they run no team work."""

    @property
    def team_namespaces(self) -> list[str]:
        return sorted(self.context.local_queues)

    @property
    def unchecked_namespaces(self) -> list[str]:
        """Every namespace the bindings leave out; all others are checked, with or without a LocalQueue."""
        return sorted({*self.exempt_namespaces, *self.controller_namespaces, *self.platform_namespaces})

    def policy_name(self, kind: str) -> str:
        return f"{self.name}-{MATCHED_KINDS[kind].resource}"


def match_conditions(settings: AdmissionSettings, kind: str) -> list[dict[str, str]]:
    prefixes = [f"system:serviceaccount:{ns}:" for ns in settings.controller_namespaces]
    prefixes.append(KUBE_SYSTEM_SERVICE_ACCOUNTS)
    controllers = " || ".join(
        [f"request.userInfo.username.startsWith({cel_string(p)})" for p in prefixes]
        + [f"request.userInfo.username in {cel_list(KUBE_CONTROLLER_MANAGER_USERS)}"]
    )
    return [
        {"name": "not-from-a-platform-controller", "expression": f"!({controllers})"},
        {"name": "not-being-deleted", "expression": "!has(object.metadata.deletionTimestamp)"},
        {"name": "tpu-workload", "expression": tpu_workload_match_cel(kind)},
    ]


def _rule_kinds(rule: Rule) -> frozenset[str]:
    """The kinds a rule's validations apply to unless they name their own: whole-picture rules are about the
    TPU workload kinds."""
    return rule.kinds if isinstance(rule, ObjectRule) else frozenset(ADMISSION_KINDS)


def validations(context: AdmissionContext, kind: str, rules: Sequence[Rule] = ADMISSION_RULES) -> list[dict[str, str]]:
    """The ``kind`` policy's validations: every rule's CEL that applies to that kind, tagged with the rule name."""
    out: list[dict[str, str]] = []
    for rule in rules:
        for validation in rule.admission(context) if rule.admission else ():
            if kind not in (validation.kinds or _rule_kinds(rule)):
                continue
            out.append(
                {
                    "expression": validation.expression,
                    "message": f"[{rule.name}] {validation.message}",
                    "messageExpression": f"'[{rule.name}] ' + ({validation.message_expression})",
                    "reason": "Invalid",
                }
            )
    return out


def _labels() -> dict[str, str]:
    return {"app.kubernetes.io/managed-by": "gke-tpu-priority"}


def validating_admission_policy(settings: AdmissionSettings, kind: str) -> dict[str, Any]:
    matched = MATCHED_KINDS[kind]
    return {
        "apiVersion": API_VERSION,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": settings.policy_name(kind), "labels": _labels()},
        "spec": {
            # A policy that cannot be evaluated refuses: the binding's action (Warn/Audit) still softens it.
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [matched.group],
                        "apiVersions": [matched.version],
                        "operations": list(matched.operations),
                        "resources": [matched.resource],
                    }
                ],
            },
            "matchConditions": match_conditions(settings, kind),
            "variables": [{"name": name, "expression": expression} for name, expression in admission_variables(kind)],
            "validations": validations(settings.context, kind),
        },
    }


def validating_admission_policies(settings: AdmissionSettings) -> list[dict[str, Any]]:
    """One policy per checked kind (JobSet, Job, Pod, and the kinds that may not reach TPU)."""
    return [validating_admission_policy(settings, kind) for kind in POLICY_KINDS]


def validating_admission_policy_binding(settings: AdmissionSettings, kind: str) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": settings.policy_name(kind), "labels": _labels()},
        "spec": {
            "policyName": settings.policy_name(kind),
            "validationActions": [settings.action],
            "matchResources": {
                "namespaceSelector": {
                    "matchExpressions": [
                        {"key": NAMESPACE_NAME_LABEL, "operator": "NotIn", "values": settings.unchecked_namespaces}
                    ]
                }
            },
        },
    }


def validating_admission_policy_bindings(settings: AdmissionSettings) -> list[dict[str, Any]]:
    return [validating_admission_policy_binding(settings, kind) for kind in POLICY_KINDS]
