"""Run one scenario under each policy (same seed, identical failure and job streams)."""

from __future__ import annotations

from collections.abc import Callable

from sim.params import Scenario
from sim.policies.base import Policy
from sim.policies.hero import HeroPolicy
from sim.policies.hindsight import HindsightPolicy
from sim.policies.kueue_tas import KueueTASPolicy
from sim.policies.none import NonePolicy
from sim.policies.reconciler import ReconcilerPolicy
from sim.policies.repair_signal import RepairSignalReconciler
from sim.policies.scheduler import SchedulerPolicy, SchedulerRecreatePolicy
from sim.simulator import RunResult, Simulator

POLICIES: dict[str, Callable[[], Policy]] = {
    "none": NonePolicy,
    "scheduler": SchedulerPolicy,
    "scheduler-recreate": SchedulerRecreatePolicy,
    "reconciler": ReconcilerPolicy,
    "kueue-tas": KueueTASPolicy,
    "hero": HeroPolicy,
    "hindsight": HindsightPolicy,
}


WHAT_IF: dict[str, Callable[[], Policy]] = {
    "reconciler+repair-signal": RepairSignalReconciler,
}
"""Policies that are not in the standard bench: what a mechanism would be worth
(`python -m sim whatif`)."""


def run_one(scenario: Scenario, policy: str) -> RunResult:
    return Simulator(scenario, (POLICIES | WHAT_IF)[policy]()).run()
