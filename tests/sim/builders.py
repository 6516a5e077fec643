"""Scenario builders for simulator tests: a high and a low job class on a small fleet."""

from __future__ import annotations

from sim.params import Failures, Fleet, JobClass, Scenario

HIGH = 2_000_000
LOW = 1_000_000
NEVER = 1e6
"""mean_duration_h (or slice_mtbf_h) long enough that nothing ends (or fails) by itself within a test."""


def two_classes(
    name: str,
    seed: int,
    horizon_h: float,
    slices: int,
    high: tuple[int, int, float] = (1, 1, NEVER),
    low: tuple[int, int, float] = (1, 1, NEVER),
    failures: Failures | None = None,
) -> Scenario:
    """`high`/`low` are (slices per JobSet, population, mean duration h); no failures unless given."""
    return Scenario(
        name=name,
        seed=seed,
        horizon_h=horizon_h,
        fleet=Fleet(slices=slices),
        classes=(
            JobClass(name="high", priority=HIGH, slices=high[0], population=high[1], mean_duration_h=high[2]),
            JobClass(name="low", priority=LOW, slices=low[0], population=low[1], mean_duration_h=low[2]),
        ),
        failures=failures if failures is not None else Failures(slice_mtbf_h=1e9),
    )


def small(seed: int = 3, horizon_h: float = 300.0) -> Scenario:
    """A high failure rate on 8 slices: a few lasting repairs of the high JobSet in seconds of run time."""
    return two_classes(
        "small", seed, horizon_h, 8, high=(2, 1, 50.0), low=(1, 8, 6.0), failures=Failures(rate_multiplier=100.0)
    )
