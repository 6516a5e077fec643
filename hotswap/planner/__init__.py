"""The pure planning core: `plan(snapshot, now, config) -> Plan`, no I/O.

`plan()` is the pass, stage by stage; docs/planner.md describes each stage, the claims ledger they share
(`claims`), the decisions they ask (`victims`, `fence`, `waiting`, `wakeup`, ...) and the invariants (I1-I12 and
the failure cases they are checked on). Everything is recomputed from the snapshot; annotations carry the few facts
that cannot be (who holds whom, since when).
"""

from __future__ import annotations

from datetime import datetime
from functools import partial

from gke_tpu_priority.hotswap.config import HotswapConfig
from gke_tpu_priority.hotswap.model import ClusterSnapshot
from gke_tpu_priority.hotswap.planner.actions import Diagnostics, Plan
from gke_tpu_priority.hotswap.planner.claims import Ledger
from gke_tpu_priority.hotswap.planner.disruption import Disruption, disrupted_units
from gke_tpu_priority.hotswap.planner.fastfail import plan_fast_fails
from gke_tpu_priority.hotswap.planner.inversion import resolve_contested, resolve_inversions
from gke_tpu_priority.hotswap.planner.ops import advance_ops
from gke_tpu_priority.hotswap.planner.preempt import Planned, plan_preemptions
from gke_tpu_priority.hotswap.planner.priority_inversions import contested_inversions, find_inversions
from gke_tpu_priority.hotswap.planner.quarantine import quarantine_actions, quarantined_after, tainted_nodes
from gke_tpu_priority.hotswap.planner.queued_room import queued_room
from gke_tpu_priority.hotswap.planner.release import plan_releases
from gke_tpu_priority.hotswap.planner.rungs import plan_rung_switches
from gke_tpu_priority.hotswap.planner.starvation import starved_units
from gke_tpu_priority.hotswap.planner.wakeup import pass_wakeup
from gke_tpu_priority.hotswap.planner.world import SliceMemo, World, build_world
from gke_tpu_priority.hotswap.slices import SliceHealth

__all__ = ["SliceMemo", "plan"]


def plan(snapshot: ClusterSnapshot, now: datetime, config: HotswapConfig, memo: SliceMemo | None = None) -> Plan:
    """Decide this pass's writes and events from one consistent snapshot. `memo`: the caller's `SliceMemo`, kept
    from pass to pass of one cluster; it saves allocations and never changes the plan."""
    world = build_world(snapshot, now, config, memo)
    ledger = Ledger()
    # 1. Quarantine first: the taints keep restarted preemptors off broken slices, and the holds below free
    #    healthy ones.
    tainted = tainted_nodes(world)
    quarantine = quarantine_actions(world, tainted)
    disrupted = disrupted_units(world)
    inversions = find_inversions(world)
    # 2. Advance open operations. Inversions against a strictly lower preemptor of an open op are resolved among
    #    the ops, in priority order: they take that op over (I9) before it is advanced.
    contested = contested_inversions(world, ledger, inversions)
    resolvers = {uid: partial(resolve_contested, world, ledger, group) for uid, group in contested.items()}
    advance_ops(world, ledger, disrupted.keys(), resolvers)
    # 3. Rung switches: a JobSet whose spot VMs are gone moves to the queued rung instead of taking victims on
    #    spot; its queued quota is booked before releases look for room there.
    room = queued_room(world)
    plan_rung_switches(world, ledger, disrupted, room)
    # 4. New operations, infra-disrupted preemptors first (first call on the victim budget), then starved ones.
    preempted = plan_preemptions(world, ledger, disrupted, starved_units(world, disrupted.keys()))
    # 5. Slice priority inversions, before releases so the slices these ops reserve are not handed to released
    #    victims. Contested preemptors an op taken over later in the pass may have unblocked are tried again.
    rest = [i for i in inversions if i.preemptor.uid not in contested or i.preemptor.uid in ledger.contested_blocked]
    resolve_inversions(world, ledger, rest)
    # 6. Releases, then 7. fast-fail.
    released = plan_releases(world, ledger, preempted.blocked, room)
    plan_fast_fails(world, ledger)
    return Plan(
        now=now,
        actions=tuple(ledger.actions),
        taints=tuple(quarantine),
        events=tuple(ledger.events),
        diagnostics=_diagnostics(world, ledger, disrupted, preempted, released, quarantined_after(tainted, quarantine)),
        next_wakeup=pass_wakeup(world, ledger),
    )


def _diagnostics(
    world: World,
    ledger: Ledger,
    disrupted: dict[str, Disruption],
    preempted: Planned,
    released: int,
    quarantined: int,
) -> Diagnostics:
    health = [s.health for s in world.slices.values()]
    held_now = sum(1 for u in world.annotated if u.held_by is not None) + len(world.stray_held) + ledger.held - released
    return Diagnostics(
        slices_total=len(health),
        slices_unhealthy=health.count(SliceHealth.UNHEALTHY),
        slices_suspect=health.count(SliceHealth.SUSPECT),
        slices_recovering=health.count(SliceHealth.RECOVERING),
        disrupted_preemptors=len(disrupted),
        starved_preemptors=preempted.starved,
        ops_planned=preempted.planned,
        ops_blocked=len(preempted.blocked) - ledger.waiting,
        victims_released=released,
        **ledger.summary(),
        held_workloads=max(0, held_now),
        nodes_quarantined=quarantined,
        exclusions=tuple(
            (reason, len(keys), tuple(sorted(keys)[:5])) for reason, keys in sorted(world.excluded.items())
        ),
    )
