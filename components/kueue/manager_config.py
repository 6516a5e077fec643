"""Kueue's manager configuration (config.kueue.x-k8s.io/v1beta2) and controller sizing, from stack config."""

from __future__ import annotations

import math
from typing import Any

from gke_tpu_priority.components.config import PlatformConfig

KUEUE_JOBSET_FRAMEWORK = "jobset.x-k8s.io/jobset"


def fleet_slices(config: PlatformConfig) -> int:
    return sum(g.slices for g in config.tpu_pools)


def controller_resources(slices: int) -> dict[str, dict[str, str]]:
    """Requests grow with the fleet: Kueue and JobSet keep every Workload, Job and Pod of it in memory."""
    steps = max(0, math.ceil(slices / 64) - 1)
    cpu_m = 500 + 250 * steps
    memory_mi = 512 + 256 * steps
    return {
        "requests": {"cpu": f"{cpu_m}m", "memory": f"{memory_mi}Mi"},
        "limits": {"cpu": f"{2 * cpu_m}m", "memory": f"{2 * memory_mi}Mi"},
    }


def client_connection(slices: int) -> dict[str, int]:
    qps = min(500, 50 + 10 * math.ceil(slices / 32))
    return {"qps": qps, "burst": 2 * qps}


def kueue_manager_config(config: PlatformConfig) -> dict[str, Any]:
    kueue = config.kueue
    wait = kueue.wait_for_pods_ready
    requeuing: dict[str, Any] = {
        "timestamp": "Eviction",
        "backoffBaseSeconds": wait.backoff_base_seconds,
        "backoffMaxSeconds": wait.backoff_max_seconds,
    }
    if wait.backoff_limit_count is not None:
        requeuing["backoffLimitCount"] = wait.backoff_limit_count
    slices = fleet_slices(config)
    # The chart replaces its default config wholesale with this one, so health, metrics, webhook and leader
    # election are restated here (dropping `health` breaks the chart's probes).
    manager: dict[str, Any] = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "health": {"healthProbeBindAddress": ":8081"},
        "metrics": {"bindAddress": ":8443", "enableClusterQueueResources": True},
        "webhook": {"port": 9443},
        "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
        "controller": {
            "groupKindConcurrency": {
                "Job.batch": 5,
                "Pod": 5,
                "Workload.kueue.x-k8s.io": 5,
                "LocalQueue.kueue.x-k8s.io": 1,
                "ClusterQueue.kueue.x-k8s.io": 1,
                "ResourceFlavor.kueue.x-k8s.io": 1,
            }
        },
        "clientConnection": client_connection(slices),
        # Only jobs that name a queue are Kueue's; everything else (system pods) schedules as usual.
        "manageJobsWithoutQueueName": False,
        "waitForPodsReady": {
            "timeout": wait.timeout,
            "recoveryTimeout": wait.recovery_timeout,
            "blockAdmission": wait.block_admission,
            "requeuingStrategy": requeuing,
        },
        "integrations": {"frameworks": [KUEUE_JOBSET_FRAMEWORK, "batch/job"]},
        "resources": {"excludeResourcePrefixes": list(kueue.exclude_resource_prefixes)},
    }
    if config.fair_sharing:
        manager["fairSharing"] = {"preemptionStrategies": [s.value for s in kueue.preemption_strategies]}
    return manager
