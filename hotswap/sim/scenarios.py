"""The standard benchmark scenarios (research anchor (d), S1-S3). Horizons are sized for `make bench`."""

from __future__ import annotations

from hotswap.sim.params import HOUR, MINUTE, Failures, Fleet, JobClass, RepairBand, Scenario

DEFAULT_SEED = 20260901
DEFAULT_SEEDS = 4
"""Seeds per scenario in `make bench` (DEFAULT_SEED, DEFAULT_SEED + 1, ...): enough incidents for a p99."""


def standard_scenarios(seed: int = DEFAULT_SEED, scale: float = 1.0) -> list[Scenario]:
    """S1 at 1x and 3x, S2 storm, S3 long repairs, and a fleet with spare slices. `scale` multiplies every
    horizon (tests use < 1)."""
    long_repairs = (
        RepairBand(weight=0.50, low_s=5.0, high_s=1 * MINUTE),
        RepairBand(weight=0.30, low_s=10 * MINUTE, high_s=20 * MINUTE),
        RepairBand(weight=0.20, low_s=1 * HOUR, high_s=4 * HOUR),
    )
    return [
        Scenario(name="steady_1x", seed=seed, horizon_h=8760 * scale),
        Scenario(name="steady_3x", seed=seed, horizon_h=4380 * scale, failures=Failures(rate_multiplier=3.0)),
        Scenario(
            name="storm_4_in_60s",
            seed=seed,
            horizon_h=2016 * scale,
            failures=Failures(storm_slices=4, storm_window_s=60.0, storm_every_h=48.0),
        ),
        Scenario(
            name="long_repairs",
            seed=seed,
            horizon_h=4380 * scale,
            failures=Failures(rate_multiplier=3.0, repair_mixture=long_repairs),
        ),
        spare_capacity(seed, scale),
    ]


SPARE_SLICES = 4


def spare_capacity(seed: int = DEFAULT_SEED, scale: float = 1.0) -> Scenario:
    """A fleet that keeps SPARE_SLICES slices free beyond what its JobSets ask for.

    The high-priority JobSets are single-slice here (8 of them: the same 8 slices of high-priority work as the
    default 4 x 2): a multi-slice JobSet drains its own healthy replicas before it restarts (its old pods must
    be gone), which sets the 61 s floor whether or not anyone else is drained. A single-slice one shows what
    spare capacity is worth: fault -> pods failed -> recreate -> pod start, with nobody evicted.
    """
    classes = (
        JobClass(name="high", priority=2_000_000, slices=1, population=8, mean_duration_h=72.0),
        JobClass(name="medium", priority=1_500_000, slices=1, population=8, mean_duration_h=24.0),
        JobClass(name="low", priority=1_000_000, slices=1, population=20, mean_duration_h=12.0),
    )
    demand = sum(c.slices * c.population for c in classes)
    return Scenario(
        name=f"spare_{SPARE_SLICES}",
        seed=seed,
        horizon_h=2920 * scale,
        fleet=Fleet(slices=demand + SPARE_SLICES),
        classes=classes,
        failures=Failures(rate_multiplier=3.0),
    )
