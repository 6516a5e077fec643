"""Simulated training code publishes `last-checkpoint`, and the reconciler's victims then lose less."""

from __future__ import annotations

from datetime import timedelta

import pytest

from gke_tpu_priority.hotswap.annotations import AnnotationKeys, parse_time
from gke_tpu_priority.hotswap.config import HotswapConfig
from sim.params import ReconcilerKnobs, Scenario
from sim.policies.reconciler import ReconcilerPolicy
from sim.simulator import Simulator
from sim.snapshot import CheckpointSignal, at
from tests.sim.builders import small, two_classes

KEY = AnnotationKeys(HotswapConfig().annotation_domain).last_checkpoint


def _without_signal(scenario: Scenario) -> Scenario:
    return scenario.model_copy(update={"checkpoint_signal": False})


def test_the_last_checkpoint_is_on_the_checkpoint_grid_of_the_running_attempt() -> None:
    sim = Simulator(two_classes("one", 1, 2.0, 2), ReconcilerPolicy())
    sim.run()
    job = next(j for j in sim.live if j.run_start is not None)
    start = job.run_start
    assert start is not None
    signal = CheckpointSignal(KEY, 1800.0, start + 1799.0)
    assert signal.last(job) is None  # no checkpoint yet in this attempt
    assert CheckpointSignal(KEY, 1800.0, start + 1800.0).last(job) == start + 1800.0
    assert CheckpointSignal(KEY, 1800.0, start + 5000.0).last(job) == start + 3600.0
    assert CheckpointSignal(KEY, 0.0, start + 5000.0).last(job) is None  # no checkpoints at all


def test_the_reconciler_snapshot_carries_the_annotation_unless_the_signal_is_off() -> None:
    sim = Simulator(two_classes("one", 1, 2.0, 2), ReconcilerPolicy())
    sim.run()
    policy = sim.policy
    assert isinstance(policy, ReconcilerPolicy)
    quiet = Simulator(_without_signal(two_classes("one", 1, 2.0, 2)), ReconcilerPolicy())
    quiet.run()
    assert isinstance(quiet.policy, ReconcilerPolicy)
    assert not any(KEY in js.annotations for js in quiet.policy.snapshot().jobsets)
    snap = policy.snapshot()
    running = [j for j in sim.live if j.run_start is not None]
    assert running
    for job in running:
        js = next(x for x in snap.jobsets if x.name == job.name)
        published = parse_time(js.annotations[KEY])
        assert job.run_start is not None
        expected = at(job.run_start + 1800.0 * ((sim.now - job.run_start) // 1800.0))
        assert published is not None and abs(published - expected) < timedelta(seconds=1)


def test_victims_lose_less_when_workloads_publish_checkpoints() -> None:
    scenario = small(seed=5, horizon_h=200.0)
    signalled = Simulator(scenario, ReconcilerPolicy()).run().summary
    blind = Simulator(_without_signal(scenario), ReconcilerPolicy()).run().summary
    assert blind["policy_victim_lost_chip_s"] > 0
    # Without the signal the planner cannot tell a victim that just checkpointed from one that did not: the same
    # policy blind loses about twice as much here (0.55 of it signalled since held victims go back onto
    # Recovering slices, 0.48 before; a signal that were ignored would give about 1).
    assert signalled["policy_victim_lost_chip_s"] < 0.6 * blind["policy_victim_lost_chip_s"]
    assert signalled["lost_victims"] == blind["lost_victims"] == 0


def test_the_scenario_knobs_default_to_the_reconciler_defaults() -> None:
    assert ReconcilerKnobs().eviction_delay_s == HotswapConfig().eviction_delay.total_seconds()
    assert ReconcilerKnobs().eviction_delay_min_loss_s == HotswapConfig().eviction_delay_min_loss.total_seconds()
    assert ReconcilerKnobs().lower_tier_eviction_delay_s == HotswapConfig().lower_tier_eviction_delay.total_seconds()
    assert Scenario.model_fields["checkpoint_signal"].default is True


def test_the_scenario_eviction_delay_reaches_the_planner() -> None:
    scenario = small(seed=5, horizon_h=0.01).model_copy(update={"reconciler": ReconcilerKnobs(eviction_delay_s=25.0)})
    policy = ReconcilerPolicy()
    Simulator(scenario, policy).run()  # attaches
    assert policy.config.eviction_delay == timedelta(seconds=25)
    gated = scenario.model_copy(
        update={"reconciler": ReconcilerKnobs(eviction_delay_s=25.0, eviction_delay_min_loss_s=90.0)}
    )
    gated_policy = ReconcilerPolicy()
    Simulator(gated, gated_policy).run()
    assert gated_policy.config.eviction_delay_min_loss == timedelta(seconds=90)
    explicit = ReconcilerPolicy(HotswapConfig(eviction_delay=timedelta(seconds=5)))
    Simulator(scenario, explicit).run()
    assert explicit.config.eviction_delay == timedelta(seconds=5)  # an explicit config wins


def test_eviction_delay_knob_is_bounded() -> None:
    with pytest.raises(ValueError):
        ReconcilerKnobs(eviction_delay_s=601.0)
