"""A fleet of worker clusters on one clock: hotswap in a MultiKueue fleet.

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

from sim.engine import EventLoop
from sim.metrics import Recorder, percentile, pool
from sim.multikueue import DispatchStats, FleetMode, Manager
from sim.params import HOUR, Failures, Fleet, JobClass, Scenario, Seconds, Timing
from sim.runner import POLICIES
from sim.simulator import Simulator

FLEET_POLICIES = ("none", "scheduler", "reconciler")
"""The policies the fleet benchmark runs: no preemption, GKE's, the reconciler. The others need nothing new from a
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
