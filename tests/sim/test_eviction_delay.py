"""The default cost-gated `evictionDelay` in the simulator: a transient under a costly victim evicts nobody, a
lasting failure waits the delay, a victim that has just checkpointed is taken at once."""

from __future__ import annotations

from datetime import timedelta

from gke_tpu_priority.hotswap.config import HotswapConfig
from sim.params import HOUR, MINUTE, FailureKind
from sim.policies.reconciler import ReconcilerPolicy
from sim.simulator import Simulator
from tests.sim.builders import NEVER, two_classes


def _fault(policy: ReconcilerPolicy, at_s: float, repair_s: float) -> Simulator:
    """4 slices, a 2-slice high JobSet and 2 one-slice lows (no spare); one high slice crashes at `at_s`.
    Every JobSet starts within the first minute and checkpoints every 30 min of its own run."""
    sim = Simulator(two_classes("eviction-delay", 11, 1.0, 4, high=(2, 1, NEVER), low=(1, 2, NEVER)), policy)
    sim.run()
    sim.loop.run(at_s)
    target = next(s for s in sim.slices if any(p is not None and p.job.cls.name == "high" for p in s.hosts))
    sim._fail_now(target, repair_s, FailureKind.CRASH)
    sim.loop.run(sim.now + 3 * HOUR)
    return sim


COSTLY = HOUR + 15 * MINUTE  # about 15 min since every low's last checkpoint: above evictionDelayMinLoss (10 min)
CHEAP = HOUR + 3 * MINUTE  # about 3 min


def test_a_transient_under_costly_victims_evicts_nobody() -> None:
    sim = _fault(ReconcilerPolicy(), COSTLY, 40.0)
    assert sim.rec.victims == 0 and sim.rec.holds == 0
    assert len(sim.rec.mttr_high_s) == 1


def test_a_lasting_failure_under_costly_victims_waits_the_delay() -> None:
    delayed = _fault(ReconcilerPolicy(), COSTLY, HOUR)
    at_detection = _fault(ReconcilerPolicy(HotswapConfig(eviction_delay=timedelta(0))), COSTLY, HOUR)
    assert delayed.rec.victims == at_detection.rec.victims == 1
    floor = at_detection.rec.mttr_high_s[0]
    assert floor == 61.0
    # The victim is held a minute after detection instead of at it; its 30 s grace no longer overlaps the restart.
    assert floor + 54.0 <= delayed.rec.mttr_high_s[0] <= floor + 60.0  # about 3 s of the delay overlap the drain


def test_a_victim_that_has_just_checkpointed_is_taken_at_detection() -> None:
    sim = _fault(ReconcilerPolicy(), CHEAP, HOUR)
    assert sim.rec.victims == 1
    assert sim.rec.mttr_high_s == [61.0]
