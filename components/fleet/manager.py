"""The MultiKueue manager: a small CPU-only GKE cluster (Autopilot) or an existing one, and its Kueue install."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s
import yaml

from gke_tpu_priority.components.cluster.existing import _ca, _server
from gke_tpu_priority.components.cluster.kubeconfig import exec_kubeconfig
from gke_tpu_priority.components.config.fleet import FleetConfig
from gke_tpu_priority.components.fleet.multikueue import manager_kueue_config, sizing_platform
from gke_tpu_priority.components.kube.objects import KubernetesObject, namespace
from gke_tpu_priority.components.kueue import (
    chart_location,
    controllers_priority_class,
    jobset_controller_priority,
    jobset_values,
    kueue_values,
)
from gke_tpu_priority.components.kueue.crds import KeepCrds


@dataclass(frozen=True)
class ManagerCluster:
    provider: k8s.Provider
    cluster_name: pulumi.Output[str]
    location: pulumi.Output[str]
    endpoint: pulumi.Output[str]
    kubeconfig: pulumi.Output[str]
    resources: list[pulumi.Resource]


def manager_cluster(
    name: str, config: FleetConfig, parent: pulumi.Resource, gcp_provider: gcp.Provider
) -> ManagerCluster:
    m = config.manager
    opts = pulumi.ResourceOptions(parent=parent, provider=gcp_provider)
    if m.mode.value == "existing":
        location = m.location or m.region
        found = gcp.container.get_cluster_output(
            name=m.name,
            location=location,
            project=m.project,
            opts=pulumi.InvokeOutputOptions(parent=parent, provider=gcp_provider),
        )
        server = found.apply(_server)
        ca = found.apply(_ca)
        identifier = pulumi.Output.from_input(f"projects/{m.project}/locations/{location}/clusters/{m.name}")
        cluster_name = found.name
        loc = pulumi.Output.from_input(location)
        resources: list[pulumi.Resource] = []
    else:
        # Autopilot: CPU-only, no node pools to size, Workload Identity and hardened nodes by default.
        cluster = gcp.container.Cluster(
            f"{name}-manager-gke",
            name=m.name,
            project=m.project,
            location=m.region,
            enable_autopilot=True,
            deletion_protection=m.protect,
            release_channel={"channel": m.release_channel.value},
            resource_labels={"gke-tpu-priority": "fleet-manager"},
            opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(protect=m.protect)),
        )
        server = cluster.endpoint.apply(lambda e: f"https://{e}")
        ca = cluster.master_auth.apply(lambda a: a.cluster_ca_certificate)
        identifier = cluster.id
        cluster_name = cluster.name
        loc = cluster.location
        resources = [cluster]
    plain: pulumi.Output[str] = pulumi.Output.all(m.name, server, ca).apply(
        lambda parts: exec_kubeconfig(str(parts[0]), str(parts[1]), parts[2], m.kubernetes_auth)
    )
    kubeconfig: pulumi.Output[str] = pulumi.Output.secret(plain)
    provider = k8s.Provider(
        f"{name}-manager-k8s",
        kubeconfig=kubeconfig,
        cluster_identifier=identifier,
        enable_server_side_apply=True,
        opts=pulumi.ResourceOptions(parent=parent),
    )
    return ManagerCluster(provider, cluster_name, loc, server, kubeconfig, resources)


def manager_kueue_values(config: FleetConfig) -> dict[str, Any]:
    values = copy.deepcopy(kueue_values(sizing_platform(config)))
    # Autopilot (or an existing cluster) has no system pool label: the controllers go where the cluster puts them.
    values["controllerManager"]["nodeSelector"] = {}
    values["managerConfig"]["controllerManagerConfigYaml"] = yaml.safe_dump(
        manager_kueue_config(config), sort_keys=False
    )
    return values


def manager_jobset_values(config: FleetConfig) -> dict[str, Any]:
    values = copy.deepcopy(jobset_values(sizing_platform(config)))
    values["controller"]["nodeSelector"] = {}
    return values


def install_kueue(
    name: str, config: FleetConfig, parent: pulumi.Resource, provider: k8s.Provider, after: list[pulumi.Resource]
) -> tuple[k8s.helm.v4.Chart, pulumi.Resource]:
    """JobSet (its CRD; MultiKueue-managed JobSets are skipped by its controller) then Kueue, on the manager."""
    m = config.manager
    child = pulumi.ResourceOptions(parent=parent, provider=provider, depends_on=after)
    jobset_ns = namespace(f"{name}-manager-jobset-ns", m.jobset.namespace, opts=child)
    kueue_ns = namespace(f"{name}-manager-kueue-ns", m.kueue.namespace, opts=child)
    pc = KubernetesObject(f"{name}-manager-controllers-pc", controllers_priority_class(sizing_platform(config)), child)
    jobset = k8s.helm.v4.Chart(
        f"{name}-manager-jobset",
        chart=chart_location(m.jobset)[0],
        version=chart_location(m.jobset)[1],
        namespace=m.jobset.namespace,
        values=manager_jobset_values(config),
        opts=pulumi.ResourceOptions(
            parent=parent,
            provider=provider,
            depends_on=[*after, jobset_ns, pc],
            transforms=[jobset_controller_priority, KeepCrds(m.protect)],
        ),
    )
    kueue = k8s.helm.v4.Chart(
        f"{name}-manager-kueue",
        chart=chart_location(m.kueue)[0],
        version=chart_location(m.kueue)[1],
        namespace=m.kueue.namespace,
        values=manager_kueue_values(config),
        opts=pulumi.ResourceOptions(
            parent=parent,
            provider=provider,
            depends_on=[*after, kueue_ns, pc, jobset],
            transforms=[KeepCrds(m.protect)],
        ),
    )
    return kueue, kueue_ns
