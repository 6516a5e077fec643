"""Garbage-collector settings of the reconciler process, so a planning pass does not pay for a full collection.

A pass allocates a snapshot and a plan (hundreds of thousands of objects at 4,096 slices); with CPython's
default thresholds that triggers generation-2 collections in the middle of the pass, each walking every object
the process holds (informer caches included): a tail of tens of milliseconds that comes and goes from run to
run. Two measures, used identically by the controller and the planner benchmarks:

* `freeze_long_lived()` once the informer caches are synced: what exists then lives for the process's life,
  so it moves to the permanent generation and no later collection walks it (refcounting still frees it);
* `collection_deferred()` around snapshot + plan: no cyclic collection inside the pass; the young
  generations are collected right after it, while the actions are already on their way.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass
class DeferredCollection:
    """What the collection after a pass cost (filled in when the `with` block ends)."""

    collect_ms: float = 0.0


def freeze_long_lived() -> None:
    """Collect once, then exempt every surviving object from future collections."""
    gc.collect()
    gc.freeze()


@contextmanager
def collection_deferred(generation: int = 1) -> Iterator[DeferredCollection]:
    """Disable the cyclic collector for the block, then collect up to `generation` (young ones by default)."""
    stats = DeferredCollection()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield stats
    finally:
        if was_enabled:
            gc.enable()
            started = time.perf_counter()
            gc.collect(generation)
            stats.collect_ms = (time.perf_counter() - started) * 1000.0
