"""The components this package serves to other Pulumi languages, and the provider entry point."""

from pulumi import ComponentResource

PACKAGE_NAME = "gke-tpu-priority"


def hosted_components() -> list[type[ComponentResource]]:
    from gke_tpu_priority.components.admission import TpuAdmissionPolicy
    from gke_tpu_priority.components.cluster import TpuCluster
    from gke_tpu_priority.components.fleet import TpuFleet
    from gke_tpu_priority.components.kueue import KueueJobSet
    from gke_tpu_priority.components.platform import TpuPlatform
    from gke_tpu_priority.components.priorities import PriorityTiers
    from gke_tpu_priority.components.queues import TpuQueues
    from gke_tpu_priority.components.reconciler import HotswapReconciler
    from gke_tpu_priority.components.workloads import TpuJobSet

    return [
        TpuPlatform,
        TpuCluster,
        KueueJobSet,
        PriorityTiers,
        TpuQueues,
        HotswapReconciler,
        TpuAdmissionPolicy,
        TpuJobSet,
        TpuFleet,
    ]


def main() -> None:
    from pulumi.provider.experimental import component_provider_host

    component_provider_host(components=hosted_components(), name=PACKAGE_NAME)
