"""`none`: no preemption at all; a disrupted JobSet waits for capacity (usually its repaired slice)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sim.host import SimHost


class NonePolicy:
    """PriorityClasses with preemptionPolicy: Never and no reconciler."""

    name = "none"
    scheduler_preemption = False

    def attach(self, sim: SimHost) -> None:
        del sim

    def plan_admission(self, now: float) -> None:
        del now  # Kueue without TAS: the simulator's quota model

    def on_change(self) -> None:
        return None
