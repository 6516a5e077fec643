"""The pure planning core: `plan(snapshot, now, config) -> Plan`, no I/O."""

from __future__ import annotations

from datetime import datetime

from hotswap.config import HotswapConfig
from hotswap.model import ClusterSnapshot
from hotswap.planner.actions import Diagnostics, Plan
from hotswap.slices import SliceHealth, classify_slices

__all__ = ["plan"]


def plan(snapshot: ClusterSnapshot, now: datetime, config: HotswapConfig) -> Plan:
    """Decide this pass's writes and events from one consistent snapshot (contract; full logic follows)."""
    slices = classify_slices(
        snapshot.nodes,
        now,
        config.unhealthy_grace,
        config.recovery_stabilization,
        config.tolerated_taint_keys,
    )
    health = [s.health for s in slices.values()]
    return Plan(
        now=now,
        diagnostics=Diagnostics(
            slices_total=len(health),
            slices_unhealthy=health.count(SliceHealth.UNHEALTHY),
            slices_suspect=health.count(SliceHealth.SUSPECT),
            slices_recovering=health.count(SliceHealth.RECOVERING),
        ),
    )
