"""Fleet goodput ledger: hand-computed tiny runs, and the ledger sums to the provisioned chip-time."""

from __future__ import annotations

import pytest

from sim.metrics import exchange_rate
from sim.params import HOUR, FailureKind
from sim.runner import POLICIES
from sim.simulator import Simulator
from tests.sim.builders import NEVER, small, two_classes

CHIPS = 16  # v6e 4x4 slice


def _one_job_on_one_slice(fault_at: float | None = None, repair_s: float = 100.0) -> dict[str, object]:
    sim = Simulator(two_classes("one", 1, 1.0, 1, high=(1, 1, NEVER), low=(1, 0, NEVER)), POLICIES["none"]())
    if fault_at is not None:
        sim.loop.at(fault_at, lambda: sim._fail_now(sim.slices[0], repair_s, FailureKind.CRASH))
    return sim.run().summary


def test_a_clean_hour_is_useful_after_the_first_start() -> None:
    # admit 0 s, leaders created at 1 + 5 = 6 s (slice empty while the JobSet waits), leader Running at 21 s,
    # followers (created 7 s) at 22 s: training from 22 s to the horizon, in flight work counts as useful.
    s = _one_job_on_one_slice()
    assert s["fleet_goodput"] == pytest.approx((3600 - 22) / 3600, abs=1e-5)
    assert s["goodput_by_tier"] == {"high": pytest.approx((3600 - 22) / 3600, abs=1e-5)}
    bad = s["badput_s"]
    assert bad["idle_while_queued"] == pytest.approx(6 * CHIPS)
    assert bad["restart_initialisation"] == pytest.approx(16 * CHIPS)
    assert bad["own_disruption_wasted_progress"] == 0 and bad["victim_wasted_progress"] == 0
    assert bad["infrastructure_down"] == 0


def test_a_crash_wastes_the_progress_since_the_checkpoint_and_the_repair_time() -> None:
    # Running from 22 s; crash at 1,000 s (30-min checkpoints: nothing kept), slice back at 1,100 s; the new
    # attempt (recreated at 1,015 s) binds at 1,100 s and trains from 1,116 s.
    s = _one_job_on_one_slice(fault_at=1000.0)
    bad = s["badput_s"]
    assert bad["own_disruption_wasted_progress"] == pytest.approx(978 * CHIPS)
    assert bad["infrastructure_down"] == pytest.approx(100 * CHIPS)
    assert bad["restart_initialisation"] == pytest.approx((16 + 16) * CHIPS)
    assert bad["idle_while_queued"] == pytest.approx(6 * CHIPS)
    assert s["useful_chip_s_by_tier"] == {"high": pytest.approx((3600 - 1116) * CHIPS)}
    assert s["fleet_goodput"] == pytest.approx((3600 - 1116) / 3600, abs=1e-5)


def test_a_checkpoint_keeps_the_progress_before_it() -> None:
    # Crash 2,000 s into the run (started at 22 s): the checkpoint at 1,800 s of run time is kept.
    s = _one_job_on_one_slice(fault_at=2022.0)
    assert s["badput_s"]["own_disruption_wasted_progress"] == pytest.approx(200 * CHIPS)
    assert s["useful_chip_s_by_tier"]["high"] == pytest.approx((1800 + 3600 - 2138) * CHIPS)


@pytest.mark.parametrize("policy", list(POLICIES))
def test_goodput_and_badput_causes_sum_to_the_provisioned_chip_time(policy: str) -> None:
    sim = Simulator(small(seed=5, horizon_h=200.0), POLICIES[policy]())
    s = sim.run().summary
    rec = sim.rec
    provisioned = len(sim.slices) * 200.0 * HOUR * CHIPS
    assert s["provisioned_chip_s"] == pytest.approx(provisioned)
    # Independently tracked: every slice-second is occupied, empty or down.
    empty = rec.reserved_idle_slice_s + rec.idle_queued_slice_s + rec.idle_no_demand_slice_s
    assert (rec.occupied_slice_s + empty + rec.down_slice_s) * CHIPS == pytest.approx(provisioned, rel=1e-9)
    running = sum(rec.useful_slice_s.values()) + rec.wasted_own_slice_s + rec.wasted_victim_slice_s
    assert running <= rec.occupied_slice_s + 1e-6  # training only happens on occupied slices
    total = sum(s["useful_chip_s_by_tier"].values()) + sum(s["badput_s"].values())
    assert total == pytest.approx(provisioned, rel=1e-6)
    assert s["fleet_goodput"] == pytest.approx(sum(s["goodput_by_tier"].values()), abs=1e-4)
    assert s["badput_s"]["infrastructure_down"] > 0 and s["badput_s"]["own_disruption_wasted_progress"] > 0
    if policy == "none":
        assert s["policy_victim_lost_chip_s"] == 0 and s["victim_lost_chip_h_per_incident"] == 0
    if policy == "reconciler":
        assert s["victims"] > 0 and s["policy_victim_lost_chip_s"] > 0
        assert s["badput_s"]["victim_wasted_progress"] >= s["policy_victim_lost_chip_s"]


def test_exchange_rate_is_gain_over_loss() -> None:
    assert exchange_rate(7200.0, 3600.0) == 2.0
    assert exchange_rate(-100.0, 400.0) == -0.25
    assert exchange_rate(0.0, 0.0) != exchange_rate(0.0, 0.0)  # NaN: nothing gained, nothing lost
    assert exchange_rate(10.0, 0.0) == float("inf")
