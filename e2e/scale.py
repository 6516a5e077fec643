"""The reconciler at fleet size on the real control plane, apart from I/O: the stack resized to N slices, the
JobSets that fill it, and the figures read from what the reconciler left behind (its pass log, its /proc status).

The run itself (e2e/scale_run.py) brings the dev stack up on the playground with N fake 4x4 slices (four TPU v6e
hosts each), four one-slice JobSets per slice (one runs, three wait in Kueue), then starts the reconciler on the
full fleet: the list it needs before its first pass, its memory, its pass times and the time from a slice fault to
the hold it writes are what a platform team sees at that size.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from gke_tpu_priority.components.workloads.jobset import TpuJobSetSpec, tpu_jobset

JsonObj = dict[str, Any]
PLATFORM_KEY = "gke-tpu-priority:platform"
TOPOLOGY = "4x4"
HOSTS_PER_SLICE = 4
MAX_SLICES_PER_GROUP = 1000
"""A pool group holds at most this many slices (`tpuPools[].slices`); larger fleets are split into groups."""
JOBSETS_PER_SLICE = 4
HIGH_EVERY = 16
"""One JobSet in this many is of the top tier: the preemptors a slice fault makes."""
NAMESPACE = "tpu-training"
QUEUE = "training"
HIGH, LOW = "training-high", "training-low"
IMAGE = "us-docker.pkg.dev/example/train:1"
RESYNC = "1s"
"""A pass a second without events: enough passes in a minute for a p99, as a fleet this size sees from its churn."""
PASS_MESSAGE = "reconcile pass"


def pool_groups(slices: int) -> list[JsonObj]:
    """The stack's TPU pools for a fleet of `slices` 4x4 slices: Spot like the dev stack, at most
    MAX_SLICES_PER_GROUP in each group."""
    if slices < 1:
        raise ValueError(f"slices: {slices} is not a fleet size; give at least 1")
    groups, left, index = [], slices, 0
    while left:
        count = min(left, MAX_SLICES_PER_GROUP)
        groups.append(
            {
                "name": f"scale-{index}",
                "topology": TOPOLOGY,
                "slices": count,
                "zone": "us-east5-b",
                "capacity": {"mode": "spot"},
                "scaleToZero": True,
            }
        )
        left, index = left - count, index + 1
    return groups


def scale_stack_config(stack_config: JsonObj, slices: int) -> JsonObj:
    """The stack's configuration (`load_stack_config`'s mapping) with its TPU pools replaced by `slices` 4x4 slices
    and one reconciler replica that passes every RESYNC: the figures are one process's, and a standby would only
    double the list."""
    config = copy.deepcopy(stack_config)
    platform = config[PLATFORM_KEY]
    platform["tpuPools"] = pool_groups(slices)
    hotswap = platform.setdefault("hotswap", {})
    hotswap["replicas"] = 1
    hotswap.setdefault("settings", {})["resyncPeriod"] = RESYNC
    return config


def _jobset(name: str, priority: str) -> JsonObj:
    spec = TpuJobSetSpec(name=name, namespace=NAMESPACE, queue=QUEUE, priority=priority, topology=TOPOLOGY, image=IMAGE)
    return tpu_jobset(spec)


@dataclass(frozen=True)
class Workloads:
    """What fills the fleet: the top-tier JobSets (submitted first, so they hold slices before the rest compete)
    and the others, four per slice in all."""

    high: list[JsonObj]
    low: list[JsonObj]

    @property
    def all(self) -> list[JsonObj]:
        return [*self.high, *self.low]


def scale_jobsets(slices: int) -> Workloads:
    """JOBSETS_PER_SLICE one-slice JobSets per slice, one in HIGH_EVERY of the top tier (at least one)."""
    total = slices * JOBSETS_PER_SLICE
    highs = max(1, total // HIGH_EVERY)
    high = [_jobset(f"high-{i:05d}", HIGH) for i in range(highs)]
    low = [_jobset(f"low-{i:05d}", LOW) for i in range(total - highs)]
    return Workloads(high, low)


def running_count(slices: int) -> int:
    """JobSets that run once the fleet is full: one per slice."""
    return slices


# ---- the figures ------------------------------------------------------------------------------------------------


def pass_seconds(log_lines: Iterable[str]) -> list[float]:
    """The `seconds` of every `reconcile pass` line of the reconciler's JSON log, in order."""
    found = []
    for line in log_lines:
        if PASS_MESSAGE not in line:
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if (
            isinstance(entry, dict)
            and entry.get("msg") == PASS_MESSAGE
            and isinstance(entry.get("seconds"), int | float)
        ):
            found.append(float(entry["seconds"]))
    return found


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100), nearest rank: a figure that some pass actually took."""
    if not values:
        raise ValueError("no values")
    if not 0 <= q <= 100:
        raise ValueError(f"q: {q} is not a percentile; give 0 to 100")
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def peak_rss_mib(proc_status: str) -> float:
    """VmHWM (the resident set's high-water mark) of a /proc/<pid>/status text, in MiB."""
    for line in proc_status.splitlines():
        if line.startswith("VmHWM:"):
            kib = int(line.split()[1])
            return round(kib / 1024, 1)
    raise ValueError("no VmHWM line: not a /proc/<pid>/status text")


@dataclass(frozen=True)
class ScalePoint:
    """One fleet size's figures on the real control plane."""

    slices: int
    nodes: int
    jobsets: int
    pods: int
    list_s: float
    """From the reconciler's start to its /readyz: every informer listed and watching."""
    peak_mb: float
    passes: int
    p50_ms: float
    p99_ms: float
    fault_to_hold_s: float
    """From a host failure under a top-tier JobSet to a victim's Workload held (spec.active=false)."""

    def as_report(self) -> JsonObj:
        return asdict(self)


def point(
    slices: int,
    jobsets: int,
    pods: int,
    list_s: float,
    peak_mb: float,
    seconds: Sequence[float],
    fault_to_hold_s: float,
) -> ScalePoint:
    return ScalePoint(
        slices=slices,
        nodes=slices * HOSTS_PER_SLICE,
        jobsets=jobsets,
        pods=pods,
        list_s=round(list_s, 2),
        peak_mb=peak_mb,
        passes=len(seconds),
        p50_ms=round(percentile(seconds, 50) * 1000, 1),
        p99_ms=round(percentile(seconds, 99) * 1000, 1),
        fault_to_hold_s=round(fault_to_hold_s, 2),
    )


def synthetic_row(bench: JsonObj, slices: int) -> JsonObj | None:
    """The bench's synthetic planner-scaling row of the same size (docs/results/bench.json), if it has one."""
    for row in bench.get("planner_scaling", []):
        if row.get("slices") == slices:
            found: JsonObj = row
            return found
    return None


def beside_synthetic(points: Sequence[ScalePoint], bench_path: Path) -> list[JsonObj]:
    """Each real point with the synthetic row of its size: the same reconciler code on objects it listed from a real
    API server, against objects built in memory."""
    bench = json.loads(bench_path.read_text()) if bench_path.is_file() else {}
    rows = []
    for p in points:
        synthetic = synthetic_row(bench, p.slices)
        rows.append(
            {
                **p.as_report(),
                "synthetic": None
                if synthetic is None
                else {k: synthetic.get(k) for k in ("jobsets", "pods", "list_s", "peak_mb", "p50_ms", "p99_ms")},
            }
        )
    return rows
