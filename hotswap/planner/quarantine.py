"""Keep new pods off broken slices (Suspect or Unhealthy): the quarantine taint on each host, and off again after.

A multi-host slice is all-or-nothing: with one host down the slice runs nothing, but its surviving hosts are Ready
and look free to kube-scheduler. On real Kueue, JobSet and kube-scheduler (issue 33) a restarted high-priority
JobSet was placed there every time, and waited for the repair although the reconciler had freed a healthy slice
for it. Neither kube-scheduler nor JobSet's exclusive placement knows slice health, so the reconciler, which does,
marks the slice. The taint is NoSchedule: pods already running there stay (a drain is Kueue's job, not ours).

Pure: the taints follow from the slices' health in the snapshot, so a pass after a crash writes the same ones.
"""

from __future__ import annotations

from hotswap.model import Node
from hotswap.planner.actions import ObjectRef, TaintNode
from hotswap.planner.world import World
from hotswap.slices import SliceHealth

_BROKEN = (SliceHealth.SUSPECT, SliceHealth.UNHEALTHY)


def _carries(node: Node, key: str) -> bool:
    return any(t.key == key for t in node.taints)


def _ref(node: Node) -> ObjectRef:
    return ObjectRef("Node", "", node.name, "")


def quarantine_actions(world: World) -> list[TaintNode]:
    """Taint the present hosts of every Suspect or Unhealthy slice; untaint every other node that carries it.

    Suspect too, not only Unhealthy: a multi-host slice with a host down runs nothing whether or not the fault has
    outlasted `unhealthyGrace`, and a preemptor that restarts within the grace (its pods failed with the host, or
    fast-fail failed them) must not land on the survivors meanwhile. A blip costs one patch per host each way.
    Recovering and Healthy slices are what the planner hands to preemptors and released victims, so they must be
    schedulable. With quarantine switched off nothing is written (its RBAC is not granted then);
    `hotswap release-all` removes what is left.
    """
    if not world.config.quarantine_unhealthy_slices:
        return []
    key = world.keys.quarantine_taint
    wanted: dict[str, str] = {}
    for name, found in world.slices.items():
        if found.health in _BROKEN:
            wanted.update(dict.fromkeys(found.node_names, name))
    actions: list[TaintNode] = []
    for node_name in sorted(world.nodes):
        node = world.nodes[node_name]
        tainted = _carries(node, key)
        in_unhealthy = node_name in wanted
        if in_unhealthy and not tainted and node.deletion_timestamp is None:
            actions.append(TaintNode(_ref(node), key, True, wanted[node_name]))
        elif tainted and not in_unhealthy:
            actions.append(TaintNode(_ref(node), key, False, node.node_pool))
    return actions


def quarantined_after(world: World, actions: list[TaintNode]) -> int:
    """How many nodes carry the taint once `actions` are applied."""
    key = world.keys.quarantine_taint
    now = {name for name, node in world.nodes.items() if _carries(node, key)}
    for action in actions:
        (now.add if action.present else now.discard)(action.node.name)
    return len(now)
