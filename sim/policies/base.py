"""What a hotswap policy contributes to a simulation run."""

from __future__ import annotations

from typing import Protocol

from sim.host import SimHost
from sim.kueue import AdmissionPlan


class Policy(Protocol):
    """A policy decides whether kube-scheduler preempts and may act on every state change."""

    name: str
    scheduler_preemption: bool

    def attach(self, sim: SimHost) -> None:
        """Called once before the run starts."""

    def plan_admission(self, now: float) -> AdmissionPlan | None:
        """Kueue's admission decisions when the policy changes them (TAS); None: the quota-only model."""

    def on_change(self) -> None:
        """Called after each batch of state changes (coalesced per simulated instant)."""
