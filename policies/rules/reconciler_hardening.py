"""Reconciler hardening: restricted pod security for Deployments and least-privilege (Cluster)Roles."""

from __future__ import annotations

from collections.abc import Iterator

from .base import Config, KubeObject, ObjectRule, as_number, dig, items, mapping, pod_templates

FAMILY = "reconciler hardening"


def check_restricted_pod_security(obj: KubeObject, cfg: Config) -> Iterator[str]:
    for where, template in pod_templates(obj):
        spec = mapping(dig(template, "spec"))
        pod_context = mapping(dig(spec, "securityContext"))
        for container in items(dig(spec, "containers")) + items(dig(spec, "initContainers")):
            context = mapping(dig(container, "securityContext"))
            who = f"{obj.label} {where} container '{dig(container, 'name', default='?')}'"
            if dig(context, "runAsNonRoot", default=dig(pod_context, "runAsNonRoot")) is not True:
                yield f"{who} may run as root; set securityContext.runAsNonRoot: true."
            if as_number(dig(context, "runAsUser", default=dig(pod_context, "runAsUser"))) == 0:
                yield f"{who} sets runAsUser 0; use a non-zero UID."
            if dig(context, "readOnlyRootFilesystem") is not True:
                yield f"{who} has a writable root filesystem; set readOnlyRootFilesystem: true."
            if dig(context, "allowPrivilegeEscalation") is not False:
                yield f"{who} allows privilege escalation; set allowPrivilegeEscalation: false."
            if dig(context, "privileged") is True:
                yield f"{who} is privileged; remove privileged: true."
            if "ALL" not in items(dig(context, "capabilities", "drop")):
                yield f"{who} keeps Linux capabilities; set capabilities.drop: [ALL]."
            seccomp = dig(context, "seccompProfile", "type", default=dig(pod_context, "seccompProfile", "type"))
            if seccomp not in ("RuntimeDefault", "Localhost"):
                yield f"{who} has seccomp profile {seccomp or 'unset'}; set seccompProfile.type: RuntimeDefault."


FORBIDDEN_VERBS = frozenset({"bind", "escalate", "impersonate"})
FORBIDDEN_SUBRESOURCES = frozenset({"pods/exec", "pods/attach", "pods/portforward", "nodes/proxy"})


# The pinned Kueue and JobSet charts label everything they render `helm.sh/chart: <chart>-<version>`. Their
# controllers' own RBAC needs what this rule forbids the platform's roles (their webhook certificate Secrets; Kueue
# and JobSet stop and recreate pods), comes from upstream unchanged and is reviewed with each pin, so it is not
# judged here; the real engine, which renders the charts' children, showed the pack refusing every install.
UPSTREAM_CHARTS = ("kueue-", "jobset-")


def rendered_by_upstream_chart(obj: KubeObject) -> bool:
    chart = mapping(dig(obj.manifest, "metadata", "labels")).get("helm.sh/chart")
    return isinstance(chart, str) and chart.startswith(UPSTREAM_CHARTS)


def check_cluster_role(obj: KubeObject, cfg: Config) -> Iterator[str]:
    if rendered_by_upstream_chart(obj):
        return
    for index, rule in enumerate(items(dig(obj.manifest, "rules"))):
        where = f"{obj.label} rules[{index}]"
        verbs = {str(v) for v in items(dig(rule, "verbs"))}
        resources = {str(r) for r in items(dig(rule, "resources"))}
        groups = {str(g) for g in items(dig(rule, "apiGroups"))}
        if "*" in verbs or "*" in resources or "*" in groups:
            yield f"{where} uses a '*' wildcard; list the exact apiGroups, resources and verbs needed."
        if "secrets" in resources:
            yield f"{where} grants access to secrets; the reconciler must not read secrets, remove it."
        if verbs & FORBIDDEN_VERBS:
            yield f"{where} grants {', '.join(sorted(verbs & FORBIDDEN_VERBS))}; remove these escalation verbs."
        if resources & FORBIDDEN_SUBRESOURCES:
            yield f"{where} grants {', '.join(sorted(resources & FORBIDDEN_SUBRESOURCES))}; remove them."
        if "pods" in resources and "" in groups and verbs & {"delete", "deletecollection"}:
            yield f"{where} lets the holder delete pods; evict through pods/eviction instead."


DEPLOYMENT_POD_SECURITY_RESTRICTED = ObjectRule(
    name="kubernetes-apps-v1-deployment-pod-security-restricted",
    description=(
        "Deployments must run non-root with a read-only root filesystem, no privilege escalation, all "
        "capabilities dropped and the RuntimeDefault seccomp profile."
    ),
    family=FAMILY,
    tags=("kubernetes", "pss"),
    kinds=frozenset({"Deployment"}),
    check=check_restricted_pod_security,
)

CLUSTER_ROLE_LEAST_PRIVILEGE = ObjectRule(
    name="kubernetes-rbac-v1-clusterrole-least-privilege",
    description=(
        "ClusterRoles and Roles must not use wildcards, read secrets, grant bind/escalate/impersonate, "
        "exec into pods or delete pods (the pinned Kueue and JobSet charts' own roles excepted)."
    ),
    family=FAMILY,
    tags=("kubernetes", "rbac"),
    kinds=frozenset({"ClusterRole", "Role"}),
    check=check_cluster_role,
)

RULES = (DEPLOYMENT_POD_SECURITY_RESTRICTED, CLUSTER_ROLE_LEAST_PRIVILEGE)
