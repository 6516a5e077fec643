"""TpuPlatform: the whole environment of one stack, composed from the smaller components."""

from __future__ import annotations

from typing import Any, TypedDict

import pulumi

from components.cluster import TpuCluster, TpuClusterArgs
from components.config import parse_platform_config
from components.kueue import KueueJobSet, KueueJobSetArgs
from components.priorities import PriorityTiers, PriorityTiersArgs
from components.queues import TpuQueues, TpuQueuesArgs
from components.reconciler import HotswapReconciler, HotswapReconcilerArgs

TYPE_TOKEN = "gke-tpu-priority:index:TpuPlatform"


class TpuPlatformArgs(TypedDict):
    platform: dict[str, Any]
    """The platform settings, in the schema of the `gke-tpu-priority:platform` stack setting (see README)."""


class TpuPlatform(pulumi.ComponentResource):
    """GKE + TPU v6e cluster, Kueue/JobSet, priority tiers and queues, and the hotswap reconciler."""

    def __init__(self, name: str, args: TpuPlatformArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(TYPE_TOKEN, name, {}, opts)
        raw = args["platform"]
        self.config = parse_platform_config(raw)
        self.cluster = TpuCluster(f"{name}-cluster", TpuClusterArgs(platform=raw), pulumi.ResourceOptions(parent=self))
        in_cluster = pulumi.ResourceOptions(parent=self, providers=[self.cluster.provider])
        # Controllers need schedulable system nodes before their charts can become ready.
        self.kueue = KueueJobSet(
            f"{name}-kueue",
            KueueJobSetArgs(platform=raw),
            pulumi.ResourceOptions.merge(in_cluster, pulumi.ResourceOptions(depends_on=[self.cluster.system_pool])),
        )
        after_kueue = pulumi.ResourceOptions.merge(in_cluster, pulumi.ResourceOptions(depends_on=[self.kueue]))
        self.priorities = PriorityTiers(f"{name}-priorities", PriorityTiersArgs(platform=raw), after_kueue)
        self.queues = TpuQueues(f"{name}-queues", TpuQueuesArgs(platform=raw), after_kueue)
        self.reconciler = (
            HotswapReconciler(f"{name}-hotswap", HotswapReconcilerArgs(platform=raw), after_kueue)
            if self.config.hotswap.enabled
            else None
        )
        self.register_outputs(
            {
                "clusterName": self.cluster.cluster_name,
                "clusterQueues": self.queues.cluster_queue_names,
                "localQueues": self.queues.local_queues,
                "priorityTiers": self.priorities.tier_names,
            }
        )
