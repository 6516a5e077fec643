"""What a run measures, and the per-policy summary that goes into hotswap.json."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (numpy's default method); NaN when there are no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


@dataclass
class Recorder:
    """Counters the simulator updates as events happen."""

    high_threshold: int
    mttr_high_s: list[float] = field(default_factory=list)
    mttr_all_s: list[float] = field(default_factory=list)
    mttr_high_lasting_s: list[float] = field(default_factory=list)
    """MTTR of high-priority incidents whose repair outlasted detection and the JobSet's own restart: the slice is
    not back when the new attempt needs it, so something must move (the incidents hotswap is for)."""
    high_incidents: list[tuple[float, float, str]] = field(default_factory=list)
    """(fault, all pods of the new attempt Running, JobSet name) per recovered high-priority incident."""
    incidents_high: int = 0
    incidents_all: int = 0
    incidents_aborted: int = 0  # job evicted / finished / failed before recovering
    victims: int = 0  # (job, attempt) disrupted by the policy (kube-scheduler preemption or hold)
    partial_preemptions: int = 0  # pod preemptions that left other pods of the child Job on the slice
    pod_preemptions: int = 0
    permanent_failures: int = 0  # JobSets Failed with ReachedMaxRestarts
    permanent_victim_failures: int = 0  # ... of which had been a policy victim
    victim_downtime_s: list[float] = field(default_factory=list)
    victim_stale_admitted_s: float = 0.0  # victim admitted in Kueue while its pods could not run
    holds: int = 0
    fence_holds: dict[str, int] = field(default_factory=dict)
    """Admission-fence holds per operation (op id): the fence's cost per incident."""
    ops: set[str] = field(default_factory=set)
    """Operations that held at least one workload."""
    kueue_preemptions: int = 0  # admission-time whole-Workload preemptions (all policies)
    pods_ready_evictions: int = 0  # waitForPodsReady timeouts
    releases: int = 0
    hold_s: list[float] = field(default_factory=list)
    freed_idle_slice_s: float = 0.0  # slices vacated by a policy eviction, then left empty
    idle_with_backlog_slice_s: float = 0.0
    productive_slice_s: float = 0.0
    high_run_s: float = 0.0
    high_lost_s: float = 0.0
    finished: dict[str, int] = field(default_factory=dict)
    planner_passes: int = 0
    planner_ms: list[float] = field(default_factory=list)

    def is_high(self, priority: int) -> bool:
        return priority >= self.high_threshold


def _round(x: float, digits: int = 3) -> float:
    return x if math.isnan(x) else round(x, digits)


def summarise(
    rec: Recorder,
    *,
    slices: int,
    horizon_s: float,
    high_population: int,
    lost_victims: int,
    end_states: dict[str, int],
) -> dict[str, Any]:
    """The per-policy block of hotswap.json (contract keys first, then extras)."""
    m = rec.mttr_high_s
    capacity = slices * horizon_s
    high_capacity = max(high_population, 1) * horizon_s
    return {
        "incidents": rec.incidents_high,
        "mttr_s": {
            "p50": _round(percentile(m, 50)),
            "p95": _round(percentile(m, 95)),
            "p99": _round(percentile(m, 99)),
            "mean": _round(sum(m) / len(m)) if m else math.nan,
            "max": _round(max(m)) if m else math.nan,
            "n": len(m),
        },
        "mttr_lasting_s": _mttr_block(rec.mttr_high_lasting_s),
        "lost_victims": lost_victims,
        "partial_preemptions": rec.partial_preemptions,
        "permanent_victim_failures": rec.permanent_victim_failures,
        "victims_per_incident": _round(rec.victims / rec.incidents_all) if rec.incidents_all else 0.0,
        "utilisation": _round(rec.productive_slice_s / capacity, 5),
        "high_goodput": _round((rec.high_run_s - rec.high_lost_s) / high_capacity, 5),
        "incidents_all_priorities": rec.incidents_all,
        "incidents_aborted": rec.incidents_aborted,
        "mttr_all_priorities_s": {
            "p50": _round(percentile(rec.mttr_all_s, 50)),
            "p95": _round(percentile(rec.mttr_all_s, 95)),
            "p99": _round(percentile(rec.mttr_all_s, 99)),
        },
        "victims": rec.victims,
        "pod_preemptions": rec.pod_preemptions,
        "permanent_failures": rec.permanent_failures,
        "victim_downtime_s": {
            "p50": _round(percentile(rec.victim_downtime_s, 50)),
            "p95": _round(percentile(rec.victim_downtime_s, 95)),
            "n": len(rec.victim_downtime_s),
        },
        "victim_stale_admission_h": _round(rec.victim_stale_admitted_s / 3600.0),
        "kueue_preemptions": rec.kueue_preemptions,
        "pods_ready_evictions": rec.pods_ready_evictions,
        "holds": rec.holds,
        "fence_holds": sum(rec.fence_holds.values()),
        "fence_holds_per_op": _per_op(rec.fence_holds, len(rec.ops)),
        "ops_holding": len(rec.ops),
        "fence_hold_samples": sorted(rec.fence_holds.values()),
        "releases": rec.releases,
        "victim_hold_s": {
            "p50": _round(percentile(rec.hold_s, 50)),
            "p95": _round(percentile(rec.hold_s, 95)),
            "max": _round(max(rec.hold_s)) if rec.hold_s else math.nan,
        },
        "freed_idle_slice_h": _round(rec.freed_idle_slice_s / 3600.0),
        "idle_with_backlog_slice_h": _round(rec.idle_with_backlog_slice_s / 3600.0),
        "planner_passes": rec.planner_passes,
        "end_states": end_states,
        "mttr_samples_s": [round(x, 2) for x in m],
        "mttr_lasting_samples_s": [round(x, 2) for x in rec.mttr_high_lasting_s],
    }


def _per_op(fence_holds: dict[str, int] | Sequence[int], ops: int) -> dict[str, float]:
    """Fence holds per operation that held anything (ops with no fence hold count as 0)."""
    counts = list(fence_holds.values()) if isinstance(fence_holds, dict) else list(fence_holds)
    counts += [0] * max(ops - len(counts), 0)
    return {
        "mean": _round(sum(counts) / len(counts)) if counts else 0.0,
        "p95": _round(percentile(counts, 95)) if counts else 0.0,
        "max": max(counts, default=0),
    }


def _mttr_block(samples: Sequence[float]) -> dict[str, float]:
    return {
        "p50": _round(percentile(samples, 50)),
        "p95": _round(percentile(samples, 95)),
        "p99": _round(percentile(samples, 99)),
        "n": len(samples),
    }


_SUMMED = (
    "incidents",
    "lost_victims",
    "partial_preemptions",
    "permanent_victim_failures",
    "incidents_all_priorities",
    "incidents_aborted",
    "victims",
    "pod_preemptions",
    "permanent_failures",
    "kueue_preemptions",
    "pods_ready_evictions",
    "holds",
    "fence_holds",
    "ops_holding",
    "releases",
    "planner_passes",
)
_AVERAGED = (
    "utilisation",
    "high_goodput",
    "victim_stale_admission_h",
    "freed_idle_slice_h",
    "idle_with_backlog_slice_h",
)


def pool(per_seed: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One policy's summaries over several seeds: counts summed, rates averaged, percentiles over all samples."""
    samples = [x for s in per_seed for x in s["mttr_samples_s"]]
    lasting = [x for s in per_seed for x in s["mttr_lasting_samples_s"]]
    incidents_all = sum(s["incidents_all_priorities"] for s in per_seed)
    victims = sum(s["victims"] for s in per_seed)
    pooled: dict[str, Any] = {
        "mttr_s": _mttr_block(samples)
        | {
            "mean": _round(sum(samples) / len(samples)) if samples else math.nan,
            "max": _round(max(samples)) if samples else math.nan,
        },
        "mttr_lasting_s": _mttr_block(lasting),
        "victims_per_incident": _round(victims / incidents_all) if incidents_all else 0.0,
        "mttr_samples_s": samples,
        "mttr_lasting_samples_s": lasting,
        "fence_hold_samples": sorted(x for s in per_seed for x in s["fence_hold_samples"]),
    }
    for key in _SUMMED:
        pooled[key] = sum(s[key] for s in per_seed)
    for key in _AVERAGED:
        pooled[key] = _round(sum(s[key] for s in per_seed) / len(per_seed), 5)
    pooled["fence_holds_per_op"] = _per_op(pooled["fence_hold_samples"], pooled["ops_holding"])
    return pooled
