"""The components this package serves to other Pulumi languages, and the provider entry point."""

import sys
from pathlib import Path

from pulumi import ComponentResource

PACKAGE_NAME = "gke-tpu-priority"


def hosted_components() -> list[type[ComponentResource]]:
    from components.admission import TpuAdmissionPolicy
    from components.cluster import TpuCluster
    from components.fleet import TpuFleet
    from components.kueue import KueueJobSet
    from components.platform import TpuPlatform
    from components.priorities import PriorityTiers
    from components.queues import TpuQueues
    from components.reconciler import HotswapReconciler
    from components.workloads import TpuJobSet

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


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    main()
