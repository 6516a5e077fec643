"""HotswapReconciler: deploys the bundled reconciler with least-privilege RBAC and restricted pod security."""

import hashlib
from typing import Any, TypedDict

import pulumi
import yaml

from gke_tpu_priority.components.config import parse_platform_config
from gke_tpu_priority.components.kube.objects import KubernetesObject, inherited_depends_on
from gke_tpu_priority.components.reconciler import monitoring, objects
from gke_tpu_priority.components.reconciler.image import build_image
from gke_tpu_priority.components.reconciler.node_guard import node_guard_binding, node_guard_policy
from gke_tpu_priority.components.reconciler.state_guard import state_guard_binding, state_guard_policy
from gke_tpu_priority.components.schema_types import PlatformConfig as PlatformSettings

TYPE_TOKEN = "gke-tpu-priority:index:HotswapReconciler"


class HotswapReconcilerArgs(TypedDict):
    platform: PlatformSettings
    """The platform settings, in the schema of the `gke-tpu-priority:platform` stack setting (see README)."""


class HotswapReconciler(pulumi.ComponentResource):
    """The hotswap reconciler. Pass the Kueue/JobSet install in `opts.depends_on` (it watches their objects)."""

    namespace: pulumi.Output[str]
    """Namespace the reconciler runs in."""
    image: pulumi.Output[str]
    """Image the Deployment runs."""

    def __init__(self, name: str, args: HotswapReconcilerArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(TYPE_TOKEN, name, {}, opts)
        config = parse_platform_config(args["platform"])
        outer = inherited_depends_on(opts)
        image: pulumi.Input[str] = config.hotswap.image or build_image(name, config, self)

        def declare(suffix: str, obj: dict[str, Any], *deps: pulumi.Resource) -> KubernetesObject:
            return KubernetesObject(
                f"{name}-{suffix}", obj, pulumi.ResourceOptions(parent=self, depends_on=[*outer, *deps])
            )

        ns = declare("ns", objects.namespace(config))
        sa = declare("sa", objects.service_account(config), ns)
        role = declare("clusterrole", objects.cluster_role(config))
        binding = declare("clusterrolebinding", objects.cluster_role_binding(config), role, sa)
        lease_role = declare("lease-role", objects.lease_role(config), ns)
        lease_binding = declare("lease-rolebinding", objects.lease_role_binding(config), lease_role, sa)
        # The Deployment depends on these, so on removal Pulumi deletes it (and waits for its pods, which release
        # their holds) before the RBAC they need for that.
        self_role = declare("self-role", objects.self_reader_role(config), ns)
        self_binding = declare("self-rolebinding", objects.self_reader_role_binding(config), self_role, sa)
        config_map_obj = objects.config_map(config)
        config_map = declare("config", config_map_obj, ns)
        priority = declare("priorityclass", objects.priority_class(config))
        config_hash = hashlib.sha256(yaml.safe_dump(config_map_obj["data"]).encode()).hexdigest()[:16]
        # A built image is always referenced by digest; a given one only if the stack pinned it.
        pinned = config.hotswap.image is None or "@sha256:" in config.hotswap.image
        self.deployment = declare(
            "deployment",
            objects.deployment(config, image, config_hash, pinned),
            ns,
            sa,
            binding,
            lease_binding,
            self_binding,
            config_map,
            priority,
        )
        declare("pdb", objects.pod_disruption_budget(config), ns)
        declare("metrics", objects.metrics_service(config), ns)
        declare("networkpolicy", objects.network_policy(config), ns)
        # Only the reconciler writes its state on Workloads (who wrote it decides, not what it says).
        guard = declare("state-guard", state_guard_policy(config))
        declare("state-guard-binding", state_guard_binding(config), guard)
        if objects.quarantine_enabled(config):
            # `patch nodes` narrowed to the reconciler's own quarantine taint (RBAC cannot name fields).
            node_guard = declare("node-guard", node_guard_policy(config))
            declare("node-guard-binding", node_guard_binding(config), node_guard)
        if monitoring.monitoring_enabled(config):
            declare("podmonitoring", monitoring.pod_monitoring(config), ns)
            declare("rules", monitoring.alert_rules(config), ns)
            declare("dashboard", monitoring.dashboard_config_map(config), ns)
        self.namespace = pulumi.Output.from_input(config.hotswap.namespace)
        self.image = pulumi.Output.from_input(image)
        self.register_outputs({"namespace": self.namespace, "image": self.image})
