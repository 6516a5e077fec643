"""The components alone, in an existing program: Kueue/JobSet, priority tiers and queues on a cluster made elsewhere.

No GCP resource is created. Every component takes the Kubernetes provider through `opts` and hands it to its
children; the settings describe the cluster's TPU node pools so the flavors and quotas match what it has.
"""

import pulumi
import pulumi_kubernetes as k8s

from gke_tpu_priority.components.kueue import KueueJobSet, KueueJobSetArgs
from gke_tpu_priority.components.priorities import PriorityTiers, PriorityTiersArgs
from gke_tpu_priority.components.queues import TpuQueues, TpuQueuesArgs
from gke_tpu_priority.components.schema_types import PlatformConfig

config = pulumi.Config()
cluster = k8s.Provider("xpk-cluster", context=config.require("kubeContext"), enable_server_side_apply=True)

settings: PlatformConfig = {
    "project": pulumi.Config("gcp").require("project"),
    "region": "us-east5",
    "cluster": {"mode": "existing", "name": "xpk-v6e"},
    "tpu_pools": [
        {"name": "v6e-4x8", "topology": "4x8", "slices": 2, "zone": "us-east5-b", "capacity": {"mode": "on-demand"}}
    ],
    "queues": {
        "cluster_queues": [
            {
                "name": "research",
                "namespaces": ["research"],
                "quotas": [{"flavor": "v6e-4x8", "chips": 64}],
            }
        ],
        "local_queues": [{"name": "training", "namespace": "research", "cluster_queue": "research"}],
    },
    # The reconciler is left out here; TpuPlatform with `cluster.mode: existing` deploys it too.
    "hotswap": {"enabled": False},
}

on_cluster = pulumi.ResourceOptions(provider=cluster)
kueue = KueueJobSet("kueue", KueueJobSetArgs(platform=settings), on_cluster)
# Tiers and queues are Kueue objects: they need the CRDs the Kueue chart brings.
after_kueue = pulumi.ResourceOptions(provider=cluster, depends_on=[kueue])
tiers = PriorityTiers("tiers", PriorityTiersArgs(platform=settings), after_kueue)
queues = TpuQueues("queues", TpuQueuesArgs(platform=settings), after_kueue)

pulumi.export("priorityTiers", tiers.tier_names)
pulumi.export("clusterQueues", queues.cluster_queue_names)
pulumi.export("localQueues", queues.local_queues)
