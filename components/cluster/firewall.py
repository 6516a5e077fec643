"""The control plane's way to the webhooks: a firewall rule from its range to the system nodes, on their ports.

Kueue's admission and CRD-conversion webhooks, JobSet's webhooks and Kueue's visibility API (an aggregated API)
run in pods on the system pool, behind Services whose target ports are 9443 and 8082. The API server calls them
directly on the pod IPs; on a private cluster GKE's own rule lets the control plane reach the nodes only on 443
and 10250, and every one of these webhooks fails closed, so without this rule the first ResourceFlavor is refused,
every JobSet is refused, and the unreachable aggregated API blocks discovery and namespace deletion.
"""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

from gke_tpu_priority.components.cluster.network import NetworkRefs
from gke_tpu_priority.components.cluster.node_pools import system_node_tag
from gke_tpu_priority.components.config import ControlPlaneAccess, NetworkMode, PlatformConfig
from gke_tpu_priority.components.kueue.manager_config import kueue_manager_config

# Kueue's visibility server: the chart's `visibility-server` Service targets this port (manager.yaml containerPort
# `visibility`); Kueue's Configuration has no setting for it.
KUEUE_VISIBILITY_PORT = 8082
# JobSet's webhook: the chart's Service targets the named port `webhook`, containerPort 9443 (controller-runtime's
# default; the chart's Configuration sets no webhook port).
JOBSET_WEBHOOK_PORT = 9443


def webhook_ports(config: PlatformConfig) -> list[int]:
    """Every port the API server calls on the system nodes: Kueue's webhook port as the package configures it."""
    kueue_webhook = int(kueue_manager_config(config)["webhook"]["port"])
    return sorted({kueue_webhook, KUEUE_VISIBILITY_PORT, JOBSET_WEBHOOK_PORT})


def control_plane_sources(config: PlatformConfig, network: NetworkRefs) -> pulumi.Input[list[str]]:
    """Where the API server's calls to the nodes come from, per `cluster.controlPlaneAccess`.

    `public` and `private` make a VPC-peering private cluster: the control plane sits in `masterIpv4CidrBlock`
    (GKE's own rule uses the same range). `dns` makes a Private Service Connect cluster with no peering range:
    the control plane's private endpoint takes its address from the node subnet's primary range, so that range is
    the source. GKE already admits node-subnet traffic to the nodes on every port, so this opens nothing new; the
    rule only keeps the webhooks reachable whatever GKE's generated rules do.
    """
    settings = config.cluster
    if settings.control_plane_access is not ControlPlaneAccess.DNS:
        return [settings.master_ipv4_cidr_block]
    net = config.network
    if net.mode is NetworkMode.CREATE:
        return [net.subnet_cidr]
    subnet = gcp.compute.get_subnetwork_output(name=net.subnetwork, project=config.project, region=config.region)
    return subnet.ip_cidr_range.apply(lambda cidr: [cidr])


def build_webhook_firewall(
    name: str, config: PlatformConfig, network: NetworkRefs, parent: pulumi.Resource
) -> gcp.compute.Firewall:
    ports = webhook_ports(config)
    return gcp.compute.Firewall(
        f"{name}-webhooks",
        name=f"{config.cluster.name}-control-plane-webhooks"[:63].rstrip("-"),
        project=config.project,
        network=network.network,
        description=(
            "GKE control plane to the Kueue/JobSet webhooks and Kueue's visibility API on the system nodes "
            f"(tcp {', '.join(map(str, ports))}); managed by gke-tpu-priority"
        ),
        direction="INGRESS",
        priority=1000,
        source_ranges=control_plane_sources(config, network),
        target_tags=[system_node_tag(config)],
        allows=[{"protocol": "tcp", "ports": [str(p) for p in ports]}],
        opts=pulumi.ResourceOptions(parent=parent, depends_on=list(network.resources)),
    )
