"""A minimal deterministic discrete-event loop.

Why not simpy: the model is a set of state machines reacting to timestamped events, with no long-lived
processes that would benefit from generator coroutines. A heap of (time, sequence) keys gives a total,
seed-independent order (FIFO among equal times), costs no dependency and runs several times faster than
simpy's process/event objects, which matters for multi-year horizons replayed under three policies.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

Action = Callable[[], None]


@dataclass(order=True)
class _Entry:
    time: float
    seq: int
    action: Action = field(compare=False)
    cancelled: bool = field(default=False, compare=False)


class Handle:
    """Lets the scheduler of an event cancel it before it fires."""

    __slots__ = ("_entry",)

    def __init__(self, entry: _Entry) -> None:
        self._entry = entry

    def cancel(self) -> None:
        self._entry.cancelled = True

    @property
    def time(self) -> float:
        return self._entry.time

    @property
    def active(self) -> bool:
        return not self._entry.cancelled


class EventLoop:
    """Runs actions in (time, insertion order); actions may schedule further actions."""

    def __init__(self) -> None:
        self._heap: list[_Entry] = []
        self._seq = itertools.count()
        self.now = 0.0
        self.processed = 0

    def at(self, time: float, action: Action) -> Handle:
        if time < self.now:
            raise ValueError(f"cannot schedule in the past: time={time} < now={self.now}")
        entry = _Entry(time, next(self._seq), action)
        heapq.heappush(self._heap, entry)
        return Handle(entry)

    def after(self, delay: float, action: Action) -> Handle:
        if delay < 0:
            raise ValueError(f"delay must be >= 0, got {delay}")
        return self.at(self.now + delay, action)

    def run(self, until: float, on_advance: Callable[[float], None] | None = None) -> None:
        """Process events with time <= until; `on_advance(now)` is called after each event."""
        heap = self._heap
        while heap and heap[0].time <= until:
            entry = heapq.heappop(heap)
            if entry.cancelled:
                continue
            self.now = entry.time
            entry.action()
            self.processed += 1
            if on_advance is not None:
                on_advance(self.now)
        self.now = max(self.now, until)

    @property
    def pending(self) -> int:
        return sum(1 for e in self._heap if not e.cancelled)
