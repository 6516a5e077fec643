"""A fleet with spare slices: the reconciler places the disrupted JobSet on one without draining anyone."""

from __future__ import annotations

from sim.bench import no_drain_floor_s, restart_floor_s
from sim.params import Failures, Fleet, Scenario
from sim.runner import run_one
from sim.scenarios import SPARE_SLICES, spare_capacity


def _fast(fleet_slices: int | None = None) -> Scenario:
    sc = spare_capacity(seed=11, scale=0.1).model_copy(update={"failures": Failures(rate_multiplier=20.0)})
    if fleet_slices is not None:
        sc = sc.model_copy(update={"fleet": Fleet(slices=fleet_slices)})
    return sc


def test_the_spare_scenario_keeps_free_slices() -> None:
    sc = spare_capacity()
    assert sc.fleet.slices == sum(c.slices * c.population for c in sc.classes) + SPARE_SLICES


def test_with_spare_slices_the_lasting_repair_mttr_is_at_the_no_drain_floor_and_nobody_is_drained() -> None:
    sc = _fast()
    timing = sc.timing.model_dump()
    s = run_one(sc, "reconciler").summary
    lasting = s["mttr_lasting_s"]
    assert lasting["n"] >= 5
    assert abs(lasting["p50"] - no_drain_floor_s(timing)) <= 2.0
    assert lasting["p50"] < restart_floor_s(timing) - 20.0
    assert s["victims"] == 0 and s["holds"] == 0 and s["policy_victim_lost_chip_s"] == 0


def test_without_the_spare_slices_the_same_fleet_must_drain_a_victim() -> None:
    sc = _fast(fleet_slices=spare_capacity().fleet.slices - SPARE_SLICES)
    s = run_one(sc, "reconciler").summary
    assert s["victims"] > 0
    # The victim's grace period now lies on the preemptor's path.
    floor = no_drain_floor_s(sc.timing.model_dump()) + sc.timing.pod_termination_grace_s
    assert s["mttr_lasting_s"]["p50"] >= floor - 5.0
