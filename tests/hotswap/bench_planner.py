"""Measure plan() on a 1,024-slice / 4,096-JobSet snapshot (not a test; run: python -m tests.hotswap.bench_planner)."""

from __future__ import annotations

import random
import statistics
import time
from datetime import timedelta

from hotswap.config import HotswapConfig
from hotswap.planner import plan
from tests.hotswap.builders import T0, Fleet, JobSetBuilder, WorkloadBuilder

SLICES = 1024
JOBSETS = 4096
FAILED = 20


def build(seed: int = 7) -> Fleet:
    rng = random.Random(seed)
    pools = [f"pool-{i:04d}" for i in range(SLICES)]
    fleet = Fleet().slices(*pools)
    for q in range(16):
        fleet.queue(f"cq-{q}", f"cohort-{q % 4}")
    free = list(pools)
    running = []
    for j in range(JOBSETS):
        size = rng.choice([1, 1, 1, 2, 2, 4])
        priority = rng.choice([10, 100, 1000, 10000])
        queue = f"cq-{rng.randrange(16)}"
        builder = JobSetBuilder(f"ns-{j % 32}", f"js-{j:05d}").replicated_job("w", size)
        if len(free) >= size:
            on, free = free[:size], free[size:]
            running.append((fleet.run(builder, on, priority, queue), on))
        else:  # queued in Kueue: Workload not admitted, no pods
            js = builder.pod_priority(priority).obj()
            fleet.jobsets[js.uid] = js
            wl = WorkloadBuilder.for_jobset(js).priority(priority).obj()
            fleet.workloads[wl.uid] = wl
    for js, on in rng.sample(running, FAILED):
        pool = on[0]
        fleet.fail(pool, T0 - timedelta(minutes=2)).evict_pods(js, pool, T0 - timedelta(minutes=2))
    return fleet


def main() -> None:
    snapshot = build().snapshot()
    config = HotswapConfig(max_victims_per_pass=64)
    samples = []
    result = plan(snapshot, T0, config)
    for _ in range(30):
        start = time.perf_counter()
        result = plan(snapshot, T0, config)
        samples.append((time.perf_counter() - start) * 1000)
    samples.sort()
    print(
        f"nodes={len(snapshot.nodes)} pods={len(snapshot.pods)} jobsets={len(snapshot.jobsets)} "
        f"workloads={len(snapshot.workloads)}"
    )
    print(f"diagnostics: {result.diagnostics}")
    print(
        f"plan ms: p50={statistics.median(samples):.1f} p99={samples[int(len(samples) * 0.99) - 1]:.1f} "
        f"max={samples[-1]:.1f}"
    )


if __name__ == "__main__":
    main()
