"""TpuCluster: a hardened GKE cluster with TPU v6e slice node pools and a Kubernetes provider for it."""

from typing import Any, TypedDict

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from gke_tpu_priority.components.cluster.firewall import build_webhook_firewall
from gke_tpu_priority.components.cluster.identity import build_node_service_account
from gke_tpu_priority.components.cluster.kubeconfig import exec_kubeconfig
from gke_tpu_priority.components.cluster.network import build_network
from gke_tpu_priority.components.cluster.node_pools import (
    PoolContext,
    bootstrap_node_config,
    build_system_pool,
    build_tpu_pool,
    tpu_pool_specs,
)
from gke_tpu_priority.components.cluster.settings import control_plane_args, maintenance_args, observability_args
from gke_tpu_priority.components.config import ControlPlaneAccess, parse_platform_config
from gke_tpu_priority.components.schema_types import PlatformConfig as PlatformSettings

TYPE_TOKEN = "gke-tpu-priority:index:TpuCluster"


class TpuClusterArgs(TypedDict):
    platform: PlatformSettings
    """The platform settings, in the schema of the `gke-tpu-priority:platform` stack setting (see README)."""


class TpuCluster(pulumi.ComponentResource):
    """A GKE cluster with TPU v6e slice node pools, a system pool, and a Kubernetes provider for it."""

    cluster_name: pulumi.Output[str]
    """Name of the GKE cluster."""
    endpoint: pulumi.Output[str]
    """Control-plane endpoint (IP or DNS name) the Kubernetes provider talks to."""
    location: pulumi.Output[str]
    """Region of the cluster."""
    kubeconfig: pulumi.Output[str]
    """Kubeconfig using gke-gcloud-auth-plugin (secret)."""
    system_pool_name: pulumi.Output[str]
    """Name of the non-TPU system node pool."""
    tpu_node_pool_names: pulumi.Output[list[str]]
    """Names of the TPU node pools (one per multi-host slice)."""

    def __init__(self, name: str, args: TpuClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(TYPE_TOKEN, name, {}, opts)
        config = parse_platform_config(args["platform"])
        if config.cluster.is_existing():
            raise ValueError(
                "TpuCluster creates a GKE cluster, but platform.cluster.mode is `existing`: use TpuPlatform, or "
                "KueueJobSet/PriorityTiers/TpuQueues/HotswapReconciler with a provider for that cluster in `opts`"
            )
        self.config = config

        network = build_network(name, config, self)
        # Validation keeps a created cluster's name plain (only `mode: existing` accepts an output for it).
        account_id = f"{config.cluster.name}-nodes"[:30].rstrip("-")
        self.node_service_account, node_roles = build_node_service_account(name, config.project, account_id, self)
        settings = config.cluster
        cluster_args: dict[str, Any] = {
            "name": settings.name,
            "project": config.project,
            "location": config.region,
            # Separate node pools have their own lifecycle; the default pool only bootstraps the cluster. It still
            # boots VMs, so it runs as the platform's node account: without node_config GKE would use the Compute
            # Engine default account, which hardened projects disable or delete (cluster creation then fails).
            "remove_default_node_pool": True,
            "initial_node_count": 1,
            "node_config": bootstrap_node_config(self.node_service_account.email),
            "deletion_protection": config.deletion_protection,
            "release_channel": {"channel": settings.release_channel.value},
            "min_master_version": settings.min_master_version,
            "network": network.network,
            "subnetwork": network.subnetwork,
            "networking_mode": "VPC_NATIVE",
            "ip_allocation_policy": {
                "cluster_secondary_range_name": network.pods_range_name,
                "services_secondary_range_name": network.services_range_name,
            },
            "workload_identity_config": {"workload_pool": pulumi.Output.concat(config.project, ".svc.id.goog")},
            "datapath_provider": "ADVANCED_DATAPATH",
            "enable_shielded_nodes": True,
            "enable_legacy_abac": False,
            "enable_kubernetes_alpha": False,
            "master_auth": {"client_certificate_config": {"issue_client_certificate": False}},
            "maintenance_policy": maintenance_args(config),
            "addons_config": {
                "gcs_fuse_csi_driver_config": {"enabled": True},
                "gce_persistent_disk_csi_driver_config": {"enabled": True},
            },
            # VULNERABILITY_BASIC is retired ("no longer supported" in the GKE API; see GKE's posture-management
            # deprecation) and VULNERABILITY_ENTERPRISE is deprecated with it, so scanning is explicitly off: image
            # scanning belongs to Artifact Analysis on the registry. Explicit, so GKE never picks a retired default.
            "security_posture_config": {"mode": "BASIC", "vulnerability_mode": "VULNERABILITY_DISABLED"},
            "resource_labels": {**config.labels, "gke-tpu-priority": "cluster"},
            **control_plane_args(config),
            **observability_args(),
        }
        self.cluster = gcp.container.Cluster(
            f"{name}-gke",
            **cluster_args,
            opts=pulumi.ResourceOptions(
                parent=self,
                protect=config.protect,
                # The bootstrap nodes register with the account's roles already granted.
                depends_on=[*network.resources, *node_roles],
                ignore_changes=["initialNodeCount", "nodeConfig"],
            ),
        )
        # Nodes need their IAM roles (logging, image pulls) before they register.
        pools = PoolContext(name, config, self.cluster, self.node_service_account.email, self, node_roles)
        self.system_pool = build_system_pool(pools)
        # The API server calls the webhooks on the system nodes; private nodes admit it only on 443 and 10250.
        self.webhook_firewall = build_webhook_firewall(name, config, network, self)
        self.tpu_pools = [build_tpu_pool(pools, spec) for group in config.tpu_pools for spec in tpu_pool_specs(group)]

        if settings.control_plane_access is ControlPlaneAccess.DNS:
            server = self.cluster.control_plane_endpoints_config.apply(
                lambda c: f"https://{c.dns_endpoint_config.endpoint}" if c and c.dns_endpoint_config else ""
            )
            ca: pulumi.Output[str | None] = pulumi.Output.from_input(None)
        else:
            server = self.cluster.endpoint.apply(lambda e: f"https://{e}")
            ca = self.cluster.master_auth.apply(lambda m: m.cluster_ca_certificate)
        self.endpoint = server
        self.kubeconfig = pulumi.Output.secret(
            pulumi.Output.all(self.cluster.name, server, ca).apply(
                lambda parts: exec_kubeconfig(str(parts[0]), str(parts[1]), parts[2], settings.kubernetes_auth)
            )
        )
        self.provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=self.kubeconfig,
            # Only a new cluster id replaces the provider (and so every in-cluster object), not CA rotation.
            cluster_identifier=self.cluster.id,
            enable_server_side_apply=True,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.cluster_name = self.cluster.name
        self.location = self.cluster.location
        self.system_pool_name = self.system_pool.name
        self.tpu_node_pool_names = pulumi.Output.all(*[p.name for p in self.tpu_pools]).apply(list)
        self.register_outputs(
            {
                "cluster_name": self.cluster_name,
                "endpoint": self.endpoint,
                "location": self.location,
                "kubeconfig": self.kubeconfig,
                "system_pool_name": self.system_pool_name,
                "tpu_node_pool_names": self.tpu_node_pool_names,
            }
        )
