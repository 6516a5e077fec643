"""Reconciler Deployment pod security and ClusterRole least privilege."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from pulumi_policy import EnforcementLevel

from tests.policies.policy_testing import (
    assert_has_violation,
    assert_no_violations,
    assert_policy_metadata,
    resource_args,
    rules,
)
from tests.support import kube_schemas

DEPLOYMENT_TYPE = "kubernetes:apps/v1:Deployment"
CLUSTER_ROLE_TYPE = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole"

DEPLOYMENT: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "hotswap-reconciler", "namespace": "hotswap-system"},
    "spec": {
        "replicas": 2,
        "selector": {"matchLabels": {"app": "hotswap"}},
        "template": {
            "metadata": {"labels": {"app": "hotswap"}},
            "spec": {
                "securityContext": {
                    "runAsNonRoot": True,
                    "runAsUser": 65532,
                    "seccompProfile": {"type": "RuntimeDefault"},
                },
                "containers": [
                    {
                        "name": "reconciler",
                        "image": "us-docker.pkg.dev/p/r/hotswap@sha256:" + "b" * 64,
                        "securityContext": {
                            "readOnlyRootFilesystem": True,
                            "allowPrivilegeEscalation": False,
                            "capabilities": {"drop": ["ALL"]},
                        },
                    }
                ],
            },
        },
    },
}
CLUSTER_ROLE: dict[str, Any] = {
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "ClusterRole",
    "metadata": {"name": "hotswap-reconciler"},
    "rules": [
        {"apiGroups": [""], "resources": ["nodes", "pods"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
        {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"], "verbs": ["get", "list", "watch", "patch"]},
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": ["get", "list", "watch", "patch"]},
    ],
}


def test_fixtures_are_valid_kubernetes() -> None:
    kube_schemas.assert_valid_builtin(DEPLOYMENT)
    kube_schemas.assert_valid_builtin(CLUSTER_ROLE)


def test_metadata() -> None:
    assert_policy_metadata(rules.DEPLOYMENT_POD_SECURITY_RESTRICTED, EnforcementLevel.MANDATORY)
    assert_policy_metadata(rules.CLUSTER_ROLE_LEAST_PRIVILEGE, EnforcementLevel.MANDATORY)


def test_hardened_deployment_passes() -> None:
    assert_no_violations(rules.DEPLOYMENT_POD_SECURITY_RESTRICTED, resource_args(DEPLOYMENT_TYPE, DEPLOYMENT))


@pytest.mark.parametrize(
    ("container_context", "pod_context", "message"),
    [
        ({}, None, "has a writable root filesystem"),
        ({"readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]}}, None, "allows privilege escalation"),
        ({"readOnlyRootFilesystem": True, "allowPrivilegeEscalation": False}, None, "keeps Linux capabilities"),
        (None, {"seccompProfile": {"type": "RuntimeDefault"}}, "may run as root"),
        (None, {"runAsNonRoot": True}, "has seccomp profile unset"),
        (
            None,
            {"runAsNonRoot": True, "runAsUser": 0, "seccompProfile": {"type": "RuntimeDefault"}},
            "sets runAsUser 0",
        ),
    ],
)
def test_insecure_deployments_are_rejected(
    container_context: dict[str, Any] | None, pod_context: dict[str, Any] | None, message: str
) -> None:
    props = copy.deepcopy(DEPLOYMENT)
    spec = props["spec"]["template"]["spec"]
    if container_context is not None:
        spec["containers"][0]["securityContext"] = container_context
    if pod_context is not None:
        spec["securityContext"] = pod_context
    messages = assert_has_violation(
        rules.DEPLOYMENT_POD_SECURITY_RESTRICTED,
        resource_args(DEPLOYMENT_TYPE, props, name="hotswap-reconciler"),
        message,
    )
    assert all(m.startswith("Deployment 'hotswap-reconciler' template container 'reconciler'") for m in messages)


def test_least_privilege_cluster_role_passes() -> None:
    assert_no_violations(rules.CLUSTER_ROLE_LEAST_PRIVILEGE, resource_args(CLUSTER_ROLE_TYPE, CLUSTER_ROLE))


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        ({"apiGroups": ["*"], "resources": ["pods"], "verbs": ["get"]}, "uses a '*' wildcard"),
        ({"apiGroups": [""], "resources": ["*"], "verbs": ["get"]}, "uses a '*' wildcard"),
        ({"apiGroups": [""], "resources": ["pods"], "verbs": ["*"]}, "uses a '*' wildcard"),
        ({"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}, "grants access to secrets"),
        (
            {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"], "verbs": ["bind", "escalate"]},
            "grants bind, escalate",
        ),
        ({"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["impersonate"]}, "grants impersonate"),
        ({"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create"]}, "grants pods/exec"),
        (
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["delete"]},
            "lets the holder delete pods; evict through pods/eviction instead",
        ),
    ],
)
def test_over_privileged_cluster_roles_are_rejected(rule: dict[str, Any], message: str) -> None:
    props = copy.deepcopy(CLUSTER_ROLE)
    props["rules"].append(rule)
    assert_has_violation(
        rules.CLUSTER_ROLE_LEAST_PRIVILEGE,
        resource_args(CLUSTER_ROLE_TYPE, props, name="hotswap-reconciler"),
        f"ClusterRole 'hotswap-reconciler' rules[4] {message}",
    )


def test_the_upstream_charts_own_roles_are_not_judged_but_a_lookalike_without_their_label_is() -> None:
    """Kueue's and JobSet's controllers need Secrets (webhook certificates) and pod deletion; their roles come from
    the pinned charts (label `helm.sh/chart: kueue-0.19.2`), seen only when the real engine renders the charts."""
    props = copy.deepcopy(CLUSTER_ROLE)
    props["rules"].append({"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "update"]})
    props["metadata"] = {"name": "kueue-manager-role", "labels": {"helm.sh/chart": "kueue-0.19.2"}}
    assert_no_violations(rules.CLUSTER_ROLE_LEAST_PRIVILEGE, resource_args(CLUSTER_ROLE_TYPE, props))
    props["metadata"]["labels"] = {"helm.sh/chart": "my-operator-1.0.0"}
    assert_has_violation(
        rules.CLUSTER_ROLE_LEAST_PRIVILEGE, resource_args(CLUSTER_ROLE_TYPE, props), "grants access to secrets"
    )
