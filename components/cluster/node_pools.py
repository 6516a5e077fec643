"""Node pools: one non-TPU system pool, and TPU v6e slice pools (one pool per multi-host slice)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_gcp as gcp

from gke_tpu_priority.components import tpu_shapes
from gke_tpu_priority.components.config import CapacityMode, PlatformConfig, TpuPoolGroup
from gke_tpu_priority.components.config.platform import SYSTEM_POOL_NAME
from gke_tpu_priority.components.config.tpu import CAPACITY_LABEL

LABEL_PREFIX = "gke-tpu-priority.io"
POOL_GROUP_LABEL = f"{LABEL_PREFIX}/pool-group"
SYSTEM_LABEL = f"{LABEL_PREFIX}/system"
CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
# TPU slices are created atomically; give GKE time to find capacity before failing the update.
TPU_POOL_TIMEOUTS = pulumi.CustomTimeouts(create="90m", update="60m", delete="45m")


@dataclass(frozen=True)
class TpuPoolSpec:
    """One GKE node pool to create for a pool group (a whole slice, or all single-host slices of a group)."""

    group: TpuPoolGroup
    pool_name: str
    node_count: int
    slices: int


@dataclass(frozen=True)
class PoolContext:
    """What every node pool of a cluster shares."""

    name: str
    config: PlatformConfig
    cluster: gcp.container.Cluster
    service_account_email: pulumi.Input[str]
    parent: pulumi.Resource
    depends_on: Sequence[pulumi.Resource]


def system_node_selector(config: PlatformConfig) -> dict[str, str]:
    """Where the controllers run: the system pool of a created cluster, or the user's choice on an existing one."""
    if config.cluster.is_existing():
        return dict(config.cluster.system_node_selector)
    return {SYSTEM_LABEL: "true"}


def system_node_tag(config: PlatformConfig) -> str:
    """Network tag of the system pool's nodes: the webhook firewall rule's only target (TPU nodes run none)."""
    return f"{config.cluster.name}-system"[:63].rstrip("-")


def tpu_pool_specs(group: TpuPoolGroup) -> list[TpuPoolSpec]:
    shape = group.shape
    if shape.multi_host:
        return [TpuPoolSpec(group, name, shape.vms, 1) for name in group.node_pool_names()]
    return [TpuPoolSpec(group, group.name, group.slices, group.slices)]


def _shielded() -> dict[str, bool]:
    return {"enable_secure_boot": True, "enable_integrity_monitoring": True}


def bootstrap_node_config(service_account_email: pulumi.Input[str]) -> dict[str, Any]:
    """node_config of the cluster's temporary default pool: the platform's node account, hardened like every pool."""
    return {
        "service_account": service_account_email,
        "oauth_scopes": [CLOUD_PLATFORM_SCOPE],
        "image_type": "COS_CONTAINERD",
        "workload_metadata_config": {"mode": "GKE_METADATA"},
        "shielded_instance_config": _shielded(),
    }


def _reservation_affinity(group: TpuPoolGroup, project: pulumi.Input[str]) -> dict[str, Any]:
    capacity = group.capacity
    if capacity.mode is CapacityMode.RESERVATION and capacity.reservation is not None:
        owner = capacity.reservation.project
        name = capacity.reservation.name
        value: pulumi.Input[str] = (
            name
            if owner is None
            else pulumi.Output.from_input(project).apply(
                lambda p: name if owner == p else f"projects/{owner}/reservations/{name}"
            )
        )
        return {
            "consume_reservation_type": "SPECIFIC_RESERVATION",
            "key": "compute.googleapis.com/reservation-name",
            "values": [value],
        }
    # Spot, on-demand and flex-start must not silently eat a reservation meant for other pools.
    return {"consume_reservation_type": "NO_RESERVATION"}


def build_tpu_pool(ctx: PoolContext, spec: TpuPoolSpec) -> gcp.container.NodePool:
    config = ctx.config
    group = spec.group
    shape = group.shape
    capacity = group.capacity.mode
    flex = capacity is CapacityMode.FLEX_START
    autoscaled = flex or group.scale_to_zero
    queued = group.capacity.queued_provisioning
    labels = {
        **group.labels,
        POOL_GROUP_LABEL: group.name,
        CAPACITY_LABEL: group.capacity.capacity_class,
    }
    taints = [{"key": tpu_shapes.TPU_TAINT_KEY, "value": "present", "effect": "NO_SCHEDULE"}]
    taints += [{"key": t.key, "value": t.value, "effect": t.effect.value} for t in group.taints]
    node_config: dict[str, Any] = {
        "machine_type": shape.machine_type,
        "service_account": ctx.service_account_email,
        "oauth_scopes": [CLOUD_PLATFORM_SCOPE],
        "image_type": "COS_CONTAINERD",
        "labels": labels,
        "resource_labels": {**config.labels, "gke-tpu-priority-pool": group.name},
        "taints": taints,
        "workload_metadata_config": {"mode": "GKE_METADATA"},
        "shielded_instance_config": _shielded(),
        "reservation_affinity": _reservation_affinity(group, config.project),
        "gvnic": {"enabled": True},
    }
    if capacity is CapacityMode.SPOT:
        node_config["spot"] = True
    if flex:
        node_config["flex_start"] = True
        # Queued pools get their run time from the ProvisioningRequest (maxRunDurationSeconds, set by the
        # ProvisioningRequestConfig), as GKE's queued-provisioning docs do; flex-start VMs from the node config.
        if group.capacity.max_run_duration and not queued:
            node_config["max_run_duration"] = group.capacity.max_run_duration
    args: dict[str, Any] = {
        "name": spec.pool_name,
        "project": config.project,
        "location": config.region,
        "cluster": ctx.cluster.name,
        "node_locations": [group.zone],
        "node_config": node_config,
        # Flex-start requires auto-repair off (GKE flex-start docs); elsewhere repair keeps slices whole.
        # Auto-upgrade stays on (release channels require it); maintenance windows/exclusions steer it.
        "management": {"auto_repair": not flex, "auto_upgrade": True},
        # A slice can't be upgraded host by host: surge a whole replacement or take it down as one.
        "upgrade_settings": {
            "strategy": "SURGE",
            "max_surge": 0 if shape.multi_host else 1,
            "max_unavailable": 1,
        },
        "deletion_policy": "PREVENT" if config.protect else "DELETE",
    }
    if shape.multi_host:
        args["placement_policy"] = {"type": "COMPACT", "tpu_topology": shape.topology}
    if queued:
        # GKE's queued provisioning: nodes only through ProvisioningRequests (`--enable-queued-provisioning` with
        # `--flex-start`, autoscaling from 0, `--location-policy=ANY`, `--reservation-affinity=none`,
        # `--no-enable-autorepair`; all set by the flex-start branch here).
        args["queued_provisioning"] = {"enabled": True}
    if flex:
        # Per-zone limits, not total_*: the provider mishandles total limits on TPU flex-start pools (Cluster
        # Toolkit's gke-node-pool module works around the same bug this way). A pool has exactly one zone, so the
        # per-zone maximum is the whole pool: the full slice, never part of it.
        args["autoscaling"] = {"min_node_count": 0, "max_node_count": spec.node_count, "location_policy": "ANY"}
        args["initial_node_count"] = 0
    elif autoscaled:
        # Multi-host slices scale atomically between 0 and the full slice, never partially; the pool starts empty
        # so `pulumi up` neither pays for idle slices nor waits on a stockout.
        args["autoscaling"] = {
            "total_min_node_count": 0,
            "total_max_node_count": spec.node_count,
            "location_policy": "ANY",
        }
        args["initial_node_count"] = 0
    else:
        args["node_count"] = spec.node_count
    ignore = ["initialNodeCount"] + (["nodeCount"] if autoscaled else [])
    return gcp.container.NodePool(
        f"{ctx.name}-{spec.pool_name}",
        **args,
        opts=pulumi.ResourceOptions(
            parent=ctx.parent,
            depends_on=list(ctx.depends_on),
            protect=config.protect,
            ignore_changes=ignore,
            # Topology, machine type and placement can't change in place; a fixed name needs delete-first.
            replace_on_changes=["placementPolicy", "nodeConfig.machineType"],
            delete_before_replace=True,
            custom_timeouts=TPU_POOL_TIMEOUTS,
        ),
    )


def build_system_pool(ctx: PoolContext) -> gcp.container.NodePool:
    config = ctx.config
    pool = config.system_pool
    args: dict[str, Any] = {
        "name": SYSTEM_POOL_NAME,
        "project": config.project,
        "location": config.region,
        "cluster": ctx.cluster.name,
        "node_locations": config.system_zones,
        "initial_node_count": pool.node_count_per_zone,
        "autoscaling": {
            "min_node_count": pool.node_count_per_zone,
            "max_node_count": pool.max_node_count_per_zone,
        },
        "node_config": {
            "machine_type": pool.machine_type,
            "disk_size_gb": pool.disk_size_gb,
            "service_account": ctx.service_account_email,
            "oauth_scopes": [CLOUD_PLATFORM_SCOPE],
            "image_type": "COS_CONTAINERD",
            "labels": {SYSTEM_LABEL: "true"},
            # The target of the control plane's webhook rule (components/cluster/firewall.py).
            "tags": [system_node_tag(config)],
            "resource_labels": config.labels,
            "workload_metadata_config": {"mode": "GKE_METADATA"},
            "shielded_instance_config": _shielded(),
        },
        "management": {"auto_repair": True, "auto_upgrade": True},
        "upgrade_settings": {"strategy": "SURGE", "max_surge": 1, "max_unavailable": 0},
        "deletion_policy": "PREVENT" if config.protect else "DELETE",
    }
    return gcp.container.NodePool(
        f"{ctx.name}-system",
        **args,
        opts=pulumi.ResourceOptions(
            parent=ctx.parent,
            depends_on=list(ctx.depends_on),
            ignore_changes=["initialNodeCount", "nodeCount"],
        ),
    )
