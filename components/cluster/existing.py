"""A Kubernetes provider for a GKE cluster the package did not create (`cluster.mode: existing`).

Nothing here registers a GCP resource: the cluster's endpoint and CA come from a GKE lookup (an invoke), or the
provider uses a context of the local kubeconfig.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from gke_tpu_priority.components.cluster.kubeconfig import exec_kubeconfig
from gke_tpu_priority.components.config import PlatformConfig


@dataclass(frozen=True)
class ExistingCluster:
    provider: k8s.Provider
    cluster_name: pulumi.Output[str]
    location: pulumi.Output[str]
    endpoint: pulumi.Output[str]
    kubeconfig: pulumi.Output[str]


def _server(cluster: gcp.container.GetClusterResult) -> str:
    if cluster.endpoint:
        return f"https://{cluster.endpoint}"
    # A DNS-endpoint-only cluster has no IP endpoint.
    for cpe in cluster.control_plane_endpoints_configs or []:
        for dns in cpe.dns_endpoint_configs or []:
            if dns.endpoint:
                return f"https://{dns.endpoint}"
    raise ValueError(f"GKE cluster {cluster.name!r} reports no IP or DNS endpoint")


def _ca(cluster: gcp.container.GetClusterResult) -> str | None:
    auths = cluster.master_auths or []
    return auths[0].cluster_ca_certificate if auths and cluster.endpoint else None


def existing_cluster(name: str, config: PlatformConfig, parent: pulumi.Resource) -> ExistingCluster:
    settings = config.cluster
    location = settings.location or config.region
    opts = pulumi.ResourceOptions(parent=parent)
    if settings.kubeconfig_context is not None:
        provider = k8s.Provider(
            f"{name}-k8s", context=settings.kubeconfig_context, enable_server_side_apply=True, opts=opts
        )
        unknown = pulumi.Output.from_input("")
        return ExistingCluster(
            provider,
            pulumi.Output.from_input(settings.name),
            pulumi.Output.from_input(location),
            unknown,
            pulumi.Output.secret(unknown),
        )
    cluster = gcp.container.get_cluster_output(
        name=settings.name, location=location, project=config.project, opts=pulumi.InvokeOutputOptions(parent=parent)
    )
    server = cluster.apply(_server)
    ca = cluster.apply(_ca)
    plain_kubeconfig: pulumi.Output[str] = pulumi.Output.all(settings.name, server, ca).apply(
        lambda parts: exec_kubeconfig(str(parts[0]), str(parts[1]), parts[2], settings.kubernetes_auth)
    )
    kubeconfig: pulumi.Output[str] = pulumi.Output.secret(plain_kubeconfig)
    provider = k8s.Provider(
        f"{name}-k8s",
        kubeconfig=kubeconfig,
        # Only another cluster (not CA rotation) replaces the provider and so every in-cluster object.
        cluster_identifier=pulumi.Output.concat(
            "projects/", config.project, "/locations/", location, "/clusters/", settings.name
        ),
        enable_server_side_apply=True,
        opts=opts,
    )
    return ExistingCluster(provider, cluster.name, pulumi.Output.from_input(location), server, kubeconfig)
