"""Planner scaling: time per `plan()` pass and peak memory at growing fleet sizes (4 JobSets per slice).

The snapshots come from the simulator itself (a saturated fleet, then a few failed slices past
unhealthyGrace), so the planner sees disrupted preemptors, victims and queued work as in production.
"""

from __future__ import annotations

import gc
import time
import tracemalloc
from typing import Any

from hotswap.gctuning import collection_deferred, freeze_long_lived
from hotswap.planner import plan
from hotswap.sim.metrics import percentile
from hotswap.sim.params import FailureKind, Failures, Fleet, JobClass, Scenario
from hotswap.sim.policies.none import NonePolicy
from hotswap.sim.policies.reconciler import ReconcilerPolicy
from hotswap.sim.simulator import Simulator
from hotswap.sim.snapshot import at


def scaling_scenario(slices: int, seed: int) -> Scenario:
    jobsets = 4 * slices
    high = max(1, slices // 16)
    medium = max(1, slices // 4)
    return Scenario(
        name=f"scaling_{slices}",
        seed=seed,
        horizon_h=1.0,
        fleet=Fleet(slices=slices),
        classes=(
            JobClass(name="high", priority=2_000_000, slices=2, population=high, mean_duration_h=1e4),
            JobClass(name="medium", priority=1_500_000, slices=1, population=medium, mean_duration_h=1e4),
            JobClass(name="low", priority=1_000_000, slices=1, population=jobsets - high - medium, mean_duration_h=1e4),
        ),
        failures=Failures(slice_mtbf_h=1e9),
    )


def measure(slices: int, passes: int, seed: int = 7) -> dict[str, Any]:
    sim = Simulator(scaling_scenario(slices, seed), NonePolicy())
    sim.track_departures = True  # the I/O layer's memory of vanished pods (infra attribution)
    sim.run()  # one hour: the fleet fills up
    failed = max(4, slices // 32)
    for s in sim.slices[:: len(sim.slices) // failed][:failed]:
        sim._fail_now(s, 4 * 3600.0, FailureKind.CRASH)
    sim.loop.run(sim.now + 60.0)
    reconciler = ReconcilerPolicy()
    reconciler.attach(sim)
    snapshot = reconciler.snapshot()
    now = at(sim.now)
    times, cpu_ms, collect_ms = [], [], []
    # As the controller does (hotswap/gctuning.py): the heap that exists once the caches are synced (here: the
    # simulator and the snapshot) is frozen, and each pass runs with collection deferred to its end. The time
    # of a pass includes that young-generation collection.
    freeze_long_lived()
    full_before = gc.get_stats()[2]["collections"]
    try:
        for _ in range(passes):
            started, cpu_started = time.perf_counter(), time.process_time()
            with collection_deferred() as deferred:
                result = plan(snapshot, now, reconciler.config)
            times.append((time.perf_counter() - started) * 1000.0)
            # CPU time as well: on a shared machine the wall time mostly measures the other processes.
            cpu_ms.append((time.process_time() - cpu_started) * 1000.0)
            collect_ms.append(deferred.collect_ms)
        # Full collections would walk the whole unfrozen heap, so they are reported with the times.
        full_collections = gc.get_stats()[2]["collections"] - full_before
    finally:
        gc.unfreeze()
    tracemalloc.start()
    plan(snapshot, now, reconciler.config)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {
        "slices": slices,
        "jobsets": len(snapshot.jobsets),
        "pods": len(snapshot.pods),
        "failed_slices": failed,
        "passes": passes,
        "p50_ms": round(percentile(times, 50), 3),
        "p99_ms": round(percentile(times, 99), 3),
        "cpu_p50_ms": round(percentile(cpu_ms, 50), 3),
        "cpu_p99_ms": round(percentile(cpu_ms, 99), 3),
        "peak_mb": round(peak / 2**20, 3),
        "gc_full_collections": full_collections,
        "gc_after_pass_p99_ms": round(percentile(collect_ms, 99), 3),
        "actions_last_pass": len(result.actions),
    }
