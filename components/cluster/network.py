"""VPC, subnet with pod/service ranges, and Cloud NAT for private nodes (image pulls from registry.k8s.io)."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from gke_tpu_priority.components.config import NetworkMode, PlatformConfig


@dataclass(frozen=True)
class NetworkRefs:
    network: pulumi.Input[str]
    subnetwork: pulumi.Input[str]
    pods_range_name: str
    services_range_name: str
    resources: tuple[pulumi.Resource, ...]


def build_network(name: str, config: PlatformConfig, parent: pulumi.Resource) -> NetworkRefs:
    net = config.network
    if net.mode is NetworkMode.EXISTING:
        assert net.subnetwork is not None  # guaranteed by NetworkConfig validation
        return NetworkRefs(net.name, net.subnetwork, net.pods_range_name, net.services_range_name, ())
    opts = pulumi.ResourceOptions(parent=parent)
    vpc = gcp.compute.Network(
        f"{name}-vpc",
        name=net.name,
        project=config.project,
        auto_create_subnetworks=False,
        routing_mode="REGIONAL",
        opts=opts,
    )
    subnet = gcp.compute.Subnetwork(
        f"{name}-subnet",
        name=f"{net.name}-{config.region}",
        project=config.project,
        region=config.region,
        network=vpc.id,
        ip_cidr_range=net.subnet_cidr,
        private_ip_google_access=True,
        secondary_ip_ranges=[
            {"range_name": net.pods_range_name, "ip_cidr_range": net.pods_cidr},
            {"range_name": net.services_range_name, "ip_cidr_range": net.services_cidr},
        ],
        # VPC flow logs (CIS GKE 5.6.1); sampled to keep the cost bounded.
        log_config={
            "aggregation_interval": "INTERVAL_5_MIN",
            "flow_sampling": 0.5,
            "metadata": "INCLUDE_ALL_METADATA",
        },
        opts=opts,
    )
    resources: list[pulumi.Resource] = [vpc, subnet]
    if config.cluster.private_nodes:
        router = gcp.compute.Router(
            f"{name}-router",
            name=f"{net.name}-router",
            project=config.project,
            region=config.region,
            network=vpc.id,
            opts=opts,
        )
        nat = gcp.compute.RouterNat(
            f"{name}-nat",
            name=f"{net.name}-nat",
            project=config.project,
            region=config.region,
            router=router.name,
            nat_ip_allocate_option="AUTO_ONLY",
            source_subnetwork_ip_ranges_to_nat="ALL_SUBNETWORKS_ALL_IP_RANGES",
            log_config={"enable": True, "filter": "ERRORS_ONLY"},
            opts=opts,
        )
        resources += [router, nat]
    return NetworkRefs(vpc.id, subnet.id, net.pods_range_name, net.services_range_name, tuple(resources))
