"""The manager's least-privilege identity in each worker, and the kubeconfig MultiKueue reads it from.

In each worker: a ServiceAccount in the worker's Kueue namespace, a ClusterRole with only the verbs Kueue's
MultiKueue setup (site/.../create-multikueue-kubeconfig.sh, v0.19.2) lists for the JobSet integration plus read
access to the objects an operator follows (events, pods), a binding, and a token Secret named after the credentials
generation. On the manager: the kubeconfig (server, CA, token) as a Pulumi secret in a Secret of Kueue's namespace.
"""

from __future__ import annotations

import json
from typing import Any

from gke_tpu_priority.components.queues.objects import MANAGED_BY

MANAGER_IDENTITY = "multikueue-manager"
READ = ["get", "list", "watch"]
MANAGE = ["create", "delete", "get", "list", "watch"]
# Exactly the rules MultiKueue needs for JobSets (v0.19.2 docs), and read access for events and pods.
WORKER_RULES: list[dict[str, Any]] = [
    {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"], "verbs": MANAGE},
    {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets/status"], "verbs": ["get"]},
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": [*MANAGE, "update", "patch"]},
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads/status"], "verbs": ["get", "patch", "update"]},
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["clusterqueues", "localqueues"], "verbs": READ},
    {"apiGroups": [""], "resources": ["events"], "verbs": READ},
    {"apiGroups": [""], "resources": ["pods"], "verbs": READ},
]


def token_secret_name(generation: int) -> str:
    return f"{MANAGER_IDENTITY}-token-g{generation}"


def service_account(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": MANAGER_IDENTITY, "namespace": namespace, "labels": dict(MANAGED_BY)},
        # The token is mounted nowhere: the identity is used only from the manager, through the kubeconfig.
        "automountServiceAccountToken": False,
    }


def cluster_role() -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": MANAGER_IDENTITY, "labels": dict(MANAGED_BY)},
        "rules": [dict(rule) for rule in WORKER_RULES],
    }


def cluster_role_binding(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": MANAGER_IDENTITY, "labels": dict(MANAGED_BY)},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": MANAGER_IDENTITY},
        "subjects": [{"kind": "ServiceAccount", "name": MANAGER_IDENTITY, "namespace": namespace}],
    }


def token_secret(namespace: str, generation: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/service-account-token",
        "metadata": {
            "name": token_secret_name(generation),
            "namespace": namespace,
            "labels": dict(MANAGED_BY),
            "annotations": {"kubernetes.io/service-account.name": MANAGER_IDENTITY},
        },
    }


def worker_endpoint(worker_kubeconfig: str) -> tuple[str, str | None]:
    """Server and CA of the worker, from the kubeconfig its platform renders for Pulumi."""
    doc = json.loads(worker_kubeconfig)
    cluster = doc["clusters"][0]["cluster"]
    return str(cluster["server"]), cluster.get("certificate-authority-data")


def token_kubeconfig(worker: str, server: str, ca: str | None, token: str) -> str:
    """A kubeconfig with a bearer token only: MultiKueue refuses exec plugins and files in kubeconfigs."""
    cluster: dict[str, Any] = {"server": server}
    if ca:
        cluster["certificate-authority-data"] = ca
    user = f"{worker}-{MANAGER_IDENTITY}"
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": worker, "cluster": cluster}],
            "contexts": [{"name": worker, "context": {"cluster": worker, "user": user}}],
            "current-context": worker,
            "users": [{"name": user, "user": {"token": token}}],
        },
        indent=2,
    )
