"""The reconciler's `patch nodes` is narrowed to its own quarantine taint by an admission policy (the
taint keeps restarted JobSets off a failed slice's surviving hosts). Whatever else it would change on a node is
refused; anyone else's node updates are not this policy's business."""

from __future__ import annotations

from typing import Any

import pytest

from gke_tpu_priority.components.config import parse_platform_config
from gke_tpu_priority.components.reconciler.node_guard import POLICY, node_guard_binding, node_guard_policy
from testkit.platform import platform
from testkit.stacks import stack_run
from tests.policies.admission_cel import evaluate
from tests.support.kube_schemas import assert_valid_builtin
from tools.manifests import kubernetes_objects

CONFIG = parse_platform_config(platform())
POLICIES, BINDINGS = [node_guard_policy(CONFIG)], [node_guard_binding(CONFIG)]
RECONCILER = "system:serviceaccount:hotswap-system:hotswap-reconciler"
KEY = "hotswap.gke-tpu-priority.io/unhealthy-slice"
GKE_TAINT = {"key": "google.com/tpu", "value": "present", "effect": "NoSchedule"}
OURS = {"key": KEY, "effect": "NoSchedule"}


def node(*taints: dict[str, str], unschedulable: bool = False, **labels: str) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "gke-tpu-p0-0", "labels": {"cloud.google.com/gke-nodepool": "p0", **labels}},
        "spec": {"taints": list(taints)},
    }
    if unschedulable:
        obj["spec"]["unschedulable"] = True
    return obj


def refused(new: dict[str, Any], old: dict[str, Any], username: str = RECONCILER) -> bool:
    return bool(evaluate(POLICIES, BINDINGS, new, operation="UPDATE", username=username, old=old).failures)


def test_the_reconciler_may_add_and_remove_its_taint() -> None:
    assert not refused(node(GKE_TAINT, OURS), node(GKE_TAINT))
    assert not refused(node(GKE_TAINT), node(GKE_TAINT, OURS))


@pytest.mark.parametrize(
    ("new", "old"),
    [
        pytest.param(node(), node(GKE_TAINT), id="removes-gke-taint"),
        pytest.param(node(GKE_TAINT, {"key": "other", "effect": "NoSchedule"}), node(GKE_TAINT), id="adds-other"),
        pytest.param(node(GKE_TAINT, {"key": KEY, "effect": "NoExecute"}), node(GKE_TAINT), id="own-key-noexecute"),
        pytest.param(node(GKE_TAINT, unschedulable=True), node(GKE_TAINT), id="cordons"),
        pytest.param(node(GKE_TAINT, team="x"), node(GKE_TAINT), id="relabels"),
    ],
)
def test_anything_else_the_reconciler_sends_is_refused(new: dict[str, Any], old: dict[str, Any]) -> None:
    assert refused(new, old)
    # Not the reconciler: not this policy's business (RBAC decides).
    assert not refused(new, old, username="system:node:gke-tpu-p0-0")


def test_the_policy_and_its_binding_are_valid() -> None:
    """Valid for the built-in schemas; that the API server type-checks the policy's CEL without a warning is
    e2e/test_stack_objects.py, which applies it with every stack."""
    policy = node_guard_policy(CONFIG)
    assert_valid_builtin(policy)
    assert_valid_builtin(node_guard_binding(CONFIG))


def test_it_follows_the_setting() -> None:
    names = {o["metadata"]["name"] for o in kubernetes_objects(stack_run("prod").resources) if "Admission" in o["kind"]}
    assert POLICY in names
    off = parse_platform_config(platform(hotswap={"settings": {"quarantineUnhealthySlices": False}}))
    assert "nodes" not in {r for rule in _rules(off) for r in rule["resources"] if "patch" in rule["verbs"]}


def _rules(config: Any) -> list[dict[str, Any]]:
    from gke_tpu_priority.components.reconciler import objects

    return list(objects.cluster_role(config)["rules"])
