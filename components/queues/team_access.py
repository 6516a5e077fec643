"""Pure builders for the team role: exactly the rights a team needs to run TPU work through Kueue, and no more.

One ClusterRole, bound per team namespace by a RoleBinding (so it grants nothing outside those namespaces). It is
what Kueue's `batch-user` role gives for the kinds this platform runs (its JobSet and Job editor roles and its
Workload and LocalQueue viewer roles), plus read access to the pods, their logs and events, which a team needs to
follow its work. Written out rather than bound to the Kueue chart's role by name: that name follows the Helm
release, and the chart's aggregated role grows with every integration Kueue adds.

Deliberately absent: writing Workloads or LocalQueues (a team could forge the reconciler's hold and operation
annotations, or queue where the platform did not declare), Pods, Deployments, StatefulSets, ReplicaSets,
DaemonSets and CronJobs (no TPU route outside Kueue), Roles and RoleBindings, Secrets, and `pods/exec`.
The admission policy still checks every JobSet and Job a team writes, so these rights are not trusted to keep
TPU work within the team's entitlement: they only keep the team off the routes the policy does not cover.
"""

from __future__ import annotations

from typing import Any

from gke_tpu_priority.components.config.tenancy import TeamSpec

TEAM_ROLE = "gke-tpu-priority-team"
RBAC_API = "rbac.authorization.k8s.io/v1"
RBAC_GROUP = "rbac.authorization.k8s.io"
MANAGED_BY = {"app.kubernetes.io/managed-by": "gke-tpu-priority"}
EDIT = ["create", "delete", "get", "list", "patch", "update", "watch"]
READ = ["get", "list", "watch"]


def team_cluster_role() -> dict[str, Any]:
    return {
        "apiVersion": RBAC_API,
        "kind": "ClusterRole",
        "metadata": {"name": TEAM_ROLE, "labels": dict(MANAGED_BY)},
        "rules": [
            {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"], "verbs": EDIT},
            {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": EDIT},
            {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets/status"], "verbs": ["get"]},
            {"apiGroups": ["batch"], "resources": ["jobs/status"], "verbs": ["get"]},
            {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads", "localqueues"], "verbs": READ},
            {
                "apiGroups": ["kueue.x-k8s.io"],
                "resources": ["workloads/status", "localqueues/status"],
                "verbs": ["get"],
            },
            {"apiGroups": [""], "resources": ["pods", "events"], "verbs": READ},
            {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
        ],
    }


def team_role_bindings(team: TeamSpec) -> list[dict[str, Any]]:
    """One RoleBinding per team namespace, binding the team's groups and users to the team role there."""
    subjects = [{"kind": "Group", "apiGroup": RBAC_GROUP, "name": g} for g in team.groups]
    subjects += [{"kind": "User", "apiGroup": RBAC_GROUP, "name": u} for u in team.users]
    if not subjects:
        return []
    return [
        {
            "apiVersion": RBAC_API,
            "kind": "RoleBinding",
            "metadata": {"name": f"{TEAM_ROLE}-{team.name}", "namespace": ns, "labels": dict(MANAGED_BY)},
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": TEAM_ROLE},
            "subjects": subjects,
        }
        for ns in team.namespaces
    ]
