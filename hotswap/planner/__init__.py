"""The pure planning core: `plan(snapshot, now, config) -> Plan`, no I/O.

One pass: index the snapshot, continue/finish/abort open operations, plan new operations for infra-disrupted
preemptors and then for starved ones (admitted, pods unbound past `starvationGrace`) (spares first, then minimal
lower-priority victim sets), resolve slice priority inversions (lower-priority
work in a higher-priority JobSet's slice), release held victims, and optionally
fast-fail opted-in pods on unreachable nodes; before all that, keep new pods off Unhealthy slices (the quarantine
taint). Everything is recomputed from the snapshot; annotations carry
the few facts that cannot be (who holds whom, since when).
"""

from __future__ import annotations

from datetime import datetime
from functools import partial

from gke_tpu_priority.hotswap.annotations import is_true
from gke_tpu_priority.hotswap.config import HotswapConfig
from gke_tpu_priority.hotswap.model import ClusterSnapshot
from gke_tpu_priority.hotswap.planner.actions import (
    Diagnostics,
    FastFailPod,
    HoldVictim,
    ObjectRef,
    Plan,
    ReleaseVictim,
    make_op_id,
)
from gke_tpu_priority.hotswap.planner.claims import Ledger
from gke_tpu_priority.hotswap.planner.disruption import disrupted_units
from gke_tpu_priority.hotswap.planner.inversion import (
    contested_inversions,
    find_inversions,
    resolve_contested,
    resolve_inversions,
)
from gke_tpu_priority.hotswap.planner.ops import advance_ops
from gke_tpu_priority.hotswap.planner.preempt import plan_preemptions
from gke_tpu_priority.hotswap.planner.quarantine import quarantine_actions, quarantined_after, tainted_nodes
from gke_tpu_priority.hotswap.planner.release import plan_releases, queued_room
from gke_tpu_priority.hotswap.planner.rungs import plan_rung_switches
from gke_tpu_priority.hotswap.planner.starvation import starved_units
from gke_tpu_priority.hotswap.planner.wakeup import next_wakeup
from gke_tpu_priority.hotswap.planner.world import World, build_world
from gke_tpu_priority.hotswap.slices import UNREACHABLE_TAINT, SliceHealth

__all__ = ["plan"]


def plan(snapshot: ClusterSnapshot, now: datetime, config: HotswapConfig) -> Plan:
    """Decide this pass's writes and events from one consistent snapshot."""
    world = build_world(snapshot, now, config)
    # First: the taints keep restarted preemptors off broken slices, and the holds below free healthy ones.
    tainted = tainted_nodes(world)
    quarantine = quarantine_actions(world, tainted)
    ledger = Ledger()
    disrupted = disrupted_units(world)
    inversions = find_inversions(world)
    # Inversions against a strictly lower preemptor of an open op are resolved among the ops, in priority
    # order: they take that op over (I9) before it is advanced.
    contested = contested_inversions(world, ledger, inversions)
    resolvers = {uid: partial(resolve_contested, world, ledger, group) for uid, group in contested.items()}
    advance_ops(world, ledger, disrupted.keys(), resolvers)
    # A JobSet whose spot VMs are gone moves to the queued rung instead of taking victims on spot; its
    # queued quota is booked before releases look for room there.
    room = queued_room(world)
    plan_rung_switches(world, ledger, disrupted, room)
    preempted = plan_preemptions(world, ledger, disrupted, starved_units(world, disrupted.keys()))
    blocked = preempted.blocked
    # After infra preemption, which has first call on the victim budget; before releases, so the slices these
    # ops reserve are not handed to released victims.
    # Contested preemptors an op taken over later in the pass may have unblocked are tried again with the rest.
    rest = [i for i in inversions if i.preemptor.uid not in contested or i.preemptor.uid in ledger.contested_blocked]
    resolve_inversions(world, ledger, rest)
    released = plan_releases(world, ledger, blocked, room)
    _fast_fail(world, ledger)

    health = [s.health for s in world.slices.values()]
    held_now = sum(1 for u in world.annotated if u.held_by is not None) + len(world.stray_held) + ledger.held - released
    return Plan(
        now=now,
        actions=tuple(ledger.actions),
        taints=tuple(quarantine),
        events=tuple(ledger.events),
        diagnostics=Diagnostics(
            slices_total=len(health),
            slices_unhealthy=health.count(SliceHealth.UNHEALTHY),
            slices_suspect=health.count(SliceHealth.SUSPECT),
            slices_recovering=health.count(SliceHealth.RECOVERING),
            disrupted_preemptors=len(disrupted),
            starved_preemptors=preempted.starved,
            ops_planned=preempted.planned,
            ops_blocked=len(blocked) - ledger.waiting,
            victims_released=released,
            **ledger.summary(),
            held_workloads=max(0, held_now),
            nodes_quarantined=quarantined_after(tainted, quarantine),
            exclusions=tuple(
                (reason, len(keys), tuple(sorted(keys)[:5])) for reason, keys in sorted(world.excluded.items())
            ),
        ),
        next_wakeup=_wakeup(world, ledger),
    )


def _wakeup(world: World, ledger: Ledger) -> datetime | None:
    """`next_wakeup` of the snapshot; holds and releases written this pass add their own deadlines."""
    found = next_wakeup(world)
    config = world.config
    extra = [t for t in ledger.deadlines if t > world.now]
    if any(isinstance(a, HoldVictim) for a in ledger.actions):
        extra.append(world.now + config.max_hold)
    if any(isinstance(a, ReleaseVictim) for a in ledger.actions):
        extra.append(world.now + config.release_settle)
    return min([t for t in (found, *extra) if t is not None], default=None)


def _fast_fail(world: World, ledger: Ledger) -> None:
    """B.6.3, opt-in twice (config and JobSet annotation): only pods on nodes unreachable for `after`."""
    if not world.config.fast_fail.enabled:
        return
    after, opt_in = world.config.fast_fail.after, world.keys.fast_fail
    opted = (u for u in world.units.values() if is_true(u.jobset.annotations, opt_in))
    for unit in sorted(opted, key=lambda u: u.key):
        js = unit.jobset
        if js.terminal_state is not None:
            continue
        for pod in sorted(unit.live_pods, key=lambda p: p.name):
            if pod.node_name is None or pod.terminal:
                continue
            node = world.nodes.get(pod.node_name)
            if node is None:
                continue
            since = [t.time_added or node.ready_transition_time for t in node.taints if t.key == UNREACHABLE_TAINT]
            known = [s for s in since if s is not None]
            if known and world.now - min(known) >= after:
                ledger.act(
                    FastFailPod(
                        pod=ObjectRef("Pod", pod.namespace, pod.name, pod.uid),
                        op_id=make_op_id(unit.uid, js.restarts),
                        node_name=pod.node_name,
                    )
                )
