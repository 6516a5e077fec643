"""Front end 3: the TPU workload rules as a ValidatingAdmissionPolicy and its binding (admissionregistration/v1).

Built from every rule that has an in-cluster form (``Rule.admission``), with the stack's declared tiers and
LocalQueues written into the CEL, so a rule added to the rule set reaches the cluster on the next ``pulumi up``.
Pure data: ``components/admission`` declares the two objects.

What the API server sends through it, and what is left alone:

- JobSets and Jobs on CREATE and UPDATE, Pods on CREATE, in the team namespaces (those with a LocalQueue);
  status subresources are not matched.
- Objects a controller made are skipped (a controller ownerReference): a JobSet's Jobs carry neither the queue
  nor the priority label (JobSet v0.12 copies only the replicated job's template metadata onto them), and a Job's
  Pods are created by kube-controller-manager. Their owner was checked when it was submitted.
- Requests from the Kueue and JobSet controllers (any service account of their namespaces) and from
  kube-controller-manager are skipped: Kueue rewrites a JobSet's pod templates when it admits it, and the
  garbage collector removes finalizers; refusing those would wedge work that was admitted before the policy.
- Objects being deleted are skipped, so a finalizer can always be removed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .rules import ADMISSION_RULES
from .rules.base import AdmissionContext, Rule, cel_list, cel_string
from .rules.tpu_workloads import admission_variables, tpu_workload_match_cel

POLICY_NAME = "gke-tpu-priority-tpu-workloads"
API_VERSION = "admissionregistration.k8s.io/v1"
Action = Literal["Deny", "Warn", "Audit"]
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"  # set by the API server on every namespace
KUBE_CONTROLLER_MANAGER_USERS = ("system:kube-controller-manager",)
KUBE_SYSTEM_SERVICE_ACCOUNTS = "system:serviceaccount:kube-system:"


@dataclass(frozen=True)
class AdmissionSettings:
    context: AdmissionContext
    controller_namespaces: tuple[str, ...]
    """Namespaces of the Kueue and JobSet controllers, whose service accounts the policy never refuses."""
    action: Action = "Deny"
    name: str = POLICY_NAME

    @property
    def team_namespaces(self) -> list[str]:
        return sorted(self.context.local_queues)


def match_conditions(settings: AdmissionSettings) -> list[dict[str, str]]:
    prefixes = [f"system:serviceaccount:{ns}:" for ns in settings.controller_namespaces]
    prefixes.append(KUBE_SYSTEM_SERVICE_ACCOUNTS)
    controllers = " || ".join(
        [f"request.userInfo.username.startsWith({cel_string(p)})" for p in prefixes]
        + [f"request.userInfo.username in {cel_list(KUBE_CONTROLLER_MANAGER_USERS)}"]
    )
    return [
        {"name": "not-from-a-platform-controller", "expression": f"!({controllers})"},
        {
            "name": "not-made-by-a-controller",
            "expression": (
                "!has(object.metadata.ownerReferences) || "
                "!object.metadata.ownerReferences.exists(r, has(r.controller) && r.controller)"
            ),
        },
        {"name": "not-being-deleted", "expression": "!has(object.metadata.deletionTimestamp)"},
        {"name": "tpu-workload", "expression": tpu_workload_match_cel()},
    ]


def validations(context: AdmissionContext, rules: Sequence[Rule] = ADMISSION_RULES) -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    for rule in rules:
        for validation in rule.admission(context) if rule.admission else ():
            out.append(
                {
                    "expression": validation.expression,
                    "message": f"[{rule.name}] {validation.message}",
                    "messageExpression": f"'[{rule.name}] ' + ({validation.message_expression})",
                    "reason": "Invalid",
                }
            )
    return out


def validating_admission_policy(settings: AdmissionSettings) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": settings.name, "labels": {"app.kubernetes.io/managed-by": "gke-tpu-priority"}},
        "spec": {
            # A policy that cannot be evaluated refuses: the binding's action (Warn/Audit) still softens it.
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": ["jobset.x-k8s.io"],
                        "apiVersions": ["v1alpha2"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": ["jobsets"],
                    },
                    {
                        "apiGroups": ["batch"],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": ["jobs"],
                    },
                    {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]},
                ],
            },
            "matchConditions": match_conditions(settings),
            "variables": [{"name": name, "expression": expression} for name, expression in admission_variables()],
            "validations": validations(settings.context),
        },
    }


def validating_admission_policy_binding(settings: AdmissionSettings) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": settings.name, "labels": {"app.kubernetes.io/managed-by": "gke-tpu-priority"}},
        "spec": {
            "policyName": settings.name,
            "validationActions": [settings.action],
            "matchResources": {
                "namespaceSelector": {
                    "matchExpressions": [
                        {"key": NAMESPACE_NAME_LABEL, "operator": "In", "values": settings.team_namespaces}
                    ]
                }
            },
        },
    }
