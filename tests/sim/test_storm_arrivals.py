"""Storm arrivals: storms come as a Poisson process by default, not on a clock.

With storms exactly every 24 h and checkpoints every 30 min from each restart, the next storm struck every JobSet
restarted by the previous one at the same phase of its checkpoint cycle: just before its next checkpoint when it
had restarted quickly. The faster a policy recovered, the more progress its JobSets lost to the next storm, an
alignment no real fleet has (docs/benchmarks.md, "Storms on a clock")."""

from __future__ import annotations

import statistics

from sim.params import HOUR, Failures, StormArrivals
from sim.runner import POLICIES
from sim.scenarios import multi_disruption, standard_scenarios
from sim.simulator import Simulator
from tests.sim.builders import two_classes

CHECKPOINT_S = 30 * 60.0


def _storm_times(arrivals: StormArrivals, storms: int = 2000, every_h: float = 24.0) -> list[float]:
    failures = Failures(storm_slices=2, storm_window_s=60.0, storm_every_h=every_h, storm_arrivals=arrivals)
    sim = Simulator(two_classes("storms", 7, 10.0, 4, failures=failures), POLICIES["none"]())
    times, now = [], 0.0
    for _ in range(storms):
        now += sim._storm_gap_s()
        times.append(now)
    return times


def test_poisson_storms_keep_the_mean_rate_and_no_clock() -> None:
    times = _storm_times(StormArrivals.POISSON)
    gaps = [b - a for a, b in zip([0.0, *times], times, strict=False)]
    mean = statistics.fmean(gaps)
    assert abs(mean - 24 * HOUR) < 0.05 * 24 * HOUR
    assert 0.9 < statistics.pstdev(gaps) / mean < 1.1  # exponential: the spread equals the mean
    # The property that matters: where a storm falls in a 30-minute checkpoint cycle is uniform.
    quarters = [0, 0, 0, 0]
    for t in times:
        quarters[int((t % CHECKPOINT_S) / CHECKPOINT_S * 4)] += 1
    assert all(0.2 * len(times) < q < 0.3 * len(times) for q in quarters), quarters


def test_control_periodic_storms_fall_on_the_checkpoint_grid() -> None:
    times = _storm_times(StormArrivals.PERIODIC, storms=50)
    assert times[:3] == [24 * HOUR, 48 * HOUR, 72 * HOUR]
    assert {t % CHECKPOINT_S for t in times} == {0.0}


def test_every_policy_meets_the_same_storms() -> None:
    """The storms' own random stream: the same times under every policy (common random numbers)."""
    scenario = multi_disruption(seed=3, scale=0.02)
    first = [
        _storm_gap_sequence(Simulator(scenario, POLICIES[policy]()), 5) for policy in ("none", "reconciler", "hero")
    ]
    assert first[0] == first[1] == first[2]
    assert len(set(first[0])) == 5


def _storm_gap_sequence(sim: Simulator, n: int) -> list[float]:
    return [sim._storm_gap_s() for _ in range(n)]


def test_the_standard_storm_scenarios_use_poisson_arrivals() -> None:
    stormy = [sc for sc in standard_scenarios(scale=0.01) if sc.failures.storm_slices]
    assert {sc.name for sc in stormy} == {"storm_4_in_60s", "multi_disruption"}
    assert all(sc.failures.storm_arrivals is StormArrivals.POISSON for sc in stormy)
