"""The reconciler's container resources, sized from the fleet as Kueue's and JobSet's are.

Its memory is the typed caches (one Node per TPU host, one pod per host in use, four JobSets and Workloads per slice
in the benchmark's fleet) plus one pass's snapshot and plan; `make bench` measures the peak resident memory of the
process from raw LIST pages at 1,024 / 4,096 / 16,384 slices (docs/benchmarks.md, "Reconciler scaling"), and the
default leaves at least half as much again. The process plans on one thread: more than one core buys nothing, but
a CPU limit of a quarter core stretched a 40 ms pass to 160 ms of wall time (CFS throttling), during which no watch
is drained and the Lease is not renewed; the limit is therefore one core at any size and the request grows.
"""

from __future__ import annotations

import math

from gke_tpu_priority.components.config import PlatformConfig

MEMORY_BASE_MI = 256
"""The interpreter, the Kubernetes client, aiohttp and prometheus: about 90 MiB resident before any object."""
MEMORY_PER_1024_SLICES_MI = 128
"""Caches and one pass per 1,024 slices (measured: about 40-60 MiB), with headroom for relists and bursts."""
CPU_LIMIT_M = 1000


def reconciler_resources(config: PlatformConfig) -> dict[str, dict[str, str]]:
    """Requests and limits of the reconciler container: `hotswap.resources` where set, else sized from the fleet."""
    slices = sum(g.slices for g in config.tpu_pools)
    steps = max(1, math.ceil(slices / 1024))
    memory = config.hotswap.resources.memory or f"{MEMORY_BASE_MI + MEMORY_PER_1024_SLICES_MI * steps}Mi"
    cpu_request = config.hotswap.resources.cpu or f"{min(CPU_LIMIT_M, 250 * steps)}m"
    cpu_limit = config.hotswap.resources.cpu or f"{CPU_LIMIT_M}m"
    # Memory request == limit: the caches are not optional, an overcommitted node would OOM-kill the leader.
    return {"requests": {"cpu": cpu_request, "memory": memory}, "limits": {"cpu": cpu_limit, "memory": memory}}
