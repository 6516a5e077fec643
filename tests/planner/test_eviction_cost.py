"""What an eviction throws away: victims are ranked by chips x progress since their last checkpoint,
and `evictionDelay` keeps a short failure from evicting anyone."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from gke_tpu_priority.hotswap.annotations import format_time
from gke_tpu_priority.hotswap.config import HotswapConfig
from gke_tpu_priority.hotswap.model import PodPhase
from gke_tpu_priority.hotswap.planner import plan
from gke_tpu_priority.hotswap.planner.actions import EventReason, RecordOp
from gke_tpu_priority.hotswap.planner.disruption import disrupted_units
from gke_tpu_priority.hotswap.planner.world import build_world
from testkit.builders import LONG_AGO, T0, Fleet, JobSetBuilder, PodBuilder
from tests.planner.test_planner_matrix import CFG, FAILED_AT, KEYS, disrupted_fleet, held, reasons, run


def _two_lows(checkpoints: dict[str, str]) -> Fleet:
    """High on p0+p1 (p0 failed); lows `alpha` on v0 and `zeta` on v1, both running for an hour."""
    fleet = Fleet().slices("p0", "p1", "v0", "v1")
    high = fleet.run(JobSetBuilder("ml", "high").replicated_job("w", 2), ["p0", "p1"], 1000)
    for name, pool in (("alpha", "v0"), ("zeta", "v1")):
        js = JobSetBuilder("ml", name).replicated_job("w", 1)
        if name in checkpoints:
            js.annotation(KEYS.last_checkpoint, checkpoints[name])
        fleet.run(js, [pool], 10)
    fleet.fail("p0", FAILED_AT).evict_pods(high, "p0", FAILED_AT)
    return fleet


def test_victim_that_just_checkpointed_is_held_instead_of_one_with_an_hour_at_risk() -> None:
    assert held(run(_two_lows({}).snapshot())) == ["alpha"]  # equal risk: by name
    fresh = format_time(T0 - timedelta(minutes=2))
    assert held(run(_two_lows({"zeta": fresh}).snapshot())) == ["zeta"]


def test_the_more_recent_checkpoint_wins() -> None:
    older, newer = format_time(T0 - timedelta(minutes=20)), format_time(T0 - timedelta(minutes=3))
    assert held(run(_two_lows({"alpha": older, "zeta": newer}).snapshot())) == ["zeta"]
    assert held(run(_two_lows({"alpha": newer, "zeta": older}).snapshot())) == ["alpha"]


@pytest.mark.parametrize("value", ["yesterday", "", "2026-13-01T00:00:00Z"])
def test_a_malformed_checkpoint_is_ignored(value: str) -> None:
    # zeta's annotation says nothing usable: both have an hour at risk, and the name decides.
    assert held(run(_two_lows({"zeta": value}).snapshot())) == ["alpha"]


def test_a_checkpoint_from_before_the_attempt_counts_from_the_attempt() -> None:
    world = build_world(_two_lows({"zeta": format_time(LONG_AGO - timedelta(hours=5))}).snapshot(), T0, CFG)
    zeta = next(u for u in world.units.values() if u.jobset.name == "zeta")
    assert zeta.progress_at_risk_s(T0) == pytest.approx((T0 - LONG_AGO).total_seconds())
    assert zeta.chips == 16


def test_a_checkpoint_in_the_future_risks_nothing() -> None:
    world = build_world(_two_lows({"zeta": format_time(T0 + timedelta(minutes=5))}).snapshot(), T0, CFG)
    zeta = next(u for u in world.units.values() if u.jobset.name == "zeta")
    assert zeta.progress_at_risk_s(T0) == 0.0


def test_a_restarted_victim_risks_only_what_its_current_attempt_ran() -> None:
    fleet = _two_lows({})
    snap = fleet.snapshot()
    # alpha's JobSet restarted 5 minutes ago (attempt 1): its new pods are what runs now.
    restarted = T0 - timedelta(minutes=5)
    alpha = next(js for js in snap.jobsets if js.name == "alpha")
    pods = tuple(
        PodBuilder(p.namespace, p.name, p.jobset_name)
        .job(p.replicated_job_name, p.job_index)
        .attempt(1)
        .on(p.node_name or "", p.node_pool)
        .phase(PodPhase.RUNNING)
        .priority(p.priority)
        .created(restarted)
        .obj()
        if p.jobset_name == "alpha"
        else p
        for p in snap.pods
    )
    snap = replace(
        snap,
        pods=pods,
        jobsets=tuple(replace(js, restarts=1) if js is alpha else js for js in snap.jobsets),
    )
    world = build_world(snap, T0, CFG)
    unit = next(u for u in world.units.values() if u.jobset.name == "alpha")
    assert unit.progress_at_risk_s(T0) == pytest.approx(300.0)


# --- evictionDelay ---------------------------------------------------------------------------------------------


def _delayed(seconds: float) -> HotswapConfig:
    return HotswapConfig(eviction_delay=timedelta(seconds=seconds))


def test_within_the_eviction_delay_nobody_is_held_and_the_pass_wakes_when_it_ends() -> None:
    fleet, _ = disrupted_fleet({"low": 10})
    snap = fleet.snapshot()
    assert held(plan(snap, T0, CFG)) == ["low"]  # no delay: held at once
    config = _delayed(300)
    result = run(snap, config)
    assert held(result) == []
    assert not any(isinstance(a, RecordOp) for a in result.actions)
    assert EventReason.BLOCKED not in reasons(result)  # waiting is not a refusal
    assert result.diagnostics.ops_waiting == 1 and result.diagnostics.ops_blocked == 0
    world = build_world(snap, T0, config)
    evidence = next(iter(disrupted_units(world).values()))
    assert result.next_wakeup == evidence.since + timedelta(seconds=300)


def test_once_the_eviction_delay_has_passed_the_victim_is_held() -> None:
    fleet, _ = disrupted_fleet({"low": 10})
    # The failure is a minute old (FAILED_AT): a 30 s delay is over.
    result = run(fleet.snapshot(), _delayed(30))
    assert held(result) == ["low"]
    assert result.diagnostics.ops_waiting == 0


def test_a_spare_slice_is_taken_at_once_whatever_the_delay() -> None:
    fleet, _ = disrupted_fleet({"low": 10})
    fleet.slices("spare")
    result = run(fleet.snapshot(), _delayed(600))
    record = next(a for a in result.actions if isinstance(a, RecordOp))
    assert record.op is not None and record.op.slices == ("spare",)
    assert held(result) == []


def test_eviction_delay_is_validated() -> None:
    assert HotswapConfig.model_validate({"evictionDelay": "45s"}).eviction_delay == timedelta(seconds=45)
    with pytest.raises(ValueError, match=r"eviction_delay|evictionDelay"):
        HotswapConfig.model_validate({"evictionDelay": "11m"})
    with pytest.raises(ValueError):
        HotswapConfig.model_validate({"evictionDelay": -1})


# --- evictionDelayMinLoss --------------------------------------------------------------------------------------


def _cost_gated(delay_s: float, min_loss: timedelta) -> HotswapConfig:
    return HotswapConfig(eviction_delay=timedelta(seconds=delay_s), eviction_delay_min_loss=min_loss)


def test_a_victim_that_has_just_checkpointed_is_taken_at_once_despite_the_delay() -> None:
    fresh = format_time(T0 - timedelta(minutes=2))
    result = run(_two_lows({"zeta": fresh}).snapshot(), _cost_gated(300, timedelta(minutes=5)))
    assert held(result) == ["zeta"]
    assert result.diagnostics.ops_waiting == 0


def test_a_victim_with_more_at_risk_than_the_limit_waits_out_the_delay() -> None:
    stale = format_time(T0 - timedelta(minutes=20))
    snap = _two_lows({"alpha": stale, "zeta": stale}).snapshot()
    config = _cost_gated(300, timedelta(minutes=5))
    result = run(snap, config)
    assert held(result) == []
    assert not any(isinstance(a, RecordOp) for a in result.actions)
    assert EventReason.BLOCKED not in reasons(result)
    assert result.diagnostics.ops_waiting == 1
    evidence = next(iter(disrupted_units(build_world(snap, T0, config)).values()))
    assert result.next_wakeup == evidence.since + timedelta(seconds=300)
    # Once the failure has outlasted the delay the same victim set is taken.
    later = run(snap, _cost_gated(30, timedelta(minutes=5)))
    assert held(later) == ["alpha"]


def test_the_limit_compares_each_victims_own_risk() -> None:
    at_risk = format_time(T0 - timedelta(minutes=4))
    gated = _cost_gated(300, timedelta(minutes=5))
    assert held(run(_two_lows({"alpha": at_risk, "zeta": at_risk}).snapshot(), gated)) == ["alpha"]
    stricter = _cost_gated(300, timedelta(minutes=3))
    assert held(run(_two_lows({"alpha": at_risk, "zeta": at_risk}).snapshot(), stricter)) == []


def test_a_zero_limit_delays_every_eviction_as_before() -> None:
    fresh = format_time(T0 - timedelta(seconds=1))
    assert held(run(_two_lows({"zeta": fresh}).snapshot(), _cost_gated(300, timedelta(0)))) == []


def test_eviction_delay_min_loss_is_validated() -> None:
    parsed = HotswapConfig.model_validate({"evictionDelay": "60s", "evictionDelayMinLoss": "5m"})
    assert parsed.eviction_delay_min_loss == timedelta(minutes=5)
    with pytest.raises(ValueError, match=r"eviction_delay_min_loss|evictionDelayMinLoss"):
        HotswapConfig.model_validate({"evictionDelayMinLoss": "25h"})


# --- lowerTierEvictionDelay ----------------------------------------------------------------------------------


def _tiered(
    top: int | None, lower: timedelta = timedelta(minutes=20), floor: int | None = None, min_loss_s: float = 300
) -> HotswapConfig:
    """`evictionDelay` 30 s; preemptors below `top` wait `lower` for costly victims; tiers below `floor` may not
    preempt (`preemptorMinPriority`)."""
    return HotswapConfig(
        eviction_delay=timedelta(seconds=30),
        eviction_delay_min_loss=timedelta(seconds=min_loss_s),
        lower_tier_eviction_delay=lower,
        top_tier_priority=top,
        preemptor_min_priority=floor,
    )


def test_a_preemptor_below_the_top_tier_waits_longer_for_costly_victims() -> None:
    """The failed JobSet (priority 1000) has waited 1 min; both victims have an hour at risk."""
    snap = _two_lows({}).snapshot()
    assert held(run(snap, _tiered(top=1000))) == ["alpha"]  # the top tier itself: its 30 s are over
    assert held(run(snap, _tiered(top=None))) == ["alpha"]  # no tiers known: everyone waits evictionDelay
    below = run(snap, _tiered(top=2000))
    assert held(below) == [] and below.diagnostics.ops_waiting == 1
    evidence = next(iter(disrupted_units(build_world(snap, T0, _tiered(top=2000))).values()))
    assert below.next_wakeup == evidence.since + timedelta(minutes=20)
    # Once the failure has outlasted the lower tier's delay, it takes the same victim.
    assert held(run(snap, _tiered(top=2000, lower=timedelta(seconds=45)))) == ["alpha"]


def test_nobody_waits_longer_for_opportunistic_victims() -> None:
    """Victims in a tier that may not preempt (below `preemptorMinPriority`, e.g. `best-effort`) are taken after
    `evictionDelay` by any tier; a working-tier victim (control: floor below it) makes a lower tier wait."""
    snap = _two_lows({}).snapshot()  # the lows have priority 10
    assert held(run(snap, _tiered(top=2000, floor=100))) == ["alpha"]
    assert held(run(snap, _tiered(top=2000, floor=5))) == []


def test_without_the_cost_gate_a_lower_tier_waits_its_own_delay_for_every_victim() -> None:
    snap = _two_lows({"zeta": format_time(T0 - timedelta(minutes=2))}).snapshot()
    assert held(run(snap, _tiered(top=2000, min_loss_s=0))) == []
    assert held(run(snap, _tiered(top=1000, min_loss_s=0))) == ["zeta"]


def test_a_lower_tier_takes_a_cheap_victim_at_once() -> None:
    fresh = format_time(T0 - timedelta(minutes=2))
    result = run(_two_lows({"zeta": fresh}).snapshot(), _tiered(top=2000))
    assert held(result) == ["zeta"] and result.diagnostics.ops_waiting == 0


def _lasting(checkpoint: str | None = None) -> Fleet:
    """High (priority 1000) on p0+p1, low (10, an hour without a checkpoint unless `checkpoint`) on v0; p0's
    nodes were deleted (a spot VM past its notice): a failure that cannot be a transient."""
    fleet = Fleet().slices("p0", "p1", "v0")
    high = fleet.run(JobSetBuilder("ml", "high").replicated_job("w", 2), ["p0", "p1"], 1000)
    low = JobSetBuilder("ml", "low").replicated_job("w", 1)
    if checkpoint is not None:
        low.annotation(KEYS.last_checkpoint, checkpoint)
    fleet.run(low, ["v0"], 10)
    fleet.fail("p0", FAILED_AT, how="deleted", hosts=4).evict_pods(high, "p0", FAILED_AT, "DeletionByTaintManager")
    return fleet


def test_a_lower_tier_waits_its_delay_for_a_costly_victim_even_when_the_failure_is_lasting() -> None:
    """The lower tier's delay is the price of a costly victim, not a bet on the slice coming back: a deleted node
    waits it out too."""
    snap = _lasting().snapshot()
    config = _tiered(top=2000)
    evidence = next(iter(disrupted_units(build_world(snap, T0, config)).values()))
    assert evidence.lasting
    waiting = plan(snap, evidence.since + timedelta(seconds=45), config)
    assert held(waiting) == [] and waiting.diagnostics.ops_waiting == 1
    assert waiting.next_wakeup == evidence.since + timedelta(minutes=20)
    assert held(plan(snap, evidence.since + timedelta(minutes=20), config)) == ["low"]


def test_a_lasting_failure_is_not_waited_for_by_the_top_tier_nor_for_cheap_or_opportunistic_victims() -> None:
    """Controls: evictionDelay alone is a bet on the failure healing, which a deleted node does not."""
    snap = _lasting().snapshot()
    since = next(iter(disrupted_units(build_world(snap, T0, _tiered(top=1000))).values())).since
    at_detection = since + timedelta(seconds=1)
    assert held(plan(snap, at_detection, _tiered(top=1000))) == ["low"]  # the top tier
    assert held(plan(snap, at_detection, _tiered(top=2000, floor=100))) == ["low"]  # an opportunistic victim
    cheap = _lasting(checkpoint=format_time(since - timedelta(minutes=2))).snapshot()
    assert held(plan(cheap, at_detection, _tiered(top=2000))) == ["low"]  # a victim that just checkpointed


def test_lower_tier_eviction_delay_is_validated_against_eviction_delay() -> None:
    parsed = HotswapConfig.model_validate({"lowerTierEvictionDelay": "30m", "topTierPriority": 2000000})
    assert parsed.lower_tier_eviction_delay == timedelta(minutes=30) and parsed.top_tier_priority == 2_000_000
    with pytest.raises(ValueError, match=r"lowerTierEvictionDelay \(30s\) is shorter than evictionDelay \(60s\)"):
        HotswapConfig.model_validate({"lowerTierEvictionDelay": "30s", "evictionDelay": "60s"})


# --- failures that cannot be transients are not waited for -----------------------------------------------------


def _high_and_low(how: str, reason: str = "DeletionByTaintManager") -> Fleet:
    """High on p0+p1 and low on v0; p0 failed `how`, the high's pods there disrupted with `reason`."""
    fleet = Fleet().slices("p0", "p1", "v0")
    high = fleet.run(JobSetBuilder("ml", "high").replicated_job("w", 2), ["p0", "p1"], 1000)
    fleet.run(JobSetBuilder("ml", "low").replicated_job("w", 1), ["v0"], 10)
    fleet.fail("p0", FAILED_AT, how=how, hosts=4).evict_pods(high, "p0", FAILED_AT, reason)
    return fleet


@pytest.mark.parametrize(
    ("how", "reason", "lasting"),
    [
        ("unreachable", "DeletionByTaintManager", False),
        ("not-ready", "DeletionByTaintManager", False),
        ("deleted", "DeletionByTaintManager", True),  # the VMs were deleted: a spot VM past its notice, a recreate
        ("not-ready", "TerminationByKubelet", True),  # graceful node shutdown: a spot notice or a maintenance stop
    ],
)
def test_the_delay_waits_only_for_failures_that_can_be_transients(how: str, reason: str, lasting: bool) -> None:
    snap = _high_and_low(how, reason).snapshot()
    evidence = next(iter(disrupted_units(build_world(snap, T0, CFG)).values()))
    assert evidence.lasting is lasting
    for config in (_delayed(300), _cost_gated(300, timedelta(minutes=5))):
        result = run(snap, config)
        assert held(result) == (["low"] if lasting else [])
        assert result.diagnostics.ops_waiting == (0 if lasting else 1)


def test_by_default_a_costly_victim_waits_a_minute_and_a_fresh_checkpoint_does_not() -> None:
    default = HotswapConfig()
    assert (default.eviction_delay, default.eviction_delay_min_loss) == (timedelta(seconds=60), timedelta(minutes=10))
    costly = _two_lows({}).snapshot()  # both lows have run for hours without a checkpoint
    since = next(iter(disrupted_units(build_world(costly, T0, default)).values())).since
    assert held(plan(costly, since + timedelta(seconds=30), default)) == []
    assert held(plan(costly, since + timedelta(seconds=60), default)) == ["alpha"]
    cheap = _two_lows({"zeta": format_time(since - timedelta(minutes=3))}).snapshot()
    assert held(plan(cheap, since + timedelta(seconds=30), default)) == ["zeta"]
