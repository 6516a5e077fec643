"""Releases that need only the Workloads: what the reconciler can still give back while another cache is down.

A full pass needs every cache synced and healthy (never plan on a partial view). But one failing watch (a 403 on
pods, a Node watch erroring) must not keep victims held forever: releasing is always safe, and `maxHold` is the
documented backstop. These two rules read nothing but the held Workload itself:

* `maxHold`: held longer than `maxHold` (or with an unreadable `held-since`), as in a full pass;
* reactivated by someone else: `spec.active` is true again while the hold annotations remain.

Capacity-driven and preemptor-gone releases need slices and JobSets, so they wait for the full pass.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from gke_tpu_priority.hotswap.annotations import AnnotationKeys, format_time, parse_time
from gke_tpu_priority.hotswap.config import HotswapConfig
from gke_tpu_priority.hotswap.model import Workload
from gke_tpu_priority.hotswap.planner.actions import (
    Decision,
    EventReason,
    ObjectRef,
    Plan,
    ReleaseReason,
    ReleaseVictim,
)


def backstop_plan(workloads: Iterable[Workload], now: datetime, config: HotswapConfig) -> Plan:
    """Releases for held Workloads past `maxHold` or reactivated externally; wakes up at the next `maxHold`."""
    keys = AnnotationKeys(config.annotation_domain)
    actions: list[ReleaseVictim] = []
    events: list[Decision] = []
    deadlines: list[datetime] = []
    for wl in sorted(workloads, key=lambda w: w.key):
        if not wl.annotations.get(keys.held_by):
            continue
        since = parse_time(wl.annotations.get(keys.held_since, ""))
        if wl.active:
            reason, note = ReleaseReason.REACTIVATED_EXTERNALLY, "reactivated by someone else"
        elif since is None or now - since >= config.max_hold:
            reason, note = ReleaseReason.MAX_HOLD, f"held longer than {config.max_hold}"
        else:
            deadlines.append(since + config.max_hold)
            continue
        op_id = wl.annotations.get(keys.op_id, "")
        ref = ObjectRef("Workload", wl.namespace, wl.name, wl.uid, wl.resource_version)
        actions.append(
            ReleaseVictim(
                workload=ref,
                op_id=op_id,
                reason=reason,
                remove_annotations=keys.victim_hold_keys(),
                set_annotations={keys.released_at: format_time(now)},
            )
        )
        events.append(
            Decision(
                EventReason.VICTIM_RELEASED,
                ObjectRef("Workload", wl.namespace, wl.name, wl.uid),
                f"released ({reason.value}): {note} (while other caches were unavailable)",
                op_id,
            )
        )
    return Plan(now=now, actions=tuple(actions), events=tuple(events), next_wakeup=min(deadlines, default=None))
