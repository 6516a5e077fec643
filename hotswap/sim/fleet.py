"""A fleet of worker clusters on one clock: hotswap in a MultiKueue fleet, measured (issue 18 item 6).

Each region is a full `Simulator` (its own slices, failures, Kueue and policy instance: the reconciler runs per
worker unchanged), all on one shared `EventLoop`, so time is common and events interleave in one total order.
JobSets come from closed populations defined once for the fleet; `multikueue.Manager` either dispatches them as
the MultiKueue manager does, or pins each to a region picked by hand (`independent`). The random streams are keyed
by the fleet seed and the JobSet's name (durations, its replicas' failure clocks) or by the region (its slices'
own clocks, its storms, its degradations), so both modes and every policy meet the same JobSets and faults.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from functools import partial
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from gke_tpu_priority.hotswap.sim.engine import EventLoop
from gke_tpu_priority.hotswap.sim.metrics import Recorder, percentile, pool
from gke_tpu_priority.hotswap.sim.multikueue import DispatchStats, FleetMode, Manager
from gke_tpu_priority.hotswap.sim.params import HOUR, Failures, Fleet, JobClass, Scenario, Seconds, Timing
from gke_tpu_priority.hotswap.sim.runner import POLICIES
from gke_tpu_priority.hotswap.sim.simulator import Simulator

FLEET_POLICIES = ("none", "scheduler", "reconciler")
"""The policies the fleet benchmark runs: no preemption, GKE's pattern, ours. The others need nothing new from a
fleet and double the run time."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Degradation(_Frozen):
    """A region loses a large share of its slices at once, for hours (a zonal capacity or hardware event)."""

    region: int = Field(0, ge=0, description="Index of the degraded region in `FleetScenario.regions`.")
    share: float = Field(0.75, gt=0.0, le=1.0, description="Share of the region's slices that fail together.")
    first_at_h: float = Field(24.0, ge=0.0, description="Hour of the first degradation.")
    every_h: float = Field(96.0, gt=0.0, description="Hours between degradations.")
    repair_low_h: float = Field(2.0, gt=0.0, description="Shortest repair of a degraded slice, hours. [U]")
    repair_high_h: float = Field(6.0, gt=0.0, description="Longest repair (uniform in between), hours. [U]")

    @model_validator(mode="after")
    def _ordered(self) -> Degradation:
        if self.repair_high_h < self.repair_low_h:
            raise ValueError(f"repair_high_h={self.repair_high_h} must be >= repair_low_h={self.repair_low_h}")
        return self


def _default_fleet_classes() -> tuple[JobClass, ...]:
    return (
        JobClass(name="high", priority=2_000_000, slices=2, population=9, mean_duration_h=72.0),
        JobClass(name="medium", priority=1_500_000, slices=1, population=12, mean_duration_h=24.0),
        JobClass(name="low", priority=1_000_000, slices=1, population=24, mean_duration_h=12.0),
    )


class FleetScenario(_Frozen):
    """A MultiKueue fleet: 2-3 worker regions sharing job classes submitted fleet-wide."""

    name: str = Field("fleet", description="Scenario name used in reports.")
    seed: int = Field(1, description="Seed of every random stream; identical across modes and policies.")
    horizon_h: float = Field(2000.0, gt=0.0, description="Simulated time, hours.")
    regions: tuple[Fleet, ...] = Field(
        default_factory=lambda: (Fleet(slices=16), Fleet(slices=16), Fleet(slices=16)),
        min_length=2,
        max_length=3,
        description="One worker cluster per region (same slice shape everywhere: one manager quota).",
    )
    classes: tuple[JobClass, ...] = Field(
        default_factory=_default_fleet_classes, description="Closed JobSet populations of the whole fleet."
    )
    failures: Failures = Field(default_factory=Failures, description="Background slice failures in every region.")
    degradation: Degradation | None = Field(None, description="A region's recurring large-scale outage, if any.")
    timing: Timing = Field(
        default_factory=Timing, description="Kubernetes/Kueue/JobSet latencies, the same in every region."
    )
    dispatch_s: Seconds = Field(
        1.0,
        description="MultiKueue manager reaction: remote Workload created, deleted or its status seen on the "
        "manager (one reconcile and one API call to the worker). [U]",
    )

    @model_validator(mode="after")
    def _consistent(self) -> FleetScenario:
        shapes = {(f.hosts_per_slice, f.chips_per_host, f.topology) for f in self.regions}
        if len(shapes) != 1:
            raise ValueError(f"regions: one slice shape expected (one manager quota), got {sorted(shapes)}")
        smallest = min(f.slices for f in self.regions)
        for c in self.classes:
            if c.slices > smallest:
                raise ValueError(f"classes[{c.name}].slices={c.slices} exceeds the smallest region ({smallest})")
        if self.degradation is not None and self.degradation.region >= len(self.regions):
            raise ValueError(f"degradation.region={self.degradation.region} but only {len(self.regions)} regions")
        return self

    @property
    def high_threshold(self) -> int:
        return max(c.priority for c in self.classes)

    def worker(self, i: int) -> Scenario:
        """Region i as a single-cluster scenario with no populations of its own (the manager submits)."""
        return Scenario(
            name=f"{self.name}/region-{i}",
            # Per-region slice and storm streams; JobSet streams use the fleet seed (Manager, Simulator.adopt).
            seed=self.seed * 16 + i + 1,
            horizon_h=self.horizon_h,
            fleet=self.regions[i],
            classes=tuple(c.model_copy(update={"population": 0}) for c in self.classes),
            failures=self.failures,
            timing=self.timing,
            high_priority=self.high_threshold,
        )


@dataclass(frozen=True)
class FleetResult:
    scenario: str
    mode: str
    policy: str
    seed: int
    summary: dict[str, Any]
    per_region: list[dict[str, Any]]
    events: int


class FleetSimulator:
    """One fleet scenario in one mode under one policy (one instance per region). Call :meth:`run` once."""

    def __init__(self, scenario: FleetScenario, mode: FleetMode, policy: str) -> None:
        self.scenario = scenario
        self.mode = mode
        self.policy = policy
        self.loop = EventLoop()
        self.workers = [
            Simulator(scenario.worker(i), POLICIES[policy](), self.loop) for i in range(len(scenario.regions))
        ]
        self.manager = Manager(mode, self.workers, self.loop, scenario.classes, scenario.seed, scenario.dispatch_s)
        self._degrade_rng = random.Random(f"{scenario.seed}:degrade")

    def run(self) -> FleetResult:
        for w in self.workers:
            w.start()
        self.manager.start()
        d = self.scenario.degradation
        if d is not None:
            self.loop.at(d.first_at_h * HOUR, partial(self._degrade, d))
        self.loop.run(self.scenario.horizon_h * HOUR)
        per_region = [w.finish().summary for w in self.workers]
        return FleetResult(
            scenario=self.scenario.name,
            mode=self.mode.value,
            policy=self.policy,
            seed=self.scenario.seed,
            summary=combine(self.scenario, [w.rec for w in self.workers], per_region, self.manager.stats),
            per_region=per_region,
            events=self.loop.processed,
        )

    def _degrade(self, d: Degradation) -> None:
        region = self.workers[d.region]
        rng = self._degrade_rng
        count = max(1, round(d.share * len(region.slices)))
        for s in sorted(rng.sample(region.slices, count), key=lambda x: x.id):
            region.fail_slice(s, rng.uniform(d.repair_low_h, d.repair_high_h) * HOUR)
        self.loop.after(d.every_h * HOUR, partial(self._degrade, d))


def combine(
    scenario: FleetScenario, recs: list[Recorder], per_region: list[dict[str, Any]], stats: DispatchStats
) -> dict[str, Any]:
    """The fleet's figures from its regions': chip-seconds and counts summed (so goodput is chip-time weighted),
    MTTR percentiles over every region's incidents (an incident is closed where the JobSet runs again)."""
    pooled = pool(per_region)
    horizon = scenario.horizon_h * HOUR
    high_population = sum(c.population for c in scenario.classes if c.priority >= scenario.high_threshold)
    high_run = sum(r.high_run_s - r.high_lost_s for r in recs)
    cap = sum(s["provisioned_chip_s"] for s in per_region)
    fleet = scenario.regions[0]
    high_demand = (
        sum(c.population * c.slices for c in scenario.classes if c.priority >= scenario.high_threshold)
        * fleet.hosts_per_slice
        * fleet.chips_per_host
        * horizon
    )
    lasting = pooled["mttr_lasting_s"]
    return pooled | {
        # Not averages of the regions': per high-priority JobSet of the fleet, and per provisioned chip-second.
        "high_goodput": round(high_run / (max(high_population, 1) * horizon), 5),
        "high_useful_share": round(pooled["high_useful_chip_s"] / high_demand, 5) if high_demand else math.nan,
        "utilisation": round(
            sum(s["utilisation"] * s["provisioned_chip_s"] for s in per_region) / cap if cap else math.nan, 5
        ),
        "mttr_lasting_s": lasting | {"p99": round(percentile(pooled["mttr_lasting_samples_s"], 99), 3)},
        "dispatch": vars(stats).copy(),
    }


def region_degraded(seed: int = 20260901, scale: float = 1.0) -> FleetScenario:
    """Three regions of 16 v6e 4x4 slices; every 96 h region 0 loses 12 of its 16 slices for 2-6 h while the
    others only see the background failures (default rate). Nine 2-slice high-priority JobSets (18 slices), twelve
    1-slice medium and twenty-four 1-slice low ones: demand 54 slices for 48, so every queue has a backlog and a
    degraded region holds more high-priority work (6 slices by hand) than its 4 healthy slices can run."""
    return FleetScenario(name="region_degraded", seed=seed, horizon_h=2000.0 * scale, degradation=Degradation())


def run_fleet(scenario: FleetScenario, mode: FleetMode, policy: str) -> FleetResult:
    return FleetSimulator(scenario, mode, policy).run()


def _run_args(args: tuple[FleetScenario, FleetMode, str]) -> FleetResult:
    return run_fleet(*args)


def fleet_bench(
    seed: int = 20260901, scale: float = 1.0, seeds: int = 1, workers: int = 1, scenario: FleetScenario | None = None
) -> dict[str, Any]:
    """`region_degraded` (or `scenario`) in both modes under FLEET_POLICIES, over `seeds` seeds, pooled as the
    bench pools seeds; exchange rates against the same mode's `none`. Returns the JSON block."""
    from gke_tpu_priority.hotswap.sim.bench import (
        add_exchange_rates,  # here: bench imports matplotlib, the fleet model needs none
    )

    base = scenario or region_degraded(seed, scale)
    runs = [
        (base.model_copy(update={"seed": base.seed + k}), mode, policy)
        for k in range(seeds)
        for mode in FleetMode
        for policy in FLEET_POLICIES
    ]
    if workers > 1:
        from gke_tpu_priority.hotswap.sim.workers import worker_pool

        with worker_pool(workers) as ex:
            results = list(ex.map(_run_args, runs))
    else:
        results = [_run_args(r) for r in runs]
    out: dict[str, Any] = {"scenario": base.name, "params": base.model_dump(mode="json"), "modes": {}}
    for mode in FleetMode:
        mine = [r for r in results if r.mode == mode.value]
        policies = {}
        for policy in FLEET_POLICIES:
            per_seed = [r.summary for r in mine if r.policy == policy]
            pooled = pool(per_seed) if len(per_seed) > 1 else per_seed[0]
            if len(per_seed) > 1:
                pooled |= _pool_fleet_extras(per_seed)
            policies[policy] = pooled
        add_exchange_rates(policies)
        out["modes"][mode.value] = {
            "policies": policies,
            "events": {p: sum(r.events for r in mine if r.policy == p) for p in FLEET_POLICIES},
        }
    out["multikueue_vs_independent"] = vs_independent(out["modes"])
    return out


def vs_independent(modes: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Per policy, what MultiKueue dispatch changes against the same policy with regions picked by hand."""
    mk, ind = modes[FleetMode.MULTIKUEUE.value]["policies"], modes[FleetMode.INDEPENDENT.value]["policies"]
    return {
        policy: {
            "high_goodput_delta": round(mk[policy]["high_goodput"] - ind[policy]["high_goodput"], 5),
            "fleet_goodput_delta": round(mk[policy]["fleet_goodput"] - ind[policy]["fleet_goodput"], 5),
            "high_useful_gain_chip_h": round(
                (mk[policy]["high_useful_chip_s"] - ind[policy]["high_useful_chip_s"]) / HOUR, 1
            ),
            "victim_lost_chip_h_delta": round(
                (mk[policy]["badput_s"]["victim_wasted_progress"] - ind[policy]["badput_s"]["victim_wasted_progress"])
                / HOUR,
                1,
            ),
        }
        for policy in mk
    }


def _pool_fleet_extras(per_seed: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(per_seed)
    return {
        "high_goodput": round(sum(s["high_goodput"] for s in per_seed) / n, 5),
        "high_useful_share": round(sum(s["high_useful_share"] for s in per_seed) / n, 5),
        "utilisation": round(sum(s["utilisation"] for s in per_seed) / n, 5),
        "dispatch": {k: sum(s["dispatch"][k] for s in per_seed) for k in per_seed[0]["dispatch"]},
    }


def fleet_table(report: dict[str, Any]) -> str:
    """One row per (mode, policy): the figures issue 18 item 6 asks for."""

    def f(x: float) -> str:
        return "n/a" if isinstance(x, float) and math.isnan(x) else f"{x:.4g}"

    head = (
        f"{'mode':<12}{'policy':<11}{'lasting n':>10}{'MTTR lasting p50/p95 s':>24}{'hi goodput':>11}"
        f"{'fleet gp':>10}{'exch.rate':>10}{'hi gain chip-h':>15}{'retries':>9}{'by hold':>8}{'moves':>7}"
    )
    lines = [f"== {report['scenario']} ({report['params']['horizon_h']:.0f} h)", head]
    for mode, block in report["modes"].items():
        for policy, p in block["policies"].items():
            m = p["mttr_lasting_s"]
            d = p["dispatch"]
            lines.append(
                f"{mode:<12}{policy:<11}{m['n']:>10}{f(m['p50']) + '/' + f(m['p95']):>24}{f(p['high_goodput']):>11}"
                f"{f(p['fleet_goodput']):>10}{f(p['exchange_rate']):>10}{f(p['high_gain_over_none_chip_h']):>15}"
                f"{d['retries']:>9}{d['retries_by_hold']:>8}{d['moves']:>7}"
            )
    lines.append(
        "multikueue vs independent (same policy): high goodput / fleet goodput deltas, high useful chip-h gained,"
    )
    lines.append("victims' lost chip-h added")
    for policy, d in report.get("multikueue_vs_independent", {}).items():
        lines.append(
            f"  {policy:<11}{d['high_goodput_delta']:+.4f} / {d['fleet_goodput_delta']:+.4f}, "
            f"{d['high_useful_gain_chip_h']:+.0f} chip-h, {d['victim_lost_chip_h_delta']:+.0f} chip-h"
        )
    return "\n".join(lines)
