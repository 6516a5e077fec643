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
    # Fleet goodput ledger, in slice-seconds (x chips per slice in the summary). Every healthy slice-second is
    # either occupied (a JobSet's pods hold hosts) or empty; occupied time splits into running (useful or wasted
    # progress) and restart/initialisation; empty time splits by why it is empty. Down time completes the sum.
    useful_slice_s: dict[str, float] = field(default_factory=dict)
    """Per job class: progress kept (up to a checkpoint), completed work, and work in flight at the horizon."""
    high_useful_slice_s: float = 0.0
    wasted_own_slice_s: float = 0.0  # progress since the last checkpoint, lost to the JobSet's own disruption
    wasted_victim_slice_s: float = 0.0  # ... lost by a preemption victim (the policy's or Kueue's)
    wasted_policy_victim_slice_s: float = 0.0  # ... of which the policy's victims (hold / scheduler preemption)
    occupied_slice_s: float = 0.0  # healthy slice with at least one pod bound
    down_slice_s: float = 0.0  # faulted, until repaired
    absent_slice_s: float = 0.0  # queued flex-start capacity with no nodes: not provisioned, so not in the ledger
    reserved_idle_slice_s: float = 0.0  # empty after a policy eviction (held for the preemptor), unused
    idle_queued_slice_s: float = 0.0  # empty while work was waiting (judged when the idle spell ends)
    idle_no_demand_slice_s: float = 0.0  # empty with nothing waiting
    peer_actions: dict[str, int] = field(default_factory=dict)
    """What a policy's own mechanism did, by kind (hero drains, Kueue's NodeFailures evictions and topology
    preemptions, ...): the bench shows that each peer actually acted."""

    def count(self, action: str, n: int = 1) -> None:
        self.peer_actions[action] = self.peer_actions.get(action, 0) + n

    def is_high(self, priority: int) -> bool:
        return priority >= self.high_threshold


def _round(x: float, digits: int = 3) -> float:
    return x if math.isnan(x) else round(x, digits)


def actions(rec: Recorder) -> dict[str, int]:
    """Every act of eviction or preemption in one run, by who did it: Kueue's admission-time preemptions (quota,
    and for a topology-aware Kueue the topology preemptions among them), kube-scheduler's pod preemptions,
    `spec.active=false` holds (the reconciler's, and hero's drain victims), plus what each policy counted itself."""
    out = {
        "kueue_admission_preemptions": rec.kueue_preemptions,
        "kube_scheduler_pod_preemptions": rec.pod_preemptions,
        "holds": rec.holds,
    }
    return out | dict(sorted(rec.peer_actions.items()))


def summarise(
    rec: Recorder,
    *,
    slices: int,
    horizon_s: float,
    high_population: int,
    lost_victims: int,
    end_states: dict[str, int],
    chips_per_slice: int = 16,
) -> dict[str, Any]:
    """The per-policy block of hotswap.json (contract keys first, then extras)."""
    m = rec.mttr_high_s
    capacity = slices * horizon_s - rec.absent_slice_s
    chip_capacity = capacity * chips_per_slice
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
        "actions": actions(rec),
        "victim_hold_s": {
            "p50": _round(percentile(rec.hold_s, 50)),
            "p95": _round(percentile(rec.hold_s, 95)),
            "max": _round(max(rec.hold_s)) if rec.hold_s else math.nan,
        },
        "freed_idle_slice_h": _round(rec.freed_idle_slice_s / 3600.0),
        "idle_with_backlog_slice_h": _round(rec.idle_with_backlog_slice_s / 3600.0),
        "planner_passes": rec.planner_passes,
        "end_states": end_states,
        **goodput_figures(rec, chips_per_slice, chip_capacity),
        "mttr_samples_s": [round(x, 2) for x in m],
        "mttr_lasting_samples_s": [round(x, 2) for x in rec.mttr_high_lasting_s],
    }


def badput_chip_s(rec: Recorder, chips_per_slice: int) -> dict[str, float]:
    """Chip-seconds lost, by cause. With the useful chip-seconds they sum to the provisioned chip-seconds."""
    running = sum(rec.useful_slice_s.values()) + rec.wasted_own_slice_s + rec.wasted_victim_slice_s
    return {
        "own_disruption_wasted_progress": rec.wasted_own_slice_s * chips_per_slice,
        "victim_wasted_progress": rec.wasted_victim_slice_s * chips_per_slice,
        # Occupied but not training: pods pending recreate, starting, or draining (terminating) on the slice.
        "restart_initialisation": max(rec.occupied_slice_s - running, 0.0) * chips_per_slice,
        "idle_while_queued": rec.idle_queued_slice_s * chips_per_slice,
        "reserved_unused": rec.reserved_idle_slice_s * chips_per_slice,
        # Not among the causes but needed for the sum: capacity under repair, and capacity nobody wanted.
        "infrastructure_down": rec.down_slice_s * chips_per_slice,
        "idle_no_demand": rec.idle_no_demand_slice_s * chips_per_slice,
    }


def goodput_figures(rec: Recorder, chips_per_slice: int, chip_capacity: float) -> dict[str, Any]:
    """Fleet goodput (useful chip-time over provisioned chip-time, all priorities), per tier, badput by cause."""
    useful = {name: v * chips_per_slice for name, v in sorted(rec.useful_slice_s.items())}
    cap = max(chip_capacity, 1e-9)
    return {
        "fleet_goodput": _round(sum(useful.values()) / cap, 5),
        "goodput_by_tier": {name: _round(v / cap, 5) for name, v in useful.items()},
        "badput_s": {cause: round(v, 1) for cause, v in badput_chip_s(rec, chips_per_slice).items()},
        "victim_lost_chip_h_per_incident": _round(
            rec.wasted_policy_victim_slice_s * chips_per_slice / 3600.0 / rec.incidents_all, 4
        )
        if rec.incidents_all
        else 0.0,
        "provisioned_chip_s": round(chip_capacity, 1),
        "useful_chip_s_by_tier": {name: round(v, 1) for name, v in useful.items()},
        "high_useful_chip_s": round(rec.high_useful_slice_s * chips_per_slice, 1),
        "policy_victim_lost_chip_s": round(rec.wasted_policy_victim_slice_s * chips_per_slice, 1),
    }


def exchange_rate(gained_chip_s: float, victims_lost_chip_s: float) -> float:
    """High-priority chip-time gained over `none` per chip-time of victims' progress thrown away (NaN for 0/0)."""
    if victims_lost_chip_s <= 0:
        return math.nan if gained_chip_s == 0 else math.copysign(math.inf, gained_chip_s)
    return _round(gained_chip_s / victims_lost_chip_s, 3)


def add_exchange_rates(policies: dict[str, Any]) -> None:
    """`exchange_rate` per policy: high-priority useful chip-time gained over `none` (same seeds, same event
    streams) per chip-time of the policy's victims' progress thrown away."""
    base = policies["none"]["high_useful_chip_s"]
    for stats in policies.values():
        stats["high_gain_over_none_chip_h"] = round((stats["high_useful_chip_s"] - base) / 3600.0, 3)
        stats["exchange_rate"] = exchange_rate(stats["high_useful_chip_s"] - base, stats["policy_victim_lost_chip_s"])


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
    kinds = sorted({k for s in per_seed for k in s.get("actions", {})})
    pooled["actions"] = {k: sum(s.get("actions", {}).get(k, 0) for s in per_seed) for k in kinds}
    pooled |= _pool_goodput(per_seed, incidents_all)
    return pooled


def _pool_goodput(per_seed: Sequence[dict[str, Any]], incidents_all: int) -> dict[str, Any]:
    """Chip-seconds summed over seeds, so pooled goodput is useful over provisioned across all of them."""
    cap = sum(s["provisioned_chip_s"] for s in per_seed)
    tiers = sorted({t for s in per_seed for t in s["useful_chip_s_by_tier"]})
    useful = {t: sum(s["useful_chip_s_by_tier"].get(t, 0.0) for s in per_seed) for t in tiers}
    causes = list(per_seed[0]["badput_s"]) if per_seed else []
    lost = sum(s["policy_victim_lost_chip_s"] for s in per_seed)
    return {
        "fleet_goodput": _round(sum(useful.values()) / cap, 5) if cap else math.nan,
        "goodput_by_tier": {t: _round(v / cap, 5) for t, v in useful.items()} if cap else {},
        "badput_s": {c: round(sum(s["badput_s"][c] for s in per_seed), 1) for c in causes},
        "victim_lost_chip_h_per_incident": _round(lost / 3600.0 / incidents_all, 4) if incidents_all else 0.0,
        "provisioned_chip_s": round(cap, 1),
        "useful_chip_s_by_tier": {t: round(v, 1) for t, v in useful.items()},
        "high_useful_chip_s": round(sum(s["high_useful_chip_s"] for s in per_seed), 1),
        "policy_victim_lost_chip_s": round(lost, 1),
    }
