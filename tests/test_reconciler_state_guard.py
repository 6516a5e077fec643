"""Only the reconciler writes its state on Workloads: a forged hold or operation annotation is
refused by the API server, whoever else sends it, whatever RBAC they have."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gke_tpu_priority.components.config import parse_platform_config
from gke_tpu_priority.components.reconciler.state_guard import POLICY, state_guard_binding, state_guard_policy
from testkit.platform import platform
from testkit.stacks import stack_run
from tests.policies.admission_cel import evaluate
from tests.support.kube_schemas import assert_valid_builtin
from tools.manifests import kubernetes_objects

CONFIG = parse_platform_config(platform())
POLICIES, BINDINGS = [state_guard_policy(CONFIG)], [state_guard_binding(CONFIG)]
RECONCILER = "system:serviceaccount:hotswap-system:hotswap-reconciler"
HELD_BY = "hotswap.gke-tpu-priority.io/held-by"
OP = "hotswap.gke-tpu-priority.io/op"


def workload(**annotations: str) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "jobset-llm-1a2b3", "namespace": "team-a", "annotations": dict(annotations)},
        "spec": {"active": True, "podSets": []},
    }


def refused(obj: dict[str, Any], old: dict[str, Any] | None = None, username: str = "admin@example.com") -> bool:
    outcome = evaluate(POLICIES, BINDINGS, obj, operation="UPDATE" if old else "CREATE", username=username, old=old)
    return bool(outcome.failures)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        pytest.param(workload(), workload(**{HELD_BY: "team-b/high/uid/0"}), id="forge-a-hold"),
        pytest.param(workload(**{OP: "id=x;attempt=0;slices=p;victims=team-a/w"}), workload(), id="drop-an-op"),
        pytest.param(workload(**{HELD_BY: "a/b/c/0"}), workload(**{HELD_BY: "a/b/c/1"}), id="change-a-hold"),
        pytest.param(None, workload(**{OP: "id=x;attempt=0;slices=p;victims=team-a/w"}), id="create-a-decoy-op"),
    ],
)
def test_anyone_but_the_reconciler_is_refused(old: dict[str, Any] | None, new: dict[str, Any]) -> None:
    assert refused(new, old)
    assert refused(new, old, username="system:serviceaccount:team-a:trainer")
    assert not refused(new, old, username=RECONCILER)
    assert not refused(new, old, username="system:serviceaccount:kueue-system:kueue-controller-manager")


def test_other_writes_to_a_workload_pass() -> None:
    held = workload(**{HELD_BY: "a/b/c/0", "kueue.x-k8s.io/other": "x"})
    changed = copy.deepcopy(held)
    changed["spec"]["active"] = False
    changed["metadata"]["annotations"]["kueue.x-k8s.io/other"] = "y"
    assert not refused(changed, held, username="system:serviceaccount:kueue-system:kueue-controller-manager")
    assert not refused(workload())


def test_the_policy_and_its_binding_are_valid() -> None:
    """Valid for the built-in schemas; that the API server type-checks the policy's CEL without a warning is
    e2e/test_stack_objects.py, which applies it with every stack."""
    policy = state_guard_policy(CONFIG)
    assert_valid_builtin(policy)
    assert_valid_builtin(state_guard_binding(CONFIG))


def test_every_stack_with_the_reconciler_deploys_it() -> None:
    names = {o["metadata"]["name"] for o in kubernetes_objects(stack_run("prod").resources) if "Admission" in o["kind"]}
    assert POLICY in names
