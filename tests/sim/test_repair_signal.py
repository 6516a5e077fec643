"""The what-if reconciler with a perfect repair-time signal (`reconciler+repair-signal`): the real planner, with
`evictionDelay` set per pass from the true repair times. It must evict less than the plain reconciler for the same
failures, never for a repair that ends before the JobSet could restart elsewhere, and keep lasting repairs as fast."""

from __future__ import annotations

from sim.params import FailureKind
from sim.policies.reconciler import ReconcilerPolicy
from sim.policies.repair_signal import MAX_DELAY_S, RECENT_REPAIR_S, RepairSignalReconciler
from sim.runner import POLICIES, WHAT_IF
from sim.simulator import Simulator
from tests.sim.builders import small


def test_a_perfect_repair_signal_saves_victims_work_without_slowing_lasting_repairs() -> None:
    scenario = small(seed=5, horizon_h=200.0)
    plain = Simulator(scenario, ReconcilerPolicy()).run().summary
    signalled = Simulator(scenario, RepairSignalReconciler()).run().summary
    assert plain["policy_victim_lost_chip_s"] > 0
    assert signalled["policy_victim_lost_chip_s"] < plain["policy_victim_lost_chip_s"]
    assert signalled["victims"] < plain["victims"]
    assert signalled["mttr_lasting_s"]["p50"] <= plain["mttr_lasting_s"]["p50"]
    assert signalled["lost_victims"] == plain["lost_victims"] == 0


def test_the_delay_covers_transients_only_and_drops_to_zero_for_a_lasting_repair() -> None:
    sim = Simulator(small(seed=5, horizon_h=0.01), policy := RepairSignalReconciler())
    sim.run()  # attaches
    lasting = sim.lasting_after_s(FailureKind.CRASH)
    transient, other = sim.slices[0], sim.slices[1]
    transient.healthy, transient.fault_kind = False, FailureKind.CRASH
    transient.failed_at, transient.repair_at = sim.now, sim.now + lasting / 2
    assert policy._transient_delay_s() == lasting / 2 + RECENT_REPAIR_S
    other.healthy, other.fault_kind = False, FailureKind.CRASH
    other.failed_at, other.repair_at = sim.now, sim.now + 10 * lasting
    assert policy._transient_delay_s() == 0.0  # a lasting repair is open: act at detection
    assert MAX_DELAY_S == 600.0


def test_the_what_if_policy_stays_out_of_the_standard_bench() -> None:
    assert "reconciler+repair-signal" in WHAT_IF and "reconciler+repair-signal" not in POLICIES
