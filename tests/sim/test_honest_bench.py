"""The checkpoint signal is a scenario setting (off in the headline), every tier's badput counts, and a
paired lead must clear a practical margin."""

from __future__ import annotations

from typing import Any

import pytest

from sim.bench import add_tier_badput, tier_demand_chip_s, tier_weights
from sim.params import Scenario
from sim.policies.reconciler import ReconcilerPolicy
from sim.report import half_width, paired_difference, practical_margin, verdict
from sim.runner import run_one
from sim.scenarios import SIGNAL_RUNS, signal_scenarios, standard_scenarios
from sim.simulator import Simulator
from sim.snapshot import CheckpointSignal
from sim.state import Job
from tests.sim.builders import small, two_classes
from tests.sim.test_checkpoint_signal import KEY


def _job(name: str) -> Job:
    scenario = two_classes("one", 1, 1.0, 2)
    return Job(id=0, name=name, cls=scenario.classes[0], work_s=1.0, created=0.0)


def test_a_share_of_jobsets_publishes_the_same_ones_every_time() -> None:
    jobs = [_job(f"high-{i}") for i in range(400)]
    half = CheckpointSignal(KEY, 1800.0, 0.0, share=0.5, seed=7)
    publishing = {j.name for j in jobs if half.publishes(j)}
    assert 150 < len(publishing) < 250  # about half of 400
    again = CheckpointSignal(KEY, 1800.0, 999.0, share=0.5, seed=7)
    assert {j.name for j in jobs if again.publishes(j)} == publishing  # a per-JobSet draw, not per pass
    other_seed = CheckpointSignal(KEY, 1800.0, 0.0, share=0.5, seed=8)
    assert {j.name for j in jobs if other_seed.publishes(j)} != publishing
    assert all(CheckpointSignal(KEY, 1800.0, 0.0, share=1.0).publishes(j) for j in jobs)
    assert not any(CheckpointSignal(KEY, 1800.0, 0.0, share=0.0).publishes(j) for j in jobs)


def test_a_jobset_that_does_not_publish_has_no_last_checkpoint() -> None:
    job = _job("quiet")
    job.run_start = 0.0
    assert CheckpointSignal(KEY, 1800.0, 4000.0, share=1.0).last(job) == 3600.0
    assert CheckpointSignal(KEY, 1800.0, 4000.0, share=0.0).last(job) is None


def test_the_reconciler_snapshot_carries_no_annotation_at_share_zero() -> None:
    scenario = two_classes("one", 1, 2.0, 2).model_copy(update={"checkpoint_share": 0.0})
    sim = Simulator(scenario, ReconcilerPolicy())
    sim.run()
    assert isinstance(sim.policy, ReconcilerPolicy)
    assert any(j.run_start is not None for j in sim.live)
    assert not any(KEY in js.annotations for js in sim.policy.snapshot().jobsets)


def test_the_checkpoint_share_is_bounded() -> None:
    with pytest.raises(ValueError, match="checkpoint_share"):
        Scenario(checkpoint_share=1.5)


def test_the_headline_scenarios_publish_nothing_and_the_signal_runs_do() -> None:
    assert all(not sc.checkpoint_signal for sc in standard_scenarios(scale=0.01))
    variants = signal_scenarios(scale=0.01)
    assert [(sc.name, share, n) for sc, share, n in variants] == list(SIGNAL_RUNS)
    for sc, share, _ in variants:
        assert sc.checkpoint_signal and sc.checkpoint_share == share


@pytest.mark.parametrize("policy", ["kueue-tas", "hero", "scheduler"])
def test_the_peers_do_not_read_the_checkpoint_signal(policy: str) -> None:
    """What lets the signal table pair the reconciler's runs with the peers' no-signal runs."""
    scenario = small(seed=5, horizon_h=60.0)
    with_signal = run_one(scenario, policy).summary
    without = run_one(scenario.model_copy(update={"checkpoint_signal": False}), policy).summary
    assert with_signal == without


def test_tier_badput_is_each_tiers_demand_minus_its_useful_time_weighted_by_priority() -> None:
    scenario = two_classes("one", 1, 10.0, 4, high=(2, 1, 50.0), low=(1, 3, 6.0))
    assert tier_weights(scenario) == {"high": 1.0, "low": 0.5}
    demand = tier_demand_chip_s(scenario)
    # 4 slices: the high JobSet's 2, then the 2 left of the low tier's 3 (the excess is no policy's badput).
    assert demand == {"high": 2 * 16 * 10 * 3600.0, "low": 2 * 16 * 10 * 3600.0}
    policies: dict[str, Any] = {
        "a": {"useful_chip_s_by_tier": {"high": demand["high"] - 3600.0, "low": demand["low"] - 7200.0}},
        "b": {"useful_chip_s_by_tier": {"high": demand["high"]}},  # no low work at all
    }
    add_tier_badput(policies, scenario)
    assert policies["a"]["badput_by_tier_chip_h"] == {"high": 1.0, "low": 2.0}
    assert policies["a"]["weighted_badput_chip_h"] == 1.0 + 0.5 * 2.0
    assert policies["b"]["badput_by_tier_chip_h"] == {"high": 0.0, "low": 320.0}
    assert policies["b"]["weighted_badput_chip_h"] == 160.0
    add_tier_badput(policies, scenario, seeds=2)  # pooled over two seeds: twice the demand
    assert policies["b"]["badput_by_tier_chip_h"]["high"] == 320.0


def _block(mine: list[float], peer: list[float]) -> dict[str, Any]:
    per_seed = {
        str(i): {"reconciler": {"f": r}, "hero": {"f": p}} for i, (r, p) in enumerate(zip(mine, peer, strict=True))
    }
    return {"per_seed": per_seed, "policies": {"reconciler": {}, "hero": {}}}


def test_a_lead_inside_the_practical_margin_is_a_tie() -> None:
    # A constant 0.1 chip-h gap (a modelled 2 s latency) on 1,140 chip-h: no spread, but under 1 % of the figure.
    constant = _block([1140.0, 1140.0, 1140.0, 1140.0], [1140.1, 1140.1, 1140.1, 1140.1])
    mean, se, n = paired_difference(constant, "hero", "f")
    assert practical_margin(constant, "hero", "f") == pytest.approx(11.401)
    assert verdict(mean, half_width(se, n)) == "ahead"  # the interval alone would call it
    assert verdict(mean, half_width(se, n), practical_margin(constant, "hero", "f")) == "tie"
    # -21.7 on 1,227 (1.8 %), outside the interval: a lead.
    clear = _block([1205.0, 1206.0, 1204.0, 1205.0], [1227.0, 1228.0, 1226.0, 1227.0])
    mean, se, n = paired_difference(clear, "hero", "f")
    assert verdict(mean, half_width(se, n), practical_margin(clear, "hero", "f")) == "ahead"
    # Behind by more than the margin is behind.
    behind = _block([1227.0, 1228.0, 1226.0, 1227.0], [1205.0, 1206.0, 1204.0, 1205.0])
    mean, se, n = paired_difference(behind, "hero", "f")
    assert verdict(mean, half_width(se, n), practical_margin(behind, "hero", "f")) == "**behind**"
    # Tiny figures keep the 0.05 chip-h floor.
    assert practical_margin(_block([0.0, 0.0], [1.0, 1.0]), "hero", "f") == 0.05


def test_under_recreate_the_scheduler_pattern_recovers_sooner_than_under_blocking_recreate() -> None:
    """JobSet's default restart strategy recreates the crashed child's Job without waiting for its healthy
    siblings' 30 s grace: the leader preempts earlier, and nothing else about the pattern changes."""
    scenario = small(seed=3, horizon_h=300.0)
    blocking = run_one(scenario, "scheduler").summary
    recreate = run_one(scenario, "scheduler-recreate").summary
    assert blocking["mttr_lasting_s"]["n"] > 0 and recreate["mttr_lasting_s"]["n"] > 0
    assert recreate["mttr_lasting_s"]["p50"] < blocking["mttr_lasting_s"]["p50"]
    assert recreate["lost_victims"] == 0
    assert recreate["actions"]["kube_scheduler_pod_preemptions"] > 0


def test_the_standing_table_names_the_peers_the_reconciler_is_behind() -> None:
    from sim.report import standing_markdown

    def runs(mine: float, peer: float) -> dict[str, Any]:
        fields = ("weighted_badput_chip_h", "victim_lost_chip_h", "high_badput_chip_h")
        return {
            "reconciler": dict.fromkeys(fields, mine),
            "hero": dict.fromkeys(fields, peer),
            "kueue-tas": dict.fromkeys(fields, mine),
        }

    per_seed = {str(i): runs(100.0 + i, 80.0 + i * 1.1) for i in range(4)}
    report = {"scenarios": {"ladder": {"per_seed": per_seed, "policies": per_seed["0"]}}}
    row = next(line for line in standing_markdown(report).splitlines() if line.startswith("| ladder"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    # The TAS peers run the ladder like for like: no cell carries a caveat.
    assert cells[1] == "hero"  # weighted badput: behind
    assert cells[2] == "kueue-tas"  # tie (identical figures)
    assert cells[4] == "hero"  # victims' loss: behind


def test_rescore_recomputes_the_tier_badput_from_the_recorded_figures() -> None:
    from sim.bench import rescore

    scenario = two_classes("one", 1, 10.0, 4, high=(2, 1, 50.0), low=(1, 3, 6.0))
    demand = tier_demand_chip_s(scenario)
    stats = {"useful_chip_s_by_tier": {"high": demand["high"] - 3600.0, "low": demand["low"]}}
    block = {
        "params": scenario.model_dump(mode="json"),
        "per_seed": {"1": {"p": dict(stats, weighted_badput_chip_h=-1.0)}},
        "policies": {"p": dict(stats)},
    }
    report = rescore({"scenarios": {"one": block}, "signal": {}})
    assert report["scenarios"]["one"]["per_seed"]["1"]["p"]["weighted_badput_chip_h"] == 1.0
    assert report["scenarios"]["one"]["policies"]["p"]["badput_by_tier_chip_h"] == {"high": 1.0, "low": 0.0}
    assert report["scenarios"]["one"]["tier_weights"] == {"high": 1.0, "low": 0.5}
