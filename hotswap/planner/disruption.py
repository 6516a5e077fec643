"""Infra-disruption attribution and deficit (B.3): which running JobSets lost slices to infrastructure."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from gke_tpu_priority.hotswap.model import PodPhase, SliceShape
from gke_tpu_priority.hotswap.planner.world import Unit, World, unhealthy
from gke_tpu_priority.hotswap.slices import SliceHealth

NODE_SHUTDOWN = "TerminationByKubelet"
"""DisruptionTarget reason the kubelet's graceful node shutdown gives the pods it stops (k8s
pkg/kubelet/nodeshutdown): the node is going away, as before a spot VM's preemption or a maintenance stop."""


@dataclass(frozen=True, slots=True)
class Disruption:
    """Evidence that a unit was hit by infrastructure, and when."""

    since: datetime
    pools: tuple[str, ...]
    lasting: bool = False
    """The lost capacity cannot be a transient: a node of it is gone (deleted: a spot preemption past its notice, a
    repair that recreates the VM) or shut its pods down (`TerminationByKubelet` on an Unhealthy slice: the kubelet's
    graceful node shutdown before a spot preemption or a maintenance stop). `evictionDelay` does not wait for it."""


def infra_evidence(world: World, unit: Unit) -> Disruption | None:
    """A pod of the unit failed, was evicted, is stuck or vanished on an Unhealthy (or vanished) slice.

    Running pods on a merely cordoned or tainted slice are not evidence (A7): the unit is still working.
    Exit-code failures on healthy slices never are (A10).
    """
    if not unit.live_pods and not unit.departed:
        return None  # most JobSets of a large fleet: queued, nothing to attribute
    times: list[datetime] = []
    pools: set[str] = set()
    lasting = False
    node_pool_of, slices = world.node_pool_of, world.slices
    for pod in unit.live_pods:
        if pod.node_name is None:
            continue
        # world.slice_of_pod and `unhealthy`, inlined: this runs for every pod of the fleet each pass.
        pool = node_pool_of.get(pod.node_name) or pod.node_pool
        found = slices.get(pool) if pool is not None else None
        if found is not None and found.health is not SliceHealth.UNHEALTHY:
            continue
        stopped = (
            pod.phase in (PodPhase.FAILED, PodPhase.UNKNOWN)
            or pod.deletion_timestamp is not None
            or pod.disruption_reason is not None
            or world.node_dead(pod.node_name)
        )
        if not stopped:
            continue
        times.append(
            (found.since if found is not None else None) or pod.disruption_time or pod.deletion_timestamp or world.now
        )
        pools.add(pool or f"<node {pod.node_name}>")
        lasting = lasting or pod.node_name not in world.nodes or pod.disruption_reason == NODE_SHUTDOWN
    for gone in unit.departed:
        pool = gone.node_pool or (world.node_pool_of.get(gone.node_name) if gone.node_name else None)
        if gone.node_name is None or not unhealthy(world, pool):
            continue
        times.append(gone.gone_at)
        pools.add(pool or f"<node {gone.node_name}>")
        lasting = lasting or gone.node_name not in world.nodes or gone.disruption_reason == NODE_SHUTDOWN
    if not times:
        return None
    return Disruption(since=min(times), pools=tuple(sorted(pools)), lasting=lasting)


def supply(world: World, unit: Unit, shape: SliceShape, extra: frozenset[str] = frozenset()) -> int:
    """Slices of `shape` the unit holds on non-Unhealthy infrastructure (plus `extra` reserved for it)."""
    count = 0
    for pool in unit.occupied | extra:
        found = world.slices.get(pool)
        if found is not None and found.health is not SliceHealth.UNHEALTHY and found.shape.matches(shape):
            count += 1
    return count


def deficit(world: World, unit: Unit, extra: frozenset[str] = frozenset()) -> dict[SliceShape, int]:
    """Demand minus supply per TPU shape; only positive entries."""
    result: dict[SliceShape, int] = {}
    for shape, need in unit.demand.items():
        missing = need - supply(world, unit, shape, extra)
        if missing > 0:
            result[shape] = missing
    return result


def running_pods_by_slice(world: World, unit: Unit) -> dict[str, int]:
    """Running, not deleting pods of the unit's current attempt per slice."""
    attempt = unit.jobset.restarts
    counts: dict[str, int] = {}
    for p in unit.live_pods:
        if p.phase is PodPhase.RUNNING and p.deletion_timestamp is None and p.restart_attempt == attempt:
            pool = world.slice_of_pod(p)
            if pool is not None:
                counts[pool] = counts.get(pool, 0) + 1
    return counts


def placed(world: World, unit: Unit) -> bool:
    """Every slice the unit needs is filled by its current attempt: a Running pod on every host.

    One Running pod per slice is not enough (C12): a lower-priority leader admitted with the quota a hold
    released can take a host of a reserved slice next to the preemptor's leader, and then the preemptor's
    followers never fit while the op would already look Done.
    """
    running = running_pods_by_slice(world, unit)
    for shape, need in unit.demand.items():
        have = 0
        for pool, count in running.items():
            found = world.slices.get(pool)
            if (
                found is not None
                and found.health is not SliceHealth.UNHEALTHY
                and found.shape.matches(shape)
                and count >= (found.expected_hosts or 1)
            ):
                have += 1
        if have < need:
            return False
    return True


def disrupted_units(world: World) -> dict[str, Disruption]:
    """Infra evidence for every JobSet (preemptor trigger I8, and victim exclusion I9): only `World.suspects`
    can have some."""
    found: dict[str, Disruption] = {}
    for unit in world.suspects:
        evidence = infra_evidence(world, unit)
        if evidence is not None:
            found[unit.uid] = evidence
    return found
