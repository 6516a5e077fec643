"""The peer policies: Kueue's native node hot swap, CoreWeave's hero controller, the hindsight bound."""

from __future__ import annotations

from typing import Any

import pytest

from sim.params import HOUR, FailureKind, Scenario
from sim.policies.hero import DRAIN_TIMEOUT_S, POLL_S, HeroPolicy
from sim.policies.hindsight import HindsightPolicy
from sim.policies.kueue_tas import KueueTASPolicy
from sim.runner import POLICIES
from sim.simulator import Simulator
from tests.sim.builders import NEVER, small, two_classes

PEERS = ("kueue-tas", "hero", "hindsight")


def _summary(scenario: Scenario, policy: str) -> dict[str, Any]:
    return Simulator(scenario, POLICIES[policy]()).run().summary


@pytest.mark.parametrize("policy", PEERS)
def test_each_peer_runs_to_the_end_losing_no_victim_and_preempting_no_partial_slice(policy: str) -> None:
    summary = _summary(small(3), policy)
    assert summary["incidents"] > 5
    assert summary["mttr_s"]["n"] > 5
    assert summary["lost_victims"] == 0
    assert summary["partial_preemptions"] == 0 and summary["pod_preemptions"] == 0
    assert summary["end_states"]["held"] == 0


def _one_fault(policy: Any, repair_s: float, lows: int = 3) -> Simulator:
    """4 slices, a 2-slice high JobSet and `lows` 1-slice low ones; one of the high's slices crashes at 1 h."""
    sim = Simulator(two_classes("one-fault", 11, 1.0, 4, high=(2, 1, NEVER), low=(1, lows, NEVER)), policy)
    sim.run()
    sim.trace = []
    target = next(s for s in sim.slices if any(p is not None and p.job.cls.name == "high" for p in s.hosts))
    sim._fail_now(target, repair_s, FailureKind.CRASH)
    sim.loop.run(3 * HOUR)
    return sim


def test_kueue_tas_evicts_on_node_failure_and_the_replacement_preempts_nobody() -> None:
    sim = _one_fault(KueueTASPolicy(), HOUR)
    assert sim.trace is not None
    evictions = [(t, w) for t, w in sim.trace if w.startswith("kueue evicts ")]
    # The node controller is first: after NotReady, with the Kueue write; no workload is evicted before it.
    t0, first = evictions[0]
    assert first.startswith("kueue evicts high-") and "NodeFailures" in first
    assert t0 == pytest.approx(HOUR + sim.timing.fault_to_node_unhealthy_s + sim.timing.kueue_admission_s, abs=0.1)
    high = next(j for j in sim.live if j.cls.name == "high")
    assert high.running and sim.rec.mttr_high_s
    # Without admission-time preemption for topology (the no-preemption reading) nobody is a victim at all: the
    # replacement search never preempts, and quota alone fits.
    quiet = Simulator(small(3), KueueTASPolicy(preempt_for_topology=False))
    quiet.run()
    assert quiet.rec.victims == 0
    policy = quiet.policy
    assert isinstance(policy, KueueTASPolicy) and policy.node_failure_evictions > 0


def test_kueue_tas_pins_pods_to_their_assigned_domains() -> None:
    sim = Simulator(small(3, horizon_h=50.0), KueueTASPolicy())
    sim.run()
    for job in sim.live:
        if job.topology is None:
            continue
        for pod in job.all_pods():
            if pod.slice is not None and pod in job.pods:
                assert pod.slice is job.topology[pod.child]


def test_hero_runs_one_drain_at_a_time_and_ends_a_stuck_one_at_the_timeout() -> None:
    policy = HeroPolicy()
    sim = _one_fault(policy, 4 * HOUR, lows=2)
    assert policy.drains, "the requeued high JobSet was stuck on topology: a drain starts"
    first = policy.drains[0]
    assert first.reason == "placed" and first.ended is not None
    # Fail a drained slice right after the next drain starts: the hero cannot run there, the janitor gives up.
    policy2 = HeroPolicy()
    sim = Simulator(two_classes("hero-timeout", 11, 1.0, 4, high=(2, 1, NEVER), low=(1, 2, NEVER)), policy2)
    sim.run()
    target = next(s for s in sim.slices if any(p is not None and p.job.cls.name == "high" for p in s.hosts))
    sim._fail_now(target, 4 * HOUR, FailureKind.CRASH)
    while policy2.drain is None:
        sim.loop.run(sim.now + 1.0)
    drain = policy2.drain
    other = next(s for s in drain.slices if s.healthy and s.id != target.id)
    sim._fail_now(other, 4 * HOUR, FailureKind.CRASH)
    sim.loop.run(sim.now + 2 * HOUR)
    assert drain.reason == "timeout" and drain.ended is not None
    assert DRAIN_TIMEOUT_S <= drain.ended - drain.started <= DRAIN_TIMEOUT_S + POLL_S
    assert all(s.reserved_for is not drain.hero or s in policy2.drain.slices for s in sim.slices if policy2.drain)
    for a, b in zip(policy2.drains, policy2.drains[1:], strict=False):
        assert a.ended is not None and a.ended <= b.started
    assert sim.lost_victims() == 0


def test_hero_never_overlaps_drains_on_a_busy_fleet() -> None:
    from sim.params import Failures

    policy = HeroPolicy()
    scenario = two_classes(
        "busy", 3, 300.0, 12, high=(2, 3, 50.0), low=(1, 12, 6.0), failures=Failures(rate_multiplier=100.0)
    )
    sim = Simulator(scenario, policy)
    summary = sim.run().summary
    assert len(policy.drains) >= 2
    for a, b in zip(policy.drains, policy.drains[1:], strict=False):
        assert a.ended is not None and a.ended <= b.started
    assert summary["lost_victims"] == 0


def _high_badput_chip_s(summary: dict[str, Any], scenario: Scenario) -> float:
    from sim.bench import high_demand_chip_s

    return high_demand_chip_s(scenario) - summary["high_useful_chip_s"]


@pytest.mark.parametrize("seed", [3, 4])
def test_hindsight_high_badput_is_at_most_every_other_policys(seed: int) -> None:
    """Checkpoints every minute: with the default 30 min, where the checkpoint grid falls after a faster restart
    moves each later loss by up to 30 min of progress either way, which swamps the seconds a policy saves."""
    base = small(seed)
    scenario = base.model_copy(update={"timing": base.timing.model_copy(update={"checkpoint_interval_s": 60.0})})
    badput = {p: _high_badput_chip_s(_summary(scenario, p), scenario) for p in POLICIES}
    assert badput["hindsight"] > 0
    for policy, value in badput.items():
        assert badput["hindsight"] <= value, (policy, badput)


def test_hindsight_evicts_nobody_for_a_failure_that_heals_before_the_restart() -> None:
    transient = _one_fault(HindsightPolicy(), 30.0)
    assert transient.lasting_after_s(FailureKind.CRASH) > 30.0
    assert transient.rec.holds == 0 and transient.rec.victims == 0
    assert len(transient.rec.mttr_high_s) == 1
    lasting = _one_fault(HindsightPolicy(), HOUR)
    assert lasting.rec.holds == 1 and lasting.rec.victims == 1  # the cheapest low JobSet makes room
    assert lasting.lost_victims() == 0
    assert lasting.rec.mttr_high_s[0] < transient.rec.mttr_high_s[0] + 30.0


def test_a_kueue_requeue_during_a_restart_creates_no_pod_before_the_old_attempts_are_gone() -> None:
    """A Kueue eviction (NodeFailures here) lands after the JobSet's failure policy has started a restart. It does
    not cancel it: BlockingRecreate creates no Job of the new attempt while one of the old exists (jobset v0.12.0
    `constructJobsFromTemplate`), and with a podFailurePolicy a Job replaces a pod only once it is terminal
    (Kubernetes `onlyReplaceFailedPods`). The simulator once let the re-admitted JobSet create its pods at once,
    which made `kueue-tas` 4 s faster than any JobSet restart can be."""
    sim = _one_fault(KueueTASPolicy(), HOUR)
    assert sim.trace is not None
    high = next(j for j in sim.live if j.cls.name == "high")
    events = [(t, w) for t, w in sim.trace if high.name in w]
    evicted = next(t for t, w in events if w.startswith("kueue evicts "))
    admitted = next(t for t, w in events if w.startswith("kueue admits ") and t >= evicted)
    created = next(t for t, w in events if w.startswith(f"{high.name} leaders created") and t >= evicted)
    t = sim.timing
    # Without the rule the leaders came kueue_admission_s + jobset_recreate_s after the re-admission.
    assert created > admitted + t.kueue_admission_s + t.jobset_recreate_s + 1.0
    # With it they come when the surviving slice's old pods have drained their grace, plus the recreate.
    fault = HOUR
    assert created == pytest.approx(
        fault + t.fault_to_pod_failed_s + t.pod_termination_grace_s + t.jobset_recreate_s, abs=1.5
    )
    assert high.running and len(sim.rec.mttr_high_s) == 1


def test_hindsight_evicts_a_low_leader_that_co_binds_with_its_rescued_jobset() -> None:
    """Regression (multi_disruption): a slice nobody fenced comes back from a short repair while a
    rescued high JobSet's leaders and a low JobSet's leader are both pending (here the queued low JobSet Kueue
    admitted on the victim's quota). Leader anti-affinity is scoped to one priority, so both leaders bind there
    in one cycle and neither JobSet can fill the slice; without help both wait for waitForPodsReady (15 min).
    Hindsight evicts the low JobSet, which has not run on that attempt."""
    sim = Simulator(two_classes("co-bind", 11, 1.0, 4, high=(2, 1, NEVER), low=(1, 3, NEVER)), HindsightPolicy())
    sim.run()
    sim.trace = []
    high = next(j for j in sim.jobs if j.cls.name == "high")
    lows = [s for s in sim.slices if any(p is not None and p.job.cls.name == "low" for p in s.hosts)]
    # The low JobSet's slice crashes and is back in 35 s: a transient for it, but its pods fail and it restarts.
    sim._fail_now(lows[0], 35.0, FailureKind.CRASH)
    # A lasting fault of the high JobSet at the same moment: hindsight fences the high's surviving slice and the
    # other low JobSet's, both still draining when the repaired slice comes back with two leaders pending.
    target = next(s for s in sim.slices if any(p is not None and p.job is high for p in s.hosts))
    sim._fail_now(target, HOUR, FailureKind.CRASH)
    sim.loop.run(sim.now + HOUR)
    assert sim.trace is not None
    shared = [w for _, w in sim.trace if w.startswith("hindsight: ") and " shares " in w]
    assert shared == [f"hindsight: low-00002 shares {lows[0].pool} with {high.name}; evicted"]
    assert high.running
    assert len(sim.rec.mttr_high_s) == 1
    assert sim.rec.mttr_high_s[0] < 2 * sim.timing.pod_termination_grace_s + 60.0
    assert sim.lost_victims() == 0


def test_hindsight_bounds_every_policy_in_multi_disruption_with_fine_checkpoints() -> None:
    """In storms of 8 slice failures hindsight bounds every policy once checkpoints come every minute, so that
    the checkpoint grid cannot swap the order (docs/benchmarks.md)."""
    from sim.scenarios import multi_disruption

    base = multi_disruption(seed=20260902, scale=0.1)
    scenario = base.model_copy(update={"timing": base.timing.model_copy(update={"checkpoint_interval_s": 60.0})})
    badput = {p: _high_badput_chip_s(_summary(scenario, p), scenario) for p in POLICIES}
    assert badput["hindsight"] > 0
    for policy, value in badput.items():
        assert badput["hindsight"] <= value, (policy, badput)
