"""Index a snapshot once per pass: slices, per-JobSet units, occupancy, priorities. Pure and O(n log n)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime

from hotswap.annotations import (
    KUEUE_PRIORITY_BOOST,
    NODEPOOL_LABEL,
    AnnotationKeys,
    HeldBy,
    OpRecord,
    decode_history,
    is_true,
    parse_time,
)
from hotswap.config import HotswapConfig
from hotswap.model import (
    ClusterQueue,
    ClusterSnapshot,
    ConditionStatus,
    DepartedPod,
    JobSet,
    Node,
    Pod,
    PodPhase,
    SliceShape,
    Workload,
    find_condition,
)
from hotswap.planner.actions import ObjectRef
from hotswap.slices import UNREACHABLE_TAINT, Slice, SliceHealth, classify_slices, slice_key

DEFAULT_JOBSET_CONTROLLER = "jobset.sigs.k8s.io/jobset-controller"
_EPOCH = datetime.fromtimestamp(0).astimezone()


@dataclass(slots=True, eq=False)
class Unit:
    """A JobSet with its Kueue Workload: the unit that is disrupted, preempts, or is held."""

    jobset: JobSet
    workload: Workload | None
    kueue_priority: int
    pod_priority: int
    cluster_queue: ClusterQueue | None
    live_pods: list[Pod] = field(default_factory=list)
    departed: list[DepartedPod] = field(default_factory=list)
    occupied: set[str] = field(default_factory=set)
    """Slices (pools) holding at least one non-terminal pod of this JobSet, any attempt."""
    demand: dict[SliceShape, int] = field(default_factory=dict)
    held_by: HeldBy | None = None
    op: OpRecord | None = None

    @property
    def key(self) -> str:
        return self.jobset.key

    @property
    def uid(self) -> str:
        return self.jobset.uid

    def workload_ref(self) -> ObjectRef:
        wl = self.workload
        assert wl is not None
        return ObjectRef("Workload", wl.namespace, wl.name, wl.uid, wl.resource_version)

    def jobset_ref(self) -> ObjectRef:
        js = self.jobset
        return ObjectRef("JobSet", js.namespace, js.name, js.uid)

    @property
    def running_in_kueue(self) -> bool:
        """Admitted, active and not being evicted or finished; the JobSet is live."""
        wl, js = self.workload, self.jobset
        return (
            wl is not None
            and wl.active
            and wl.admitted
            and not wl.evicted
            and not wl.finished
            and not js.suspended
            and js.terminal_state is None
        )

    @property
    def movable(self) -> bool:
        """Default-strategy exclusive placement per node pool, default controller (B.3, B15)."""
        js = self.jobset
        return (
            js.exclusive_topology == NODEPOOL_LABEL
            and not js.node_selector_strategy
            and js.managed_by in (None, "", DEFAULT_JOBSET_CONTROLLER)
        )

    def start_time(self) -> datetime:
        """Last (re)admission: how much progress an eviction would throw away."""
        wl = self.workload
        if wl is not None:
            admitted = find_condition(wl.conditions, "Admitted")
            if admitted is not None and admitted.last_transition_time is not None:
                return admitted.last_transition_time
            if wl.creation_timestamp is not None:
                return wl.creation_timestamp
        return self.jobset.creation_timestamp or _EPOCH


@dataclass(slots=True)
class World:
    """Everything a pass needs, indexed."""

    now: datetime
    config: HotswapConfig
    keys: AnnotationKeys
    slices: dict[str, Slice]
    units: dict[str, Unit]
    """By JobSet uid."""
    occupants: dict[str, set[str]]
    """Pool → uids of JobSets with a non-terminal pod there."""
    node_pool_of: dict[str, str]
    nodes: dict[str, Node]
    orphan_workloads: list[Workload]
    """Workloads whose JobSet is not in the snapshot (deleted, or not a JobSet)."""

    def slice_of_pod(self, pod: Pod) -> str | None:
        if pod.node_name is None:
            return None
        return self.node_pool_of.get(pod.node_name) or pod.node_pool

    def unit_by_key(self) -> dict[str, Unit]:
        return {u.key: u for u in self.units.values()}

    def node_dead(self, node_name: str | None) -> bool:
        """Node missing, not Ready, or unreachable: pods there are not doing work whatever their phase."""
        if node_name is None:
            return False
        node = self.nodes.get(node_name)
        if node is None:
            return True
        return node.ready is not ConditionStatus.TRUE or any(t.key == UNREACHABLE_TAINT for t in node.taints)

    def hold_times(self, wl: Workload) -> tuple[datetime, ...]:
        window_start = self.now - self.config.hold_window
        history = decode_history(wl.annotations.get(self.keys.hold_history, ""))
        return tuple(t for t in history if t > window_start)

    def protected(self, unit: Unit) -> bool:
        key = self.keys.protect
        return is_true(unit.jobset.annotations, key) or (
            unit.workload is not None and is_true(unit.workload.annotations, key)
        )


def _kueue_priority(wl: Workload | None, boost_enabled: bool) -> int:
    if wl is None:
        return 0
    base = wl.priority or 0
    if boost_enabled:
        raw = wl.annotations.get(KUEUE_PRIORITY_BOOST, "")
        if raw.lstrip("-").isdigit():
            base += int(raw)
    return base


def _in_scope_namespace(namespace: str, config: HotswapConfig) -> bool:
    return not config.namespaces or namespace in config.namespaces


def build_world(snapshot: ClusterSnapshot, now: datetime, config: HotswapConfig) -> World:
    keys = AnnotationKeys(config.annotation_domain)
    slices = classify_slices(
        snapshot.nodes,
        now,
        config.unhealthy_grace,
        config.recovery_stabilization,
        config.tolerated_taint_keys,
    )
    nodes = {n.name: n for n in snapshot.nodes}
    # Maps a node to its slice (`slice_key`): the pool for multi-host slices, pool/node for single-host ones.
    node_pool_of = {n.name: key for n in snapshot.nodes if (key := slice_key(n) or n.node_pool)}
    queues = {q.name: q for q in snapshot.cluster_queues}

    workload_by_owner: dict[str, Workload] = {}
    for candidate in sorted(snapshot.workloads, key=lambda w: (w.namespace, w.name)):
        if candidate.owner_jobset_uid is not None:
            workload_by_owner.setdefault(candidate.owner_jobset_uid, candidate)

    units: dict[str, Unit] = {}
    by_key: dict[tuple[str, str], Unit] = {}
    for js in snapshot.jobsets:
        if not _in_scope_namespace(js.namespace, config):
            continue
        wl = workload_by_owner.get(js.uid)
        demand: dict[SliceShape, int] = defaultdict(int)
        for rj in js.replicated_jobs:
            if rj.shape is not None and rj.replicas > 0:
                demand[rj.shape] += rj.replicas
        unit = Unit(
            jobset=js,
            workload=wl,
            kueue_priority=_kueue_priority(wl, config.priority_boost_enabled),
            pod_priority=js.pod_priority or 0,
            cluster_queue=queues.get(wl.cluster_queue) if wl is not None and wl.cluster_queue else None,
            demand=dict(demand),
        )
        if wl is not None:
            unit.held_by = HeldBy.decode(wl.annotations.get(keys.held_by, ""))
            unit.op = OpRecord.decode(wl.annotations.get(keys.op, "")) if keys.op in wl.annotations else None
        units[js.uid] = unit
        by_key[(js.namespace, js.name)] = unit

    occupants: dict[str, set[str]] = defaultdict(set)
    pod_priorities: dict[str, list[int]] = defaultdict(list)
    for pod in snapshot.pods:
        owner = by_key.get((pod.namespace, pod.jobset_name))
        if owner is not None:
            owner.live_pods.append(pod)
            if pod.priority is not None:
                pod_priorities[owner.uid].append(pod.priority)
        if pod.phase in (PodPhase.SUCCEEDED, PodPhase.FAILED) or pod.node_name is None:
            continue
        pool = node_pool_of.get(pod.node_name) or pod.node_pool
        if pool is None:
            continue
        # Pods of JobSets outside our view still occupy the slice: a token that is never a victim.
        occupants[pool].add(owner.uid if owner is not None else f"foreign:{pod.namespace}/{pod.jobset_name}")
        if owner is not None:
            owner.occupied.add(pool)
    window_start = now - config.attribution_window
    for gone in snapshot.departed_pods:
        owner = by_key.get((gone.namespace, gone.jobset_name))
        if owner is not None and gone.gone_at >= window_start:
            owner.departed.append(gone)

    for uid, unit in units.items():
        # Victim side uses the highest pod priority seen (it must be strictly below the preemptor's), the
        # preemptor side its template priority; pods without a PriorityClass count as 0 (D9).
        seen = pod_priorities.get(uid, [])
        if unit.jobset.pod_priority is None and seen:
            unit.pod_priority = max(seen)
        elif seen:
            unit.pod_priority = max(unit.pod_priority, max(seen))

    known_uids = set(units)
    orphans = [
        wl
        for wl in snapshot.workloads
        if (wl.owner_jobset_uid is None or wl.owner_jobset_uid not in known_uids)
        and _in_scope_namespace(wl.namespace, config)
    ]
    return World(
        now=now,
        config=config,
        keys=keys,
        slices=slices,
        units=units,
        occupants=dict(occupants),
        node_pool_of=node_pool_of,
        nodes=nodes,
        orphan_workloads=orphans,
    )


def hold_since(world: World, wl: Workload) -> datetime | None:
    return parse_time(wl.annotations.get(world.keys.held_since, ""))


def unhealthy(world: World, pool: str | None) -> bool:
    """Pool is Unhealthy, or unknown/vanished (all its nodes gone)."""
    if pool is None:
        return True
    found = world.slices.get(pool)
    return found is None or found.health is SliceHealth.UNHEALTHY
