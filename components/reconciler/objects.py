"""Pure builders for the reconciler's Kubernetes objects: least privilege, restricted pod security."""

from __future__ import annotations

from typing import Any

import yaml

from gke_tpu_priority.components.cluster.node_pools import system_node_selector
from gke_tpu_priority.components.config import PlatformConfig
from gke_tpu_priority.components.config.tenancy import namespace_max_priority, protecting_namespaces
from gke_tpu_priority.components.config.tpu import CapacityMode
from gke_tpu_priority.components.priorities import controller_priority_class
from gke_tpu_priority.components.reconciler.sizing import reconciler_resources
from gke_tpu_priority.hotswap.config import HotswapConfig

APP = "hotswap-reconciler"
LABELS = {"app.kubernetes.io/name": APP, "app.kubernetes.io/managed-by": "gke-tpu-priority"}
SELECTOR = {"app.kubernetes.io/name": APP}
METRICS_PORT = 8080
HEALTH_PORT = 8081
RUN_AS = 65532  # the image's non-root user
CONFIG_PATH = "/etc/hotswap/config.yaml"
RECONCILER_PRIORITY_CLASS = "hotswap-reconciler"
SELF_READER = f"{APP}-self"
TERMINATION_GRACE_SECONDS = 90
DELETION_POLICY_ANNOTATION = "pulumi.com/deletionPropagationPolicy"


def meta(name: str, namespace: str | None = None, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "labels": dict(LABELS)}
    if namespace is not None:
        out["namespace"] = namespace
    out.update(extra)
    return out


def reconciler_config(config: PlatformConfig) -> dict[str, Any]:
    """The reconciler's own configuration file, validated with its own model (so a bad stack fails at preview)."""
    hs = config.hotswap
    data: dict[str, Any] = {
        **hs.settings,
        "mode": hs.mode.value,
        "dryRun": hs.dry_run,
        "annotationDomain": "hotswap.gke-tpu-priority.io",
        "leaderElection": {"enabled": True, "leaseName": APP, "leaseNamespace": hs.namespace},
        "metricsPort": METRICS_PORT,
        "healthPort": HEALTH_PORT,
    }
    preempting = [t.value for t in config.priorities if t.preempts]
    if preempting:
        # Tiers below the highest wait `lowerTierEvictionDelay` before taking costly victims.
        data["topTierPriority"] = max(preempting)
    if preempting and any(not t.preempts for t in config.priorities):
        # Tiers declared `preempts: false` sit below every tier that may (validated), so one floor says it all.
        data["preemptorMinPriority"] = min(preempting)
    if config.teams:
        # Defence in depth behind the admission policy: the reconciler enforces the same entitlements.
        data["maxPreemptorPriority"] = namespace_max_priority(config.teams, config.priorities)
        data["protectNamespaces"] = list(protecting_namespaces(config.teams))
    HotswapConfig.model_validate(data)
    return data


def fast_fail_enabled(config: PlatformConfig) -> bool:
    fast_fail = config.hotswap.settings.get("fastFail") or {}
    return bool(fast_fail.get("enabled", False))


def quarantine_enabled(config: PlatformConfig) -> bool:
    """The reconciler's `quarantineUnhealthySlices` setting (on unless turned off)."""
    return bool(config.hotswap.settings.get("quarantineUnhealthySlices", True))


def rung_switch_enabled(config: PlatformConfig) -> bool:
    """The reconciler's `spotRungSwitch` (on unless turned off) on a platform with both rungs it moves between: spot
    pools and queued-provisioning pools. Elsewhere the switch never happens, so its permissions are not granted."""
    wanted = bool(config.hotswap.settings.get("spotRungSwitch", True))
    spot = any(g.capacity.mode is CapacityMode.SPOT for g in config.tpu_pools)
    return wanted and spot and config.queued_provisioning


def namespace(config: PlatformConfig) -> dict[str, Any]:
    labels = {
        **LABELS,
        "pod-security.kubernetes.io/enforce": "restricted",
        "pod-security.kubernetes.io/enforce-version": "latest",
        "pod-security.kubernetes.io/warn": "restricted",
        "pod-security.kubernetes.io/audit": "restricted",
    }
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": config.hotswap.namespace, "labels": labels}}


def service_account(config: PlatformConfig) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": meta(APP, config.hotswap.namespace),
        # Only the reconciler's pod mounts a token (pod-level opt-in); nothing else using this SA gets one.
        "automountServiceAccountToken": False,
    }


def cluster_role(config: PlatformConfig) -> dict[str, Any]:
    rules: list[dict[str, Any]] = [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"], "verbs": ["get", "list", "watch"]},
        {
            "apiGroups": ["kueue.x-k8s.io"],
            "resources": ["clusterqueues", "resourceflavors", "topologies"],
            "verbs": ["get", "list", "watch"],
        },
        # Pod priority of a JobSet comes from its PriorityClass.
        {"apiGroups": ["scheduling.k8s.io"], "resources": ["priorityclasses"], "verbs": ["get", "list", "watch"]},
        # What it writes always: spec.active and hold annotations on Workloads (merge patches conditional on
        # resourceVersion). No status, no update; deletes only for the rung switch below.
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": ["get", "list", "watch", "patch"]},
        {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create"]},
    ]
    if quarantine_enabled(config):
        # The quarantine taint on an Unhealthy slice's hosts (hotswap/planner/quarantine.py): merge patches of
        # spec.taints conditional on resourceVersion, changing only its own taint.
        rules.append({"apiGroups": [""], "resources": ["nodes"], "verbs": ["patch"]})
    if rung_switch_enabled(config):
        # The rung switch (hotswap/planner/rungs.py): a JSON patch adding one nodeSelector key to a suspended
        # JobSet's TPU pod templates (conditional on its uid and spec.suspend), then the deletion of its held
        # Workload (conditional on uid and resourceVersion), which Kueue recreates from the pinned template.
        rules.append({"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"], "verbs": ["patch"]})
        rules.append({"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": ["delete"]})
    if fast_fail_enabled(config):
        # Opt-in fast-fail of a preemptor's pods stuck on unreachable nodes (opt-in: `fastFail.enabled`).
        rules.append({"apiGroups": [""], "resources": ["pods"], "verbs": ["delete"]})
        rules.append({"apiGroups": [""], "resources": ["pods/status"], "verbs": ["patch"]})
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": meta(APP),
        "rules": rules,
    }


def cluster_role_binding(config: PlatformConfig) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": meta(APP),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": APP},
        "subjects": [{"kind": "ServiceAccount", "name": APP, "namespace": config.hotswap.namespace}],
    }


def lease_role(config: PlatformConfig) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": meta(f"{APP}-leader-election", config.hotswap.namespace),
        "rules": [
            # `create` cannot be limited by name; get/update only touch the reconciler's own Lease.
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
            {
                "apiGroups": ["coordination.k8s.io"],
                "resources": ["leases"],
                "resourceNames": [APP],
                "verbs": ["get", "update"],
            },
        ],
    }


def lease_role_binding(config: PlatformConfig) -> dict[str, Any]:
    name = f"{APP}-leader-election"
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": meta(name, config.hotswap.namespace),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": APP, "namespace": config.hotswap.namespace}],
    }


def self_reader_role(config: PlatformConfig) -> dict[str, Any]:
    """Read its own Deployment, and nothing else: on SIGTERM that tells a removal from a restart."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": meta(SELF_READER, config.hotswap.namespace),
        "rules": [{"apiGroups": ["apps"], "resources": ["deployments"], "resourceNames": [APP], "verbs": ["get"]}],
    }


def self_reader_role_binding(config: PlatformConfig) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": meta(SELF_READER, config.hotswap.namespace),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": SELF_READER},
        "subjects": [{"kind": "ServiceAccount", "name": APP, "namespace": config.hotswap.namespace}],
    }


def config_map(config: PlatformConfig) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": meta(f"{APP}-config", config.hotswap.namespace),
        "data": {"config.yaml": yaml.safe_dump(reconciler_config(config), sort_keys=True)},
    }


def priority_class(config: PlatformConfig) -> dict[str, Any]:
    return controller_priority_class(
        config,
        RECONCILER_PRIORITY_CLASS,
        "The hotswap reconciler: above every TPU tier so it is never preempted by what it protects.",
        labels=dict(LABELS),
    )


def deployment(config: PlatformConfig, image: Any, config_hash: str, pinned: bool) -> dict[str, Any]:
    """`image` may be a Pulumi Output (a freshly built image); `pinned` says whether it carries a digest."""
    hs = config.hotswap
    container = {
        "name": "reconciler",
        "image": image,
        "imagePullPolicy": "IfNotPresent" if pinned else "Always",
        # On SIGTERM with its Deployment deleted or scaled to zero, release every hold (hotswap/kube/removal.py).
        "args": ["run", "--config", CONFIG_PATH, "--release-on-removal", f"{hs.namespace}/{APP}"],
        "env": [
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "HOTSWAP_LOG_LEVEL", "value": "INFO"},
        ],
        "ports": [
            {"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"},
            {"name": "health", "containerPort": HEALTH_PORT, "protocol": "TCP"},
        ],
        # Liveness follows the reconcile loop, not API reachability (an API outage must not crash-loop it).
        "livenessProbe": {
            "httpGet": {"path": "/healthz", "port": "health"},
            "initialDelaySeconds": 10,
            "periodSeconds": 20,
            "failureThreshold": 3,
        },
        "readinessProbe": {"httpGet": {"path": "/readyz", "port": "health"}, "periodSeconds": 10},
        "resources": reconciler_resources(config),
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "runAsUser": RUN_AS,
            "runAsGroup": RUN_AS,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "volumeMounts": [
            {"name": "config", "mountPath": "/etc/hotswap", "readOnly": True},
            {"name": "tmp", "mountPath": "/tmp"},
        ],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta(
            APP,
            hs.namespace,
            annotations={
                "checkov.io/skip1": "CKV_K8S_38=the reconciler talks to the API server with its token",
                # Pulumi's default, stated: the Deployment stays (deleting) until its pods are gone, so the
                # replicas see the removal and release their holds while their RBAC still exists.
                DELETION_POLICY_ANNOTATION: "foreground",
            },
        ),
        "spec": {
            "replicas": hs.replicas,
            "selector": {"matchLabels": dict(SELECTOR)},
            # Leader election keeps a single writer across a rolling update.
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}},
            "template": {
                "metadata": {"labels": dict(LABELS), "annotations": {"gke-tpu-priority.io/config-hash": config_hash}},
                "spec": {
                    "serviceAccountName": APP,
                    "automountServiceAccountToken": True,
                    "priorityClassName": RECONCILER_PRIORITY_CLASS,
                    "nodeSelector": system_node_selector(config),
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": RUN_AS,
                        "runAsGroup": RUN_AS,
                        "fsGroup": RUN_AS,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    # Time to release every hold on removal (one conditional patch per held Workload).
                    "terminationGracePeriodSeconds": TERMINATION_GRACE_SECONDS,
                    "topologySpreadConstraints": [
                        {
                            "maxSkew": 1,
                            "topologyKey": "kubernetes.io/hostname",
                            "whenUnsatisfiable": "ScheduleAnyway",
                            "labelSelector": {"matchLabels": dict(SELECTOR)},
                        }
                    ],
                    "containers": [container],
                    "volumes": [
                        {"name": "config", "configMap": {"name": f"{APP}-config"}},
                        {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}},
                    ],
                },
            },
        },
    }


def pod_disruption_budget(config: PlatformConfig) -> dict[str, Any]:
    spec: dict[str, Any] = {"selector": {"matchLabels": dict(SELECTOR)}}
    # With one replica a minAvailable of 1 would block node drains forever; allow the drain instead.
    spec["minAvailable" if config.hotswap.replicas > 1 else "maxUnavailable"] = 1
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": meta(APP, config.hotswap.namespace),
        "spec": spec,
    }


def metrics_service(config: PlatformConfig) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta(f"{APP}-metrics", config.hotswap.namespace),
        "spec": {
            "selector": dict(SELECTOR),
            "ports": [{"name": "metrics", "port": METRICS_PORT, "targetPort": "metrics", "protocol": "TCP"}],
        },
    }


def network_policy(config: PlatformConfig) -> dict[str, Any]:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": meta(APP, config.hotswap.namespace),
        "spec": {
            "podSelector": {"matchLabels": dict(SELECTOR)},
            "policyTypes": ["Ingress", "Egress"],
            # Only Prometheus scrapes come in (kubelet probes are not subject to NetworkPolicy).
            "ingress": [{"ports": [{"port": METRICS_PORT, "protocol": "TCP"}]}],
            # Out: DNS, and the API server (its IP is GKE's and not known here, so by port).
            "egress": [
                {"ports": [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}]},
                {"ports": [{"port": 443, "protocol": "TCP"}]},
            ],
        },
    }
