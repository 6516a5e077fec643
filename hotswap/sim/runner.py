"""Run one scenario under each policy (same seed, identical failure and job streams)."""

from __future__ import annotations

from collections.abc import Callable

from gke_tpu_priority.hotswap.sim.params import Scenario
from gke_tpu_priority.hotswap.sim.policies.base import Policy
from gke_tpu_priority.hotswap.sim.policies.hero import HeroPolicy
from gke_tpu_priority.hotswap.sim.policies.hindsight import HindsightPolicy
from gke_tpu_priority.hotswap.sim.policies.kueue_tas import KueueTASPolicy
from gke_tpu_priority.hotswap.sim.policies.none import NonePolicy
from gke_tpu_priority.hotswap.sim.policies.reconciler import ReconcilerPolicy
from gke_tpu_priority.hotswap.sim.policies.repair_signal import RepairSignalReconciler
from gke_tpu_priority.hotswap.sim.policies.scheduler import SchedulerPolicy, SchedulerRecreatePolicy
from gke_tpu_priority.hotswap.sim.simulator import RunResult, Simulator

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
(`python -m gke_tpu_priority.hotswap.sim whatif`)."""


def run_one(scenario: Scenario, policy: str) -> RunResult:
    return Simulator(scenario, (POLICIES | WHAT_IF)[policy]()).run()
