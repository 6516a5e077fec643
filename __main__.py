"""The gke-tpu-priority program: stack config → validation → components → a small set of outputs."""

import pulumi

from gke_tpu_priority.components.config import CONFIG_KEY, ConfigError, parse_platform_config
from gke_tpu_priority.components.config.fleet import FLEET_CONFIG_KEY, parse_fleet_config
from gke_tpu_priority.components.platform import TpuPlatform, TpuPlatformArgs

fleet_raw = pulumi.Config().get_object(FLEET_CONFIG_KEY)
if fleet_raw is not None:
    from gke_tpu_priority.components.fleet import TpuFleet, TpuFleetArgs

    try:
        fleet_config = parse_fleet_config(fleet_raw, stack_file=True)
    except ConfigError as error:
        raise pulumi.RunError(str(error)) from None
    fleet = TpuFleet(pulumi.get_stack(), TpuFleetArgs(fleet=fleet_config.model_dump(by_alias=True)))
    pulumi.export("managerClusterName", fleet.manager_cluster_name)
    pulumi.export("managerKubeconfig", fleet.manager_kubeconfig)
    pulumi.export("workerClusters", fleet.worker_clusters)
    pulumi.export("dispatchOrder", fleet.dispatch_order)
else:
    try:
        platform_config = parse_platform_config(pulumi.Config().require_object(CONFIG_KEY), stack_file=True)
    except ConfigError as error:
        raise pulumi.RunError(str(error)) from None

    platform = TpuPlatform(pulumi.get_stack(), TpuPlatformArgs(platform=platform_config.model_dump(by_alias=True)))

    pulumi.export("clusterName", platform.cluster_name)
    pulumi.export("endpoint", platform.endpoint)
    pulumi.export("location", platform.location)
    if platform.cluster is not None:  # `cluster.mode: existing` creates no node pools
        pulumi.export("systemPoolName", platform.cluster.system_pool_name)
        pulumi.export("tpuNodePools", platform.cluster.tpu_node_pool_names)
    pulumi.export("kubeconfig", platform.kubeconfig)
    pulumi.export("priorityTiers", platform.priorities.tier_names)
    pulumi.export("clusterQueues", platform.queues.cluster_queue_names)
    pulumi.export("localQueues", platform.queues.local_queues)
