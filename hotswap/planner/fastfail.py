"""Fast-fail: opted-in pods on unreachable nodes are failed, so their JobSet restarts without waiting for the taints.

Without it a preemptor on an unreachable node waits for the taint manager (about 300 s), then for the node's repair
or removal before its restarted pods can be created.
"""

from __future__ import annotations

from gke_tpu_priority.hotswap.annotations import is_true
from gke_tpu_priority.hotswap.planner.actions import FastFailPod, ObjectRef, make_op_id
from gke_tpu_priority.hotswap.planner.claims import Ledger
from gke_tpu_priority.hotswap.planner.world import World
from gke_tpu_priority.hotswap.slices import UNREACHABLE_TAINT


def plan_fast_fails(world: World, ledger: Ledger) -> None:
    """Fail opted-in pods on nodes unreachable for `fastFail.after` (B.6.3), opt-in twice (config and JobSet
    annotation): only those pods, never pods on reachable nodes."""
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


__all__ = ["plan_fast_fails"]
