"""A ValidatingAdmissionPolicy that narrows the reconciler's `patch nodes` to its own quarantine taint.

RBAC cannot say which fields of a Node a subject may change: `patch` on nodes would let the reconciler's service
account relabel, cordon or untaint any node, a wide power for a process that only needs to put its
`<domain>/unhealthy-slice:NoSchedule` taint on an Unhealthy slice's hosts and take it off again. So every update
the reconciler sends to a Node must leave everything else as it was: the other taints, labels, annotations and
`spec.unschedulable`; and its own taint may only be NoSchedule (never NoExecute, which would evict pods).
"""

from __future__ import annotations

from typing import Any

from gke_tpu_priority.components.config import PlatformConfig
from gke_tpu_priority.components.reconciler.objects import LABELS, quarantine_enabled
from gke_tpu_priority.components.reconciler.state_guard import API_VERSION, deny_binding, reconciler_user
from gke_tpu_priority.components.workloads.jobset import HOTSWAP_DOMAIN
from gke_tpu_priority.hotswap.annotations import AnnotationKeys

POLICY = "gke-tpu-priority-hotswap-node-scope"


def quarantine_taint_key(config: PlatformConfig) -> str:
    """The package sets the reconciler's annotation domain (`annotationDomain` is not a stack setting)."""
    return AnnotationKeys(HOTSWAP_DOMAIN).quarantine_taint


def _taints_but(obj: str, key: str) -> str:
    return f"(has({obj}.spec.taints) ? {obj}.spec.taints : []).filter(t, t.key != '{key}')"


def _map(obj: str, field: str) -> str:
    return f"(has({obj}.metadata.{field}) ? {obj}.metadata.{field} : {{}})"


def _cordoned(obj: str) -> str:
    return f"(has({obj}.spec.unschedulable) && {obj}.spec.unschedulable)"


def _refusal(expression: str, message: str) -> dict[str, str]:
    return {
        "expression": expression,
        "message": message,
        "messageExpression": f"'Node ' + request.name + ': {message}'",
        "reason": "Forbidden",
    }


def node_guard_policy(config: PlatformConfig) -> dict[str, Any]:
    key = quarantine_taint_key(config)
    user = reconciler_user(config)
    only = f"the hotswap reconciler may change only its own {key} taint"
    return {
        "apiVersion": API_VERSION,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": POLICY, "labels": dict(LABELS)},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["nodes"]}
                ]
            },
            "matchConditions": [
                {"name": "from-the-reconciler", "expression": f"request.userInfo.username == '{user}'"}
            ],
            "validations": [
                _refusal(
                    f"{_taints_but('object', key)} == {_taints_but('oldObject', key)}",
                    f"{only}: its other taints must stay as they are.",
                ),
                _refusal(
                    f"{_map('object', 'labels')} == {_map('oldObject', 'labels')} && "
                    f"{_map('object', 'annotations')} == {_map('oldObject', 'annotations')}",
                    f"{only}: labels and annotations must stay as they are.",
                ),
                _refusal(
                    f"{_cordoned('object')} == {_cordoned('oldObject')}",
                    f"{only}: it must not cordon or uncordon.",
                ),
                _refusal(
                    f"(has(object.spec.taints) ? object.spec.taints : []).all(t, t.key != '{key}' || "
                    "t.effect == 'NoSchedule')",
                    f"{only}, and only with effect NoSchedule (NoExecute would evict running pods).",
                ),
            ],
        },
    }


def node_guard_binding(config: PlatformConfig) -> dict[str, Any]:
    return deny_binding(POLICY)


__all__ = ["POLICY", "node_guard_binding", "node_guard_policy", "quarantine_enabled", "quarantine_taint_key"]
