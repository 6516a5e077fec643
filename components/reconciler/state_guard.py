"""A ValidatingAdmissionPolicy that lets only the reconciler write its state on Kueue Workloads.

The reconciler keeps its state in annotations on Workloads (who holds a victim, a preemptor's open operation, hold
history) and trusts them on every pass: a forged `held-by` or `op` could cancel another team's rescue or keep a
victim held. Teams get no Workload write (the team role), but anyone who does (Kueue's batch-admin role, a namespace
admin given it) could forge them. So who wrote it decides: an update or create that adds, changes or removes an
annotation of the reconciler's domain is refused unless the reconciler's service account (or Kueue's controller,
which never writes them but owns Workloads) sends it. Everything else about a Workload is left alone.
"""

from __future__ import annotations

from typing import Any

from gke_tpu_priority.components.config import PlatformConfig
from gke_tpu_priority.components.reconciler.objects import APP, LABELS, meta

POLICY = "gke-tpu-priority-hotswap-state"
ANNOTATION_DOMAIN = "hotswap.gke-tpu-priority.io/"
API_VERSION = "admissionregistration.k8s.io/v1"


def reconciler_user(config: PlatformConfig) -> str:
    """The reconciler's service account as the API server names the requester."""
    return f"system:serviceaccount:{config.hotswap.namespace}:{APP}"


def state_guard_policy(config: PlatformConfig) -> dict[str, Any]:
    domain = f"'{ANNOTATION_DOMAIN}'"
    ours = "(has({o}.metadata.annotations) ? {o}.metadata.annotations : {{}})"
    new, old = ours.format(o="object"), ours.format(o="oldObject")
    return {
        "apiVersion": API_VERSION,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": POLICY, "labels": dict(LABELS)},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": ["kueue.x-k8s.io"],
                        "apiVersions": ["v1beta2"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": ["workloads"],
                    }
                ]
            },
            "matchConditions": [
                {
                    # Kueue never writes these annotations, but it rewrites Workloads it owns: a refused write of
                    # its would wedge admission, so it is trusted like the reconciler.
                    "name": "not-from-the-reconciler-or-kueue",
                    "expression": (
                        f"request.userInfo.username != '{reconciler_user(config)}' && "
                        f"!request.userInfo.username.startsWith('system:serviceaccount:{config.kueue.namespace}:')"
                    ),
                }
            ],
            "variables": [
                {"name": "now", "expression": new},
                {"name": "before", "expression": f"request.operation == 'UPDATE' ? {old} : {{}}"},
            ],
            "validations": [
                {
                    "expression": (
                        f"variables.now.all(k, !k.startsWith({domain}) || (k in variables.before && "
                        f"variables.before[k] == variables.now[k])) && variables.before.all(k, !k.startsWith("
                        f"{domain}) || k in variables.now)"
                    ),
                    "message": (
                        f"Only the hotswap reconciler writes {ANNOTATION_DOMAIN}* annotations on Workloads: they are "
                        "its state (held victims, open operations), and a forged one could cancel a rescue or keep "
                        "work held. Set protection on the JobSet instead (where the team may)."
                    ),
                    "messageExpression": (
                        "'Workload ' + request.namespace + '/' + request.name + ': only the hotswap reconciler writes "
                        f"{ANNOTATION_DOMAIN}* annotations on Workloads (its state); set protection on the JobSet "
                        "instead, where the team may.'"
                    ),
                    "reason": "Forbidden",
                }
            ],
        },
    }


def deny_binding(policy: str) -> dict[str, Any]:
    """The binding that makes `policy` refuse what it fails, cluster-wide."""
    return {
        "apiVersion": API_VERSION,
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": meta(policy),
        "spec": {"policyName": policy, "validationActions": ["Deny"]},
    }


def state_guard_binding(config: PlatformConfig) -> dict[str, Any]:
    return deny_binding(POLICY)
