"""A fleet consumer: a CPU-only MultiKueue manager dispatching TPU v6e JobSets to two regional TPU platforms."""

import pulumi

from gke_tpu_priority.components.fleet import TpuFleet, TpuFleetArgs

project = pulumi.Config("gcp").require("project")


def worker(name: str, region: str, zone: str, slices: int, capacity: dict[str, object]) -> dict[str, object]:
    """One worker: a whole TpuPlatform (its own GKE cluster, Kueue, JobSet, tiers, queues, reconciler)."""
    return {
        "name": name,
        "platform": {
            "project": project,
            "region": region,
            "cluster": {"name": f"tpu-{name}"},
            "tpuPools": [
                {"name": f"{name}-4x4", "topology": "4x4", "slices": slices, "zone": zone, "capacity": capacity}
            ],
        },
    }


fleet = TpuFleet(
    "fleet",
    TpuFleetArgs(
        fleet={
            # The manager: GKE Autopilot, no TPUs; teams submit JobSets here and MultiKueue dispatches them.
            "manager": {"project": project, "region": "us-central1", "name": "tpu-fleet-manager"},
            # Incremental: try the first worker, add the next one each round until one admits the workload.
            "multiKueue": {"dispatcher": "Incremental", "incrementalStepSize": 1, "workerLostTimeout": "15m"},
            # Dispatch preference order: the reservation first, Spot capacity in a second region after it.
            "workers": [
                worker(
                    "east5",
                    "us-east5",
                    "us-east5-b",
                    4,
                    {"mode": "reservation", "reservation": {"name": "v6e-campaign"}},
                ),
                worker("west4", "europe-west4", "europe-west4-a", 2, {"mode": "spot"}),
            ],
        }
    ),
)

pulumi.export("managerClusterName", fleet.manager_cluster_name)
pulumi.export("managerKubeconfig", fleet.manager_kubeconfig)  # a secret: `pulumi stack output --show-secrets`
pulumi.export("workerClusters", fleet.worker_clusters)
pulumi.export("dispatchOrder", fleet.dispatch_order)
