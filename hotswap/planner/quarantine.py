"""Keep new pods off broken slices (Suspect or Unhealthy): the quarantine taint on each host, and off again after.

A multi-host slice is all-or-nothing: with one host down the slice runs nothing, but its surviving hosts are Ready
and look free to kube-scheduler. On real Kueue, JobSet and kube-scheduler a restarted high-priority
JobSet was placed there every time, and waited for the repair although the reconciler had freed a healthy slice
for it. Neither kube-scheduler nor JobSet's exclusive placement knows slice health, so the reconciler, which does,
marks the slice. The taint is NoSchedule: pods already running there stay (a drain is Kueue's job).

Pure: the taints follow from the slices' health in the snapshot, so a pass after a crash writes the same ones.
"""

from __future__ import annotations

from gke_tpu_priority.hotswap.model import Node
from gke_tpu_priority.hotswap.planner.actions import ObjectRef, TaintNode
from gke_tpu_priority.hotswap.planner.world import World
from gke_tpu_priority.hotswap.slices import SliceHealth

_BROKEN = (SliceHealth.SUSPECT, SliceHealth.UNHEALTHY)


def _carries(node: Node, key: str) -> bool:
    return any(t.key == key for t in node.taints)


def _ref(node: Node) -> ObjectRef:
    return ObjectRef("Node", "", node.name, "")


def tainted_nodes(world: World) -> frozenset[str]:
    """Nodes that carry the quarantine taint now (one scan of the snapshot's nodes per pass)."""
    key = world.keys.quarantine_taint
    return frozenset(name for name, node in world.nodes.items() if _carries(node, key))


def quarantine_actions(world: World, tainted: frozenset[str]) -> list[TaintNode]:
    """Taint the present hosts of every Suspect or Unhealthy slice; untaint every other node that carries it
    (`tainted`: `tainted_nodes` of this world).

    Suspect too, not only Unhealthy: a multi-host slice with a host down runs nothing whether or not the fault has
    outlasted `unhealthyGrace`, and a preemptor that restarts within the grace (its pods failed with the host, or
    fast-fail failed them) must not land on the survivors meanwhile. A blip costs one patch per host each way.
    Recovering and Healthy slices are what the planner hands to preemptors and released victims, so they must be
    schedulable. With quarantine switched off nothing is written (its RBAC is not granted then);
    `kubectl hotswap release-all` removes what is left.
    """
    if not world.config.quarantine_unhealthy_slices:
        return []
    key = world.keys.quarantine_taint
    wanted: dict[str, str] = {}
    for name, found in world.slices.items():
        if found.health in _BROKEN:
            wanted.update(dict.fromkeys(found.node_names, name))
    actions: list[TaintNode] = []
    # Only nodes that must change are looked at: the wanted ones and those tainted now, not the whole fleet.
    for node_name in sorted(wanted.keys() | tainted):
        node = world.nodes.get(node_name)
        if node is None:
            continue
        is_tainted = node_name in tainted
        in_unhealthy = node_name in wanted
        if in_unhealthy and not is_tainted and node.deletion_timestamp is None:
            actions.append(TaintNode(_ref(node), key, True, wanted[node_name]))
        elif is_tainted and not in_unhealthy:
            actions.append(TaintNode(_ref(node), key, False, node.node_pool))
    return actions


def quarantined_after(tainted: frozenset[str], actions: list[TaintNode]) -> int:
    """How many nodes carry the taint once `actions` are applied (`tainted`: before them)."""
    now = set(tainted)
    for action in actions:
        (now.add if action.present else now.discard)(action.node.name)
    return len(now)
