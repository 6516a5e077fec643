"""GKE: TPU node pool placement and capacity, node identity and hardening, cluster security settings."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from .base import Config, GcpResource, GcpRule, as_number, dig, is_list, mapping, show_number, stack_name_from_urn

FAMILY = "GKE"
NODE_POOL_TYPE = "gcp:container/nodePool:NodePool"
CLUSTER_TYPE = "gcp:container/cluster:Cluster"
TPU_MACHINE_PREFIX = "ct6e-"
DEFAULT_COMPUTE_SA = re.compile(r"^\d+-compute@developer\.gserviceaccount\.com$")


def _machine_type(props: Mapping[str, Any]) -> str:
    return str(dig(props, "nodeConfig", "machineType", default=""))


def chips_per_host(machine_type: str) -> int | None:
    """``ct6e-standard-4t`` -> 4."""
    match = re.search(r"-(\d+)t$", machine_type)
    return int(match.group(1)) if match else None


def topology_chips(topology: str) -> int | None:
    """``4x4`` -> 16."""
    if not re.fullmatch(r"\d+(x\d+)+", topology):
        return None
    total = 1
    for part in topology.split("x"):
        total *= int(part)
    return total


def _is_flex_start(props: Mapping[str, Any]) -> bool:
    return bool(dig(props, "nodeConfig", "flexStart")) or bool(dig(props, "queuedProvisioning", "enabled"))


def check_tpu_node_pool_placement(pool: GcpResource, cfg: Config) -> Iterator[str]:
    props, name = pool.props, pool.name
    machine = _machine_type(props)
    if not machine.startswith(TPU_MACHINE_PREFIX):
        return
    placement = mapping(dig(props, "placementPolicy"))
    topology = str(dig(placement, "tpuTopology", default=""))
    per_host, chips = chips_per_host(machine), topology_chips(topology)
    per_zone_max = as_number(dig(props, "autoscaling", "maxNodeCount"))
    zones = dig(props, "nodeLocations", default=[])
    node_count = (
        as_number(dig(props, "nodeCount"))
        or as_number(dig(props, "autoscaling", "totalMaxNodeCount"))
        or (per_zone_max * max(1, len(zones) if is_list(zones) else 1) if per_zone_max else None)
        or as_number(dig(props, "initialNodeCount"))
        or 1.0
    )
    # Without a tpuTopology a pool holds single-host slices (one VM each, any count); with one it is one slice.
    if placement and dig(placement, "type") == "COMPACT" and not topology and per_host is not None:
        yield (
            f"TPU node pool '{name}' ({machine}) has COMPACT placement but no placementPolicy.tpuTopology; "
            "set the slice topology (for example '4x4') so GKE builds one multi-host slice."
        )
    multi_host = chips is not None and per_host is not None and chips > per_host
    if not multi_host:
        return
    if dig(placement, "type") != "COMPACT":
        yield f"TPU node pool '{name}' ({machine}) is a multi-host slice; set placementPolicy.type to COMPACT."
    if chips is not None and per_host and node_count * per_host != chips:
        yield (
            f"TPU node pool '{name}' has {show_number(node_count)} nodes x {per_host} chips but topology "
            f"{topology} needs {chips} chips; set nodeCount to {chips // per_host}."
        )


def check_spot_and_reservation(pool: GcpResource, cfg: Config) -> Iterator[str]:
    spot = bool(dig(pool.props, "nodeConfig", "spot")) or bool(dig(pool.props, "nodeConfig", "preemptible"))
    reservation = dig(pool.props, "nodeConfig", "reservationAffinity", "consumeReservationType")
    if spot and reservation in ("SPECIFIC_RESERVATION", "ANY_RESERVATION"):
        yield (
            f"Node pool '{pool.name}' is Spot and also consumes a reservation ({reservation}); choose one: "
            "remove spot or set consumeReservationType to NO_RESERVATION."
        )


def check_node_service_account(pool: GcpResource, cfg: Config) -> Iterator[str]:
    account = dig(pool.props, "nodeConfig", "serviceAccount")
    if not account or account == "default" or DEFAULT_COMPUTE_SA.match(str(account)):
        yield (
            f"Node pool '{pool.name}' runs as the Compute Engine default service account; set "
            "nodeConfig.serviceAccount to a dedicated least-privilege service account (CIS GKE 5.2.1)."
        )


def check_gke_metadata_server(pool: GcpResource, cfg: Config) -> Iterator[str]:
    mode = dig(pool.props, "nodeConfig", "workloadMetadataConfig", "mode")
    if mode != "GKE_METADATA":
        yield (
            f"Node pool '{pool.name}' has workloadMetadataConfig.mode {mode or 'unset'}; set it to GKE_METADATA "
            "so pods cannot read node credentials (CIS GKE 5.4.1)."
        )


def check_shielded_nodes(pool: GcpResource, cfg: Config) -> Iterator[str]:
    shielded = mapping(dig(pool.props, "nodeConfig", "shieldedInstanceConfig"))
    if shielded.get("enableSecureBoot") is not True:
        yield f"Node pool '{pool.name}' does not enable Secure Boot; set shieldedInstanceConfig.enableSecureBoot."
    if shielded.get("enableIntegrityMonitoring") is False:
        yield f"Node pool '{pool.name}' disables integrity monitoring; set enableIntegrityMonitoring to true."


def check_auto_repair(pool: GcpResource, cfg: Config) -> Iterator[str]:
    if _is_flex_start(pool.props):
        return  # flex-start / queued-provisioning pools are replaced, not repaired
    if dig(pool.props, "management", "autoRepair") is not True:
        yield f"Node pool '{pool.name}' does not enable auto-repair; set management.autoRepair to true."


def check_cluster_workload_identity(cluster: GcpResource, cfg: Config) -> Iterator[str]:
    # Autopilot clusters always run Workload Identity Federation (it cannot be turned off), pool or no pool.
    if dig(cluster.props, "enableAutopilot") is True:
        return
    if not dig(cluster.props, "workloadIdentityConfig", "workloadPool"):
        yield (
            f"Cluster '{cluster.name}' has no workloadIdentityConfig.workloadPool; set it to "
            "'<project>.svc.id.goog' (CIS GKE 5.2.2)."
        )


def check_cluster_legacy_abac(cluster: GcpResource, cfg: Config) -> Iterator[str]:
    if dig(cluster.props, "enableLegacyAbac") is True:
        yield f"Cluster '{cluster.name}' enables legacy ABAC; set enableLegacyAbac to false (CIS GKE 5.8.3)."


def check_cluster_client_certificate(cluster: GcpResource, cfg: Config) -> Iterator[str]:
    if dig(cluster.props, "masterAuth", "clientCertificateConfig", "issueClientCertificate") is True:
        yield (
            f"Cluster '{cluster.name}' issues client certificates; set masterAuth.clientCertificateConfig."
            "issueClientCertificate to false (CIS GKE 5.8.1)."
        )


def check_cluster_release_channel(cluster: GcpResource, cfg: Config) -> Iterator[str]:
    channel = dig(cluster.props, "releaseChannel", "channel")
    allowed = list(cfg["allowedChannels"])
    if channel not in allowed:
        yield (
            f"Cluster '{cluster.name}' has release channel {channel or 'unset'}; "
            f"set releaseChannel.channel to one of {allowed}."
        )


def is_production(urn: str, stack_tags: Mapping[str, str], cfg: Config) -> bool:
    if cfg.get("production") is not None:
        return bool(cfg["production"])
    tag = stack_tags.get(str(cfg["productionTagKey"]), "")
    return stack_name_from_urn(urn) in set(cfg["productionStacks"]) or tag in set(cfg["productionTagValues"])


def check_deletion_protection(cluster: GcpResource, cfg: Config) -> Iterator[str]:
    if is_production(cluster.urn, cluster.stack_tags, cfg) and dig(cluster.props, "deletionProtection") is not True:
        yield f"Cluster '{cluster.name}' is in a production stack but deletionProtection is not true; set it to true."


def _node_pool_rule(name: str, description: str, check: Any, **extra: Any) -> GcpRule:
    return GcpRule(
        name=name, description=description, family=FAMILY, resource_type=NODE_POOL_TYPE, check=check, **extra
    )


def _cluster_rule(name: str, description: str, check: Any, **extra: Any) -> GcpRule:
    return GcpRule(name=name, description=description, family=FAMILY, resource_type=CLUSTER_TYPE, check=check, **extra)


GKE_TPU_NODE_POOL_PLACEMENT = _node_pool_rule(
    "gcp-container-nodepool-tpu-compact-placement",
    "Multi-host TPU v6e node pools (a tpuTopology larger than one VM) must use COMPACT placement and a node count "
    "that matches the topology.",
    check_tpu_node_pool_placement,
    tags=("gke", "tpu"),
)
GKE_NODE_POOL_SPOT_XOR_RESERVATION = _node_pool_rule(
    "gcp-container-nodepool-disallow-spot-with-reservation",
    "A node pool must not be Spot and consume a reservation at the same time.",
    check_spot_and_reservation,
    tags=("gke", "tpu"),
)
GKE_NODE_POOL_SERVICE_ACCOUNT = _node_pool_rule(
    "gcp-container-nodepool-disallow-default-service-account",
    "Node pools must run as a dedicated service account, not the Compute Engine default one.",
    check_node_service_account,
    tags=("gke", "cis"),
)
GKE_NODE_POOL_METADATA_SERVER = _node_pool_rule(
    "gcp-container-nodepool-require-gke-metadata-server",
    "Node pools must use the GKE metadata server (workloadMetadataConfig.mode GKE_METADATA).",
    check_gke_metadata_server,
    tags=("gke", "cis"),
)
GKE_NODE_POOL_SHIELDED = _node_pool_rule(
    "gcp-container-nodepool-enable-secure-boot",
    "Node pools should enable Secure Boot and keep integrity monitoring on.",
    check_shielded_nodes,
    # Advisory: Secure Boot on ct6e TPU VMs is not yet verified on a real pool.
    level="advisory",
    severity="medium",
    tags=("gke", "cis"),
)
GKE_NODE_POOL_AUTO_REPAIR = _node_pool_rule(
    "gcp-container-nodepool-enable-auto-repair",
    "Node pools must enable auto-repair, except flex-start and queued-provisioning pools.",
    check_auto_repair,
    tags=("gke", "cis"),
)
GKE_CLUSTER_WORKLOAD_IDENTITY = _cluster_rule(
    "gcp-container-cluster-enable-workload-identity",
    "Clusters must enable Workload Identity.",
    check_cluster_workload_identity,
    tags=("gke", "cis"),
)
GKE_CLUSTER_LEGACY_ABAC = _cluster_rule(
    "gcp-container-cluster-disable-legacy-abac",
    "Clusters must not enable legacy ABAC authorization.",
    check_cluster_legacy_abac,
    tags=("gke", "cis"),
)
GKE_CLUSTER_CLIENT_CERTIFICATE = _cluster_rule(
    "gcp-container-cluster-disable-client-certificate",
    "Clusters must not issue client certificates.",
    check_cluster_client_certificate,
    tags=("gke", "cis"),
)
GKE_CLUSTER_RELEASE_CHANNEL = _cluster_rule(
    "gcp-container-cluster-require-release-channel",
    "Clusters must be enrolled in an allowed release channel.",
    check_cluster_release_channel,
    config={
        "allowedChannels": {
            "type": "array",
            "items": {"type": "string"},
            "default": ["REGULAR", "STABLE", "RAPID"],
            "description": "Release channels clusters may use.",
        },
    },
    tags=("gke", "cis"),
)
GKE_CLUSTER_DELETION_PROTECTION = _cluster_rule(
    "gcp-container-cluster-enable-deletion-protection",
    "Clusters in production stacks must set deletionProtection to true.",
    check_deletion_protection,
    config={
        "production": {
            "type": ["boolean", "null"],
            "default": None,
            "description": "Force production (true) or non-production (false); null decides from the stack.",
        },
        "productionStacks": {
            "type": "array",
            "items": {"type": "string"},
            "default": ["prod", "production"],
            "description": "Stack names treated as production.",
        },
        "productionTagKey": {
            "type": "string",
            "default": "environment",
            "description": "Stack tag that marks the environment.",
        },
        "productionTagValues": {
            "type": "array",
            "items": {"type": "string"},
            "default": ["prod", "production"],
            "description": "Values of that tag that mean production.",
        },
    },
    tags=("gke", "reliability"),
)

RULES = (
    GKE_TPU_NODE_POOL_PLACEMENT,
    GKE_NODE_POOL_SPOT_XOR_RESERVATION,
    GKE_NODE_POOL_SERVICE_ACCOUNT,
    GKE_NODE_POOL_METADATA_SERVER,
    GKE_NODE_POOL_SHIELDED,
    GKE_NODE_POOL_AUTO_REPAIR,
    GKE_CLUSTER_WORKLOAD_IDENTITY,
    GKE_CLUSTER_LEGACY_ABAC,
    GKE_CLUSTER_CLIENT_CERTIFICATE,
    GKE_CLUSTER_RELEASE_CHANNEL,
    GKE_CLUSTER_DELETION_PROTECTION,
)
