"""`python -m sim.passbench LISTING NOW PASSES EVENTS`: one reconciler process's
passes, measured.

Run by sim/scaling.py in a fresh interpreter so the peak resident memory is the reconciler's alone. It
imports what the reconciler process imports (the controller, the Kubernetes client, aiohttp, prometheus), converts
every listed object into the same caches as the reconciler's informers, page by page as `Informer._relist` does,
then measures PASSES passes; each applies EVENTS watch events (raw JSON lines, decoded and applied as the watch
does), assembles the snapshot and plans, with the controller's GC settings. Prints one JSON object.
"""

from __future__ import annotations

import gc
import json
import resource
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import gke_tpu_priority.hotswap.controller  # noqa: F401  (its imports are part of the process's memory)
from gke_tpu_priority.hotswap.gctuning import collection_deferred, freeze_long_lived
from gke_tpu_priority.hotswap.kube.snapshot import SnapshotBuilder, trimmed
from gke_tpu_priority.hotswap.kube.store import Store, object_key
from gke_tpu_priority.hotswap.planner import plan
from sim.metrics import percentile
from sim.policies.reconciler import ReconcilerPolicy


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kilobytes on Linux


def main(listing: Path, now: datetime, passes: int, events: int) -> dict[str, Any]:
    config = ReconcilerPolicy().config
    builder = SnapshotBuilder(attribution_window=config.attribution_window, clock=lambda: now)
    stores: dict[str, Store[Any]] = {
        "nodes": Store("nodes", builder.node_value),
        "pods": Store("pods", builder.pod_value),
        "jobsets": Store("jobsets", builder.jobset_value),
        "workloads": Store("workloads", builder.workload_value),
        "clusterqueues": Store("clusterqueues", trimmed),
    }
    stores["nodes"].listeners.append(builder.on_node_event)
    stores["pods"].listeners.append(builder.on_pod_event)
    baseline = rss_mb()
    fresh: dict[str, dict[str, Any]] = {kind: {} for kind in stores}
    samples: list[bytes] = []  # raw watch events replayed by the passes: pods and Workloads as last listed
    started = time.perf_counter()
    with listing.open("rb") as lines:
        for line in lines:
            page = json.loads(line)
            kind, store = page["kind"], stores[page["kind"]]
            for item in page["items"]:
                key = object_key(item)
                value = store.convert(item) if key is not None else None
                if key is not None and value is not None:
                    fresh[kind][key] = value
                if kind in ("pods", "workloads") and len(samples) < 4 * events and len(fresh[kind]) % 7 == 0:
                    samples.append(json.dumps({"type": "MODIFIED", "object": item}).encode())
            del page
    for kind, store in stores.items():
        store.replace(fresh[kind])
    del fresh

    list_s = time.perf_counter() - started
    freeze_long_lived()  # as the controller does once its caches are synced
    synced_rss = rss_mb()

    def apply(line: bytes) -> None:
        event = json.loads(line)
        obj = event["object"]
        kind = "pods" if obj.get("kind") == "Pod" else "workloads"
        key = object_key(obj)
        if key is not None:
            stores[kind].apply(event["type"], key, obj)

    pass_ms, cpu_ms, plan_ms, plan_cpu_ms, event_us = [], [], [], [], []
    actions = 0
    for n in range(passes):
        t0, c0 = time.perf_counter(), time.process_time()
        for i in range(events):
            apply(samples[(n * events + i) % len(samples)])
        event_us.append((time.process_time() - c0) * 1e6 / max(1, events))
        with collection_deferred():
            snapshot = builder.assemble(
                nodes=stores["nodes"].values(),
                pods=stores["pods"].values(),
                jobsets=stores["jobsets"].values(),
                workloads=stores["workloads"].values(),
                cluster_queues=stores["clusterqueues"].values(),
            )
            p0, q0 = time.perf_counter(), time.process_time()
            result = plan(snapshot, now, config)
            p1, q1 = time.perf_counter(), time.process_time()
        pass_ms.append((time.perf_counter() - t0) * 1000.0)
        # CPU time as well: on a shared machine the wall time mostly measures the other processes.
        cpu_ms.append((time.process_time() - c0) * 1000.0)
        plan_ms.append((p1 - p0) * 1000.0)
        plan_cpu_ms.append((q1 - q0) * 1000.0)
        actions = len(result.actions)
        del snapshot, result
    gc.unfreeze()
    return {
        "passes": passes,
        "events_per_pass": events,
        "p50_ms": round(percentile(pass_ms, 50), 3),
        "p99_ms": round(percentile(pass_ms, 99), 3),
        "cpu_p50_ms": round(percentile(cpu_ms, 50), 3),
        "cpu_p99_ms": round(percentile(cpu_ms, 99), 3),
        "plan_p50_ms": round(percentile(plan_ms, 50), 3),
        "plan_p99_ms": round(percentile(plan_ms, 99), 3),
        "plan_cpu_p50_ms": round(percentile(plan_cpu_ms, 50), 3),
        "plan_cpu_p99_ms": round(percentile(plan_cpu_ms, 99), 3),
        "event_us": round(percentile(event_us, 50), 1),
        "list_s": round(list_s, 3),
        "baseline_rss_mb": round(baseline, 1),
        "synced_rss_mb": round(synced_rss, 1),
        "peak_mb": round(peak_rss_mb(), 1),
        "actions_last_pass": actions,
    }


if __name__ == "__main__":
    path, moment, count, burst = sys.argv[1:5]
    print(json.dumps(main(Path(path), datetime.fromisoformat(moment), int(count), int(burst))))
