"""A minimal consumer: one GKE cluster with two TPU v6e pool groups, Kueue, priority tiers, queues and hotswap."""

import pulumi

from gke_tpu_priority.components.platform import TpuPlatform, TpuPlatformArgs

gcp_config = pulumi.Config("gcp")

platform = TpuPlatform(
    "training",
    TpuPlatformArgs(
        platform={
            "project": gcp_config.require("project"),
            "region": "us-east5",
            "cluster": {"name": "tpu-training", "control_plane_access": "dns"},
            "tpu_pools": [
                # Four 4x4 slices (16 chips each) from a reservation, one node pool per slice.
                {
                    "name": "resv-4x4",
                    "topology": "4x4",
                    "slices": 4,
                    "zone": "us-east5-b",
                    "capacity": {"mode": "reservation", "reservation": {"name": "v6e-campaign"}},
                },
                # Spot single-host slices for opportunistic work; scaled to zero when idle.
                {
                    "name": "spot-2x2",
                    "topology": "2x2",
                    "slices": 4,
                    "zone": "us-east5-b",
                    "capacity": {"mode": "spot"},
                    "scale_to_zero": True,
                },
            ],
        }
    ),
)

pulumi.export("clusterName", platform.cluster_name)
pulumi.export("clusterQueues", platform.cluster_queues)
pulumi.export("localQueues", platform.local_queues)
