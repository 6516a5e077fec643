"""The slice memo a caller keeps from pass to pass (`SliceMemo`): it reuses unchanged slices and never changes a
plan, and without one every pass classifies its slices afresh (the planner keeps no state of its own)."""

from __future__ import annotations

from datetime import timedelta

from gke_tpu_priority.hotswap.config import HotswapConfig
from gke_tpu_priority.hotswap.planner import SliceMemo, plan
from gke_tpu_priority.hotswap.planner.world import build_world
from testkit.builders import T0
from tools.bench_planner import build


def test_a_memo_never_changes_the_plan() -> None:
    snapshot, config, memo = build(64).snapshot(), HotswapConfig(), SliceMemo()
    for minutes in (0, 1, 5, 20):
        now = T0 + timedelta(minutes=minutes)
        assert repr(plan(snapshot, now, config, memo)) == repr(plan(snapshot, now, config))


def test_the_memo_reuses_a_slice_classified_the_same_again() -> None:
    snapshot, config, memo = build(32).snapshot(), HotswapConfig(), SliceMemo()
    first = build_world(snapshot, T0, config, memo).slices
    again = build_world(snapshot, T0, config, memo).slices
    reused = set(memo.slices)
    # Every fine slice but the first of each shape takes the fast path that the memo serves.
    assert len(reused) >= len(first) // 2 and reused <= {name for name, found in first.items() if found.usable}
    assert all(again[name] is first[name] for name in reused)


def test_without_a_memo_nothing_carries_over_between_passes() -> None:
    snapshot, config = build(32).snapshot(), HotswapConfig()
    first = build_world(snapshot, T0, config).slices
    again = build_world(snapshot, T0, config).slices
    assert again == first
    assert not any(again[name] is first[name] for name in first)
