"""`Plan.next_wakeup`: the earliest instant a time-based rule changes the plan without any watch event."""

from __future__ import annotations

from datetime import timedelta

from gke_tpu_priority.hotswap.config import HotswapConfig
from gke_tpu_priority.hotswap.planner import plan
from gke_tpu_priority.hotswap.planner.actions import HoldVictim
from gke_tpu_priority.hotswap.planner.simulate import apply_actions
from testkit.builders import T0, Fleet, JobSetBuilder, NodeBuilder

# Victims at detection: these tests are about detection and planning; evictionDelay has test_eviction_cost.py.
CFG = HotswapConfig(eviction_delay=timedelta(0))


def _fleet() -> Fleet:
    fleet = Fleet().slices("p0", "p1", "v0")
    fleet.run(JobSetBuilder("ml", "high").replicated_job("w", 2), ["p0", "p1"], 1000)
    fleet.run(JobSetBuilder("ml", "low").replicated_job("w", 1), ["v0"], 10)
    return fleet


def test_a_quiet_cluster_needs_no_wakeup() -> None:
    assert plan(_fleet().snapshot(), T0, CFG).next_wakeup is None


def test_suspect_slice_wakes_up_when_the_grace_ends() -> None:
    fleet = _fleet().fail("p0", T0 - timedelta(seconds=5))
    result = plan(fleet.snapshot(), T0, CFG)
    assert result.actions == ()
    assert result.next_wakeup == T0 - timedelta(seconds=5) + CFG.unhealthy_grace
    # At that instant the slice is Unhealthy and the pass acts.
    fleet.evict_pods(fleet.jobsets[next(iter(fleet.jobsets))], "p0", T0)
    assert any(isinstance(a, HoldVictim) for a in plan(fleet.snapshot(), result.next_wakeup, CFG).actions)


def test_recovering_slice_wakes_up_when_stabilisation_ends() -> None:
    fleet = _fleet()
    back = T0 - timedelta(seconds=30)
    for name in fleet.pools["v0"]:
        fleet.node(name, NodeBuilder(name).pool("v0").tpu().ready_since(back))
    assert plan(fleet.snapshot(), T0, CFG).next_wakeup == back + CFG.recovery_stabilization


def test_departed_pods_wake_up_when_their_attribution_expires() -> None:
    fleet = _fleet()
    high = next(j for j in fleet.jobsets.values() if j.name == "high")
    fleet.fail("p0", T0 - timedelta(minutes=30)).depart_pods(high, "p0", T0 - timedelta(minutes=2))
    result = plan(fleet.snapshot(), T0, CFG)
    assert result.next_wakeup == T0 - timedelta(minutes=2) + CFG.attribution_window


def test_holds_wake_up_at_max_hold_and_releases_at_the_settle_time() -> None:
    fleet = _fleet()
    high = next(j for j in fleet.jobsets.values() if j.name == "high")
    fleet.fail("p0", T0 - timedelta(minutes=1)).evict_pods(high, "p0", T0 - timedelta(minutes=1))
    snap = fleet.snapshot()
    first = plan(snap, T0, CFG)
    assert any(isinstance(a, HoldVictim) for a in first.actions)
    assert first.next_wakeup is not None and first.next_wakeup <= T0 + CFG.max_hold
    later = T0 + timedelta(minutes=20)  # departed/evicted evidence has aged out; only the hold remains timed
    held = apply_actions(snap, first.actions, T0)
    result = plan(held, later, CFG)
    assert result.next_wakeup == T0 + CFG.max_hold
    released = apply_actions(held, plan(held, T0 + CFG.max_hold, CFG).actions, T0 + CFG.max_hold)
    after = plan(released, T0 + CFG.max_hold + timedelta(seconds=1), CFG)
    assert after.next_wakeup == T0 + CFG.max_hold + CFG.release_settle


def test_wakeup_is_never_in_the_past() -> None:
    fleet = _fleet().fail("p0", T0 - timedelta(hours=3))
    result = plan(fleet.snapshot(), T0, CFG)
    assert result.next_wakeup is None or result.next_wakeup > T0
