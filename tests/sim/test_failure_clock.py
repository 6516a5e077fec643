"""Failure clocks: every healthy slice fails at the Poisson rate, and with `occupant` clocks the same JobSet
replica is hit at the same moments under every policy (common random numbers)."""

from __future__ import annotations

import pytest

from sim.params import HOUR, FailureClock, Failures
from sim.runner import POLICIES
from sim.simulator import Simulator
from tests.sim.builders import two_classes


def _scenario(clock: FailureClock, horizon_h: float = 150.0) -> object:
    return two_classes(
        "clock",
        11,
        horizon_h,
        8,
        high=(2, 1, 30.0),
        low=(1, 4, 6.0),
        failures=Failures(rate_multiplier=1000.0, clock=clock),
    )


def _failures(policy: str, clock: FailureClock) -> tuple[Simulator, list[tuple[float, str, int]]]:
    sim = Simulator(_scenario(clock), POLICIES[policy]())  # type: ignore[arg-type]
    hits: list[tuple[float, str, int]] = []
    fail_now = sim._fail_now

    def record(s, repair_s, kind):  # type: ignore[no-untyped-def]
        if s.healthy:
            owners = sorted({p.job.name for p in s.hosts if p is not None})
            hits.append((round(sim.now, 6), owners[0] if owners else "", s.id))
        fail_now(s, repair_s, kind)

    sim._fail_now = record  # type: ignore[method-assign]
    sim.run()
    return sim, hits


@pytest.mark.parametrize("clock", list(FailureClock))
def test_every_healthy_slice_fails_at_the_poisson_rate(clock: FailureClock) -> None:
    sim, hits = _failures("none", clock)
    scenario = sim.scenario
    healthy_s = scenario.fleet.slices * scenario.horizon_h * HOUR - sim.rec.down_slice_s
    expected = healthy_s * scenario.failures.rate_per_slice_s
    assert expected > 250
    assert len(hits) == pytest.approx(expected, rel=0.15)
    occupied = [h for h in hits if h[1]]
    assert 0 < len(occupied) < len(hits)  # both clocks fire: busy and empty slices fail


def test_occupant_clocks_hit_the_same_jobs_at_the_same_moments_under_every_policy() -> None:
    def high_hits(policy: str, clock: FailureClock) -> set[tuple[float, str]]:
        _, hits = _failures(policy, clock)
        return {(t, job) for t, job, _ in hits if job.startswith("high")}

    jaccard = {}
    for clock in FailureClock:
        base, other = high_hits("none", clock), high_hits("reconciler", clock)
        jaccard[clock] = len(base & other) / max(len(base | other), 1)
    assert jaccard[FailureClock.OCCUPANT] >= 0.9
    assert jaccard[FailureClock.OCCUPANT] > jaccard[FailureClock.SLICE]
