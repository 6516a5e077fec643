"""Cluster-level GKE settings derived from stack config (secure defaults; CIS GKE mapping in README)."""

from __future__ import annotations

from typing import Any

from gke_tpu_priority.components.config import ControlPlaneAccess, PlatformConfig


def control_plane_args(config: PlatformConfig) -> dict[str, Any]:
    settings = config.cluster
    access = settings.control_plane_access
    private: dict[str, Any] = {"enable_private_nodes": settings.private_nodes}
    args: dict[str, Any] = {"private_cluster_config": private}
    if access is ControlPlaneAccess.DNS:
        # IAM-gated DNS endpoint: `pulumi up` works from anywhere with credentials, no IP allow-list to keep.
        args["control_plane_endpoints_config"] = {
            "dns_endpoint_config": {"allow_external_traffic": True},
            "ip_endpoints_config": {"enabled": False},
        }
        return args
    private["master_ipv4_cidr_block"] = settings.master_ipv4_cidr_block
    private["enable_private_endpoint"] = access is ControlPlaneAccess.PRIVATE
    private["master_global_access_config"] = {"enabled": True}
    args["master_authorized_networks_config"] = {
        "cidr_blocks": [
            {"cidr_block": n.cidr_block, "display_name": n.display_name or n.cidr_block}
            for n in settings.authorized_networks
        ],
        "gcp_public_cidrs_access_enabled": False,
    }
    return args


def maintenance_args(config: PlatformConfig) -> dict[str, Any]:
    maintenance = config.cluster.maintenance
    return {
        "recurring_window": {
            "start_time": maintenance.window_start,
            "end_time": maintenance.window_end,
            "recurrence": maintenance.recurrence,
        },
        "maintenance_exclusions": [
            {
                "exclusion_name": e.name,
                "start_time": e.start_time,
                "end_time": e.end_time,
                "exclusion_options": {"scope": e.scope.value},
            }
            for e in maintenance.exclusions
        ],
    }


def observability_args() -> dict[str, Any]:
    return {
        "logging_config": {"enable_components": ["SYSTEM_COMPONENTS", "APISERVER", "WORKLOADS"]},
        "monitoring_config": {
            # JOBSET adds JobSet health metrics (GKE >= 1.32.1-gke.1357001).
            "enable_components": [
                "SYSTEM_COMPONENTS",
                "APISERVER",
                "SCHEDULER",
                "CONTROLLER_MANAGER",
                "JOBSET",
            ],
            "managed_prometheus": {"enabled": True},
        },
    }
