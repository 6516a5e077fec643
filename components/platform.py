"""TpuPlatform: the whole environment of one stack, composed from the smaller components."""

from typing import TypedDict

import pulumi

from gke_tpu_priority.components.admission import TpuAdmissionPolicy, TpuAdmissionPolicyArgs
from gke_tpu_priority.components.cluster import TpuCluster, TpuClusterArgs
from gke_tpu_priority.components.cluster.existing import existing_cluster
from gke_tpu_priority.components.config import parse_platform_config
from gke_tpu_priority.components.kueue import KueueJobSet, KueueJobSetArgs
from gke_tpu_priority.components.priorities import PriorityTiers, PriorityTiersArgs
from gke_tpu_priority.components.queues import TpuQueues, TpuQueuesArgs
from gke_tpu_priority.components.reconciler import HotswapReconciler, HotswapReconcilerArgs
from gke_tpu_priority.components.schema_types import PlatformConfig as PlatformSettings

TYPE_TOKEN = "gke-tpu-priority:index:TpuPlatform"


class TpuPlatformArgs(TypedDict):
    platform: PlatformSettings
    """The platform settings, in the schema of the `gke-tpu-priority:platform` stack setting (see README)."""


class TpuPlatform(pulumi.ComponentResource):
    """GKE + TPU v6e cluster, Kueue/JobSet, priority tiers and queues, and the hotswap reconciler.

    With `cluster.mode: existing` it creates no GCP resource and installs everything else into that cluster.
    """

    cluster_name: pulumi.Output[str]
    """Name of the GKE cluster."""
    kubeconfig: pulumi.Output[str]
    """Kubeconfig using gke-gcloud-auth-plugin (secret); empty with `cluster.kubeconfigContext`."""
    endpoint: pulumi.Output[str]
    """Control-plane URL the Kubernetes provider talks to; empty with `cluster.kubeconfigContext`."""
    location: pulumi.Output[str]
    """Region (or zone) of the cluster."""
    priority_tiers: pulumi.Output[list[str]]
    """Priority tier names, highest first."""
    cluster_queues: pulumi.Output[list[str]]
    """Kueue ClusterQueue names."""
    local_queues: pulumi.Output[list[str]]
    """Kueue LocalQueues as `namespace/name`."""

    def __init__(self, name: str, args: TpuPlatformArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(TYPE_TOKEN, name, {}, opts)
        raw = args["platform"]
        self.config = parse_platform_config(raw)
        system_nodes: list[pulumi.Resource] = []
        self.cluster: TpuCluster | None = None
        if self.config.cluster.is_existing():
            # No GCP resource: everything below goes into the user's cluster through this provider.
            existing = existing_cluster(name, self.config, self)
            provider = existing.provider
            self.cluster_name = existing.cluster_name
            self.kubeconfig = existing.kubeconfig
            self.endpoint = existing.endpoint
            self.location = existing.location
        else:
            self.cluster = TpuCluster(
                f"{name}-cluster", TpuClusterArgs(platform=raw), pulumi.ResourceOptions(parent=self)
            )
            provider = self.cluster.provider
            # Controllers need schedulable system nodes before their charts can become ready.
            system_nodes = [self.cluster.system_pool]
            self.cluster_name = self.cluster.cluster_name
            self.kubeconfig = self.cluster.kubeconfig
            self.endpoint = self.cluster.endpoint
            self.location = self.cluster.location
        self.provider = provider
        in_cluster = pulumi.ResourceOptions(parent=self, providers=[provider])
        self.kueue = KueueJobSet(
            f"{name}-kueue",
            KueueJobSetArgs(platform=raw),
            pulumi.ResourceOptions.merge(in_cluster, pulumi.ResourceOptions(depends_on=system_nodes)),
        )
        after_kueue = pulumi.ResourceOptions.merge(in_cluster, pulumi.ResourceOptions(depends_on=[self.kueue]))
        self.priorities = PriorityTiers(f"{name}-priorities", PriorityTiersArgs(platform=raw), after_kueue)
        self.queues = TpuQueues(f"{name}-queues", TpuQueuesArgs(platform=raw), after_kueue)
        # After the JobSet CRD it matches, and the tiers and queues its CEL names.
        self.admission = (
            TpuAdmissionPolicy(
                f"{name}-admission",
                TpuAdmissionPolicyArgs(platform=raw),
                pulumi.ResourceOptions.merge(
                    in_cluster, pulumi.ResourceOptions(depends_on=[self.kueue, self.priorities, self.queues])
                ),
            )
            if self.config.admission_policy.enabled
            else None
        )
        self.reconciler = (
            HotswapReconciler(f"{name}-hotswap", HotswapReconcilerArgs(platform=raw), after_kueue)
            if self.config.hotswap.enabled
            else None
        )
        self.priority_tiers = self.priorities.tier_names
        self.cluster_queues = self.queues.cluster_queue_names
        self.local_queues = self.queues.local_queues
        self.register_outputs(
            {
                "cluster_name": self.cluster_name,
                "kubeconfig": self.kubeconfig,
                "endpoint": self.endpoint,
                "location": self.location,
                "priority_tiers": self.priority_tiers,
                "cluster_queues": self.cluster_queues,
                "local_queues": self.local_queues,
            }
        )
