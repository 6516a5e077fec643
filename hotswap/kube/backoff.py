"""Jittered exponential backoff for retrying API calls and watches."""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass
class Backoff:
    """Exponential backoff with "equal jitter": delay n is uniform in [c/2, c] with c = min(cap, base * 2**n).

    The jitter spreads clients out after a shared outage (e.g. a control-plane upgrade) instead of
    having them retry in lockstep; the c/2 floor keeps a persistent error (403) from spinning.
    """

    base: float = 0.5
    cap: float = 30.0
    rng: random.Random = field(default_factory=random.Random)
    attempt: int = 0

    def next_delay(self) -> float:
        ceiling = min(self.cap, self.base * (2 ** min(self.attempt, 30)))
        self.attempt += 1
        return self.rng.uniform(ceiling / 2, ceiling)

    def reset(self) -> None:
        self.attempt = 0
