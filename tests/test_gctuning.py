"""The reconciler's GC settings: nothing collected inside a pass, young generations right after, heap frozen."""

from __future__ import annotations

import gc

from gke_tpu_priority.hotswap.gctuning import collection_deferred, freeze_long_lived


def test_collection_is_deferred_to_the_end_of_the_block_then_young_generations_are_collected() -> None:
    assert gc.isenabled()
    young_before = gc.get_stats()[1]["collections"]
    full_before = gc.get_stats()[2]["collections"]
    with collection_deferred() as deferred:
        assert not gc.isenabled()
        garbage = [[i] for i in range(50_000)]  # would trigger many gen-0 collections with the collector on
        del garbage
        assert gc.get_stats()[1]["collections"] == young_before
    assert gc.isenabled()
    assert gc.get_stats()[1]["collections"] == young_before + 1  # the deferred collect(1)
    assert gc.get_stats()[2]["collections"] == full_before  # no full collection
    assert deferred.collect_ms >= 0.0


def test_a_disabled_collector_stays_disabled() -> None:
    gc.disable()
    try:
        with collection_deferred() as deferred:
            pass
        assert not gc.isenabled() and deferred.collect_ms == 0.0
    finally:
        gc.enable()


def test_freezing_moves_the_live_heap_out_of_reach_of_collections() -> None:
    kept = [{"i": i} for i in range(1000)]
    try:
        freeze_long_lived()
        assert gc.get_freeze_count() >= len(kept)
    finally:
        gc.unfreeze()
    assert gc.get_freeze_count() == 0
