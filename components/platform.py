"""TpuPlatform: the whole environment of one stack, composed from the smaller components."""

from __future__ import annotations

from typing import Any, TypedDict

import pulumi

from components.cluster import TpuCluster, TpuClusterArgs
from components.config import parse_platform_config

TYPE_TOKEN = "gke-tpu-priority:index:TpuPlatform"


class TpuPlatformArgs(TypedDict):
    platform: dict[str, Any]
    """The platform settings, in the schema of the `gke-tpu-priority:platform` stack setting (see README)."""


class TpuPlatform(pulumi.ComponentResource):
    """GKE + TPU v6e cluster, Kueue/JobSet, priority tiers and queues, and the hotswap reconciler."""

    def __init__(self, name: str, args: TpuPlatformArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(TYPE_TOKEN, name, {}, opts)
        config = parse_platform_config(args["platform"])
        self.config = config
        self.cluster = TpuCluster(
            f"{name}-cluster", TpuClusterArgs(platform=args["platform"]), pulumi.ResourceOptions(parent=self)
        )
        self.register_outputs({"clusterName": self.cluster.cluster_name})
