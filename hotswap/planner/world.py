"""Index a snapshot once per pass: slices, per-JobSet units, occupancy, priorities. Pure and O(n log n)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from datetime import datetime

from hotswap.annotations import (
    HOSTNAME_LABEL,
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
    Condition,
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
from hotswap.slices import (
    UNREACHABLE_TAINT,
    Slice,
    SliceHealth,
    classify_groups,
    confirm_failures,
    expected_host_count,
    slice_key,
)

DEFAULT_JOBSET_CONTROLLER = "jobset.sigs.k8s.io/jobset-controller"

# Exclusion reasons (`World.excluded`): each silently keeps an object out of every decision.
NODE_WITHOUT_TPU_LABELS = "TPU node without accelerator/topology labels: not part of any slice"
NO_WORKLOAD = "TPU JobSet without a Kueue Workload: never a preemptor or victim"
NOT_EXCLUSIVE = (
    f"TPU JobSet without exclusive-topology {NODEPOOL_LABEL} (or {HOSTNAME_LABEL} for single-host slices only): "
    "never a preemptor or victim"
)
NODE_SELECTOR = "TPU JobSet with node-selector exclusive placement (static): never a preemptor or victim"
OTHER_CONTROLLER = "TPU JobSet managed by another controller: never a preemptor or victim"
NO_OWNER = "Workload without an owner JobSet uid: not attributed to any JobSet"
NOT_ADMITTED = "JobSet with pods on slices but its Workload not Admitted: never a preemptor or victim"
_EPOCH = datetime.fromtimestamp(0).astimezone()


@dataclass(slots=True, eq=False)
class Unit:
    """A JobSet with its Kueue Workload: the unit that is disrupted, preempts, or is held.

    `jobset` and `workload` never change after construction, so what is derived from them alone (identity,
    Kueue state, movability) is computed once here instead of on every access in the planner's loops.
    """

    jobset: JobSet
    workload: Workload | None
    kueue_priority: int
    pod_priority: int
    cluster_queue: ClusterQueue | None
    # Read-only views, shared empty defaults: most JobSets of a large fleet are queued and have no pods, and
    # not allocating containers for them keeps a pass's garbage-collector work small.
    live_pods: Sequence[Pod] = ()
    departed: Sequence[DepartedPod] = ()
    occupied: AbstractSet[str] = frozenset()
    """Slices (pools) holding at least one non-terminal pod of this JobSet, any attempt."""
    held_by: HeldBy | None = None
    op: OpRecord | None = None
    checkpoint: datetime | None = None
    """The JobSet's `last-checkpoint` annotation, when the training code publishes one."""
    key: str = field(init=False)
    """`namespace/name` of the JobSet."""
    uid: str = field(init=False)
    """uid of the JobSet."""
    running_in_kueue: bool = field(init=False)
    """Admitted, active and not being evicted or finished; the JobSet is live."""
    movable: bool = field(init=False)
    """Default-strategy exclusive placement per node pool, default controller (B.3, B15)."""
    _demand: Mapping[SliceShape, int] | None = field(default=None, init=False, repr=False)
    _chips: int | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        js, wl = self.jobset, self.workload
        self.key = f"{js.namespace}/{js.name}"  # JobSet.key, without a property call per unit
        self.uid = js.uid
        self.running_in_kueue = (
            wl is not None
            and wl.active
            and not js.suspended
            and js.terminal_state is None
            and _admitted_and_live(wl.conditions)
        )
        self.movable = (
            exclusive_per_slice(js)
            and not js.node_selector_strategy
            and js.managed_by in (None, "", DEFAULT_JOBSET_CONTROLLER)
        )

    @property
    def demand(self) -> Mapping[SliceShape, int]:
        """TPU slices needed per shape. Computed on first use: only disrupted, held or released units need it."""
        if self._demand is None:
            demand: dict[SliceShape, int] = {}
            for rj in self.jobset.replicated_jobs:
                if rj.shape is not None and rj.replicas > 0:
                    demand[rj.shape] = demand.get(rj.shape, 0) + rj.replicas
            self._demand = demand
        return self._demand

    @property
    def chips(self) -> int:
        """TPU chips the JobSet runs on (a slice of unknown size counts as one chip)."""
        if self._chips is None:
            self._chips = sum((shape.chips or 1) * count for shape, count in self.demand.items())
        return self._chips

    def progress_at_risk_s(self, now: datetime) -> float:
        """Seconds of training an eviction now would throw away, at most: since the last checkpoint, or since the
        current attempt started when no checkpoint is known (or the last one predates the attempt)."""
        safe = self.start_time()
        attempt = self.jobset.restarts
        first: datetime | None = None  # the current attempt's first pod: none of its progress predates that
        for pod in self.live_pods:
            created = pod.creation_timestamp
            if created is not None and pod.restart_attempt == attempt and (first is None or created < first):
                first = created
        if first is not None and first > safe:
            safe = first
        if self.checkpoint is not None:
            safe = max(safe, self.checkpoint)
        return max((now - safe).total_seconds(), 0.0)

    def workload_ref(self) -> ObjectRef:
        wl = self.workload
        assert wl is not None
        return ObjectRef("Workload", wl.namespace, wl.name, wl.uid, wl.resource_version)

    def jobset_ref(self) -> ObjectRef:
        js = self.jobset
        return ObjectRef("JobSet", js.namespace, js.name, js.uid)

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


def _admitted_and_live(conditions: tuple[Condition, ...]) -> bool:
    """`Workload.admitted and not evicted and not finished` in one walk (the first condition of a type counts)."""
    admitted = evicted = finished = None
    for condition in conditions:
        kind = condition.type
        if kind == "Admitted":
            if admitted is None:
                admitted = condition.status is ConditionStatus.TRUE
        elif kind == "Evicted":
            if evicted is None:
                evicted = condition.status is ConditionStatus.TRUE
        elif kind == "Finished" and finished is None:
            finished = condition.status is ConditionStatus.TRUE
    return admitted is True and not evicted and not finished


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
    excluded: dict[str, list[str]] = field(default_factory=dict)
    """Why objects that look like TPU work are left out of every decision (reason → keys): snapshot traps an
    operator should see (`Diagnostics.exclusions`)."""
    queues: dict[str, ClusterQueue] = field(default_factory=dict)
    """ClusterQueues by name."""
    stray_held: list[Workload] = field(default_factory=list)
    """Workloads carrying our `held-by` annotation whose JobSet is not a unit: outside `namespaces` or the
    label selector (the configuration shrank), or gone. No rule can reason about them, so they are released."""
    slice_failures: dict[str, list[datetime | None]] = field(default_factory=dict)
    """Suspect slice → when JobSet pods failed on it (None: unknown); see `confirm_failures`."""
    unbound: dict[str, datetime] = field(default_factory=dict)
    """JobSet uid → since when its current attempt has had a pod without a node, for JobSets running in Kueue
    (see `unbound_since`): how long they have waited for slices (starvation)."""

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
        raw = wl.annotations.get(self.keys.hold_history)
        if not raw:
            return ()
        window_start = self.now - self.config.hold_window
        history = decode_history(raw)
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


def build_world(snapshot: ClusterSnapshot, now: datetime, config: HotswapConfig) -> World:
    keys = AnnotationKeys(config.annotation_domain)
    held_by_key, op_key, checkpoint_key = keys.held_by, keys.op, keys.last_checkpoint
    boost_enabled = config.priority_boost_enabled
    namespaces = frozenset(config.namespaces)

    # One pass gives both the slices' members and each node's slice (`slice_key`): the pool for multi-host
    # slices, pool/node for single-host ones, the bare pool for nodes without TPU labels.
    groups: dict[str, list[Node]] = {}
    node_pool_of: dict[str, str] = {}
    excluded: dict[str, list[str]] = {}
    for node in snapshot.nodes:
        key = slice_key(node)
        if key is None and (node.tpu_chips or (node.machine_type or "").startswith("ct")):
            excluded.setdefault(NODE_WITHOUT_TPU_LABELS, []).append(node.name)
        if key is not None:
            members = groups.get(key)
            if members is None:
                groups[key] = [node]
            else:
                members.append(node)
        owner_key = key or node.node_pool
        if owner_key:
            node_pool_of[node.name] = owner_key
    slices = classify_groups(
        groups, now, config.unhealthy_grace, config.recovery_stabilization, config.tolerated_taint_keys
    )
    nodes = {n.name: n for n in snapshot.nodes}
    queues = {q.name: q for q in snapshot.cluster_queues}

    # First Workload by (namespace, name) per owning JobSet, as if the Workloads were sorted by that.
    workload_by_owner: dict[str, Workload] = {}
    for candidate in snapshot.workloads:
        owner_uid = candidate.owner_jobset_uid
        if owner_uid is None:
            excluded.setdefault(NO_OWNER, []).append(candidate.key)
            continue
        current = workload_by_owner.get(owner_uid)
        if current is None or (candidate.namespace, candidate.name) < (current.namespace, current.name):
            workload_by_owner[owner_uid] = candidate

    units: dict[str, Unit] = {}
    # Namespace → name → unit: looking pods up in nested dicts allocates no (namespace, name) key tuples.
    by_key: dict[str, dict[str, Unit]] = {}
    for js in snapshot.jobsets:
        if namespaces and js.namespace not in namespaces:
            continue
        wl = workload_by_owner.get(js.uid)
        unit = Unit(
            jobset=js,
            workload=wl,
            kueue_priority=_kueue_priority(wl, boost_enabled),
            pod_priority=js.pod_priority or 0,
            cluster_queue=queues.get(wl.cluster_queue) if wl is not None and wl.cluster_queue else None,
        )
        if wl is not None and wl.annotations:  # `held_by` and `op` default to None
            annotations = wl.annotations
            held_by = annotations.get(held_by_key)
            unit.held_by = HeldBy.decode(held_by) if held_by else None
            op = annotations.get(op_key)
            unit.op = OpRecord.decode(op) if op is not None else None
        if js.annotations:
            checkpoint = js.annotations.get(checkpoint_key)
            unit.checkpoint = parse_time(checkpoint) if checkpoint else None
        if (wl is None or not unit.movable) and any(rj.shape is not None for rj in js.replicated_jobs):
            excluded.setdefault(_unit_exclusion(unit), []).append(unit.key)
        units[js.uid] = unit
        in_namespace = by_key.get(js.namespace)
        if in_namespace is None:
            by_key[js.namespace] = {js.name: unit}
        else:
            in_namespace[js.name] = unit

    occupants: dict[str, set[str]] = {}
    pods_of: dict[Unit, list[Pod]] = {}
    occupied_by: dict[Unit, set[str]] = {}
    max_pod_priority: dict[str, int] = {}
    waiting: set[Unit] = set()  # units with a pod not bound to a node
    for pod in snapshot.pods:
        in_namespace = by_key.get(pod.namespace)
        owner = in_namespace.get(pod.jobset_name) if in_namespace is not None else None
        if owner is not None:
            owned = pods_of.get(owner)
            if owned is None:
                pods_of[owner] = [pod]
            else:
                owned.append(pod)
            priority = pod.priority
            if priority is not None:
                seen = max_pod_priority.get(owner.uid)
                if seen is None or priority > seen:
                    max_pod_priority[owner.uid] = priority
        node_name = pod.node_name
        if node_name is None and owner is not None:
            waiting.add(owner)
        if node_name is None or pod.phase in (PodPhase.SUCCEEDED, PodPhase.FAILED):
            continue
        pool = node_pool_of.get(node_name) or pod.node_pool
        if pool is None:
            continue
        # Pods of JobSets outside our view still occupy the slice: a token that is never a victim.
        occupant = owner.uid if owner is not None else f"foreign:{pod.namespace}/{pod.jobset_name}"
        there = occupants.get(pool)
        if there is None:
            occupants[pool] = {occupant}
        else:
            there.add(occupant)
        if owner is not None:
            pools = occupied_by.get(owner)
            if pools is None:
                occupied_by[owner] = {pool}
            else:
                pools.add(pool)
    window_start = now - config.attribution_window
    departed_of: dict[Unit, list[DepartedPod]] = {}
    for gone in snapshot.departed_pods:
        in_namespace = by_key.get(gone.namespace)
        owner = in_namespace.get(gone.jobset_name) if in_namespace is not None else None
        if owner is not None and gone.gone_at >= window_start:
            departed_of.setdefault(owner, []).append(gone)
    for unit, owned in pods_of.items():
        unit.live_pods = owned
    for unit, pools in occupied_by.items():
        unit.occupied = pools
        wl = unit.workload
        if wl is not None and wl.active and not wl.admitted and not wl.evicted and unit.jobset.terminal_state is None:
            excluded.setdefault(NOT_ADMITTED, []).append(unit.key)
    for unit, departed in departed_of.items():
        unit.departed = departed

    for uid, highest in max_pod_priority.items():
        # Victim side uses the highest pod priority seen (it must be strictly below the preemptor's), the
        # preemptor side its template priority; pods without a PriorityClass count as 0 (D9).
        unit = units[uid]
        unit.pod_priority = highest if unit.jobset.pod_priority is None else max(unit.pod_priority, highest)

    unbound = {unit.uid: since for unit in waiting if (since := unbound_since(unit)) is not None}

    failures = _workload_failures(slices, units.values(), node_pool_of)
    if failures:
        slices = confirm_failures(slices, failures, now, config.unhealthy_grace, config.confirmed_unhealthy_grace)

    orphans = [
        wl
        for wl in snapshot.workloads
        if (wl.owner_jobset_uid is None or wl.owner_jobset_uid not in units)
        and (not namespaces or wl.namespace in namespaces)
    ]
    stray_held = [
        wl
        for wl in snapshot.workloads
        if wl.annotations.get(held_by_key) and (wl.owner_jobset_uid is None or wl.owner_jobset_uid not in units)
    ]
    return World(
        now=now,
        config=config,
        keys=keys,
        slices=slices,
        units=units,
        occupants=occupants,
        node_pool_of=node_pool_of,
        nodes=nodes,
        orphan_workloads=orphans,
        queues=queues,
        excluded=excluded,
        stray_held=stray_held,
        slice_failures=failures,
        unbound=unbound,
    )


def exclusive_per_slice(js: JobSet) -> bool:
    """Whether JobSet's exclusive placement gives each child Job whole slices to itself.

    A multi-host slice is one node pool; a pool of single-host shapes holds one slice per VM, where exclusive
    placement per node (`kubernetes.io/hostname`) is what keeps a slice whole and lets the pool's other VMs serve
    other slices. Per node is not per slice for a multi-host shape (its Job would span VMs of several pools).
    """
    if js.exclusive_topology == NODEPOOL_LABEL:
        return True
    if js.exclusive_topology != HOSTNAME_LABEL:
        return False
    shapes = [rj.shape for rj in js.replicated_jobs if rj.shape is not None]
    return bool(shapes) and all(expected_host_count(s.topology, s.chips_per_host) == 1 for s in shapes)


def _unit_exclusion(unit: Unit) -> str:
    js = unit.jobset
    if unit.workload is None:
        return NO_WORKLOAD
    if not exclusive_per_slice(js):
        return NOT_EXCLUSIVE
    if js.node_selector_strategy:
        return NODE_SELECTOR
    return OTHER_CONTROLLER


def unbound_since(unit: Unit) -> datetime | None:
    """Since when the unit, running in Kueue, has had a pod of its current attempt without a node; None if it
    has none, or if the snapshot cannot bound the wait.

    A pod never loses its node, so an unbound pod has waited since it was created. The latest of that, the
    Workload's admission and its PodsReady transition (an attempt that failed restarts its pods) is used: each
    bounds the wait from below, and a later start only delays acting.
    """
    if not unit.running_in_kueue:
        return None
    attempt = unit.jobset.restarts
    created: list[datetime] = []
    pending = False
    for pod in unit.live_pods:
        if pod.node_name is not None or pod.terminal or pod.deletion_timestamp is not None:
            continue
        if pod.restart_attempt != attempt:
            continue
        pending = True
        if pod.creation_timestamp is not None:
            created.append(pod.creation_timestamp)
    if not pending:
        return None
    times = [min(created)] if created else []
    wl = unit.workload
    if wl is not None:
        for kind in ("QuotaReserved", "Admitted", "PodsReady"):
            found = find_condition(wl.conditions, kind)
            if found is not None and found.last_transition_time is not None:
                times.append(found.last_transition_time)
    return max(times, default=None)


def _workload_failures(
    slices: Mapping[str, Slice], units: Iterable[Unit], node_pool_of: Mapping[str, str]
) -> dict[str, list[datetime | None]]:
    """Suspect slice → when pods of live JobSets failed on it: a current-attempt pod that is Failed, Unknown or
    disrupted, or a pod that went Failed or disrupted (the restart that follows deletes it at once)."""
    suspect = {name for name, found in slices.items() if found.health is SliceHealth.SUSPECT}
    if not suspect:
        return {}
    failures: dict[str, list[datetime | None]] = {}
    for unit in units:
        js = unit.jobset
        if js.terminal_state is not None:
            continue  # a JobSet that failed for good leaves Failed pods behind; they say nothing about now
        for pod in unit.live_pods:
            pool = (node_pool_of.get(pod.node_name) if pod.node_name else None) or pod.node_pool
            if pool not in suspect or pod.restart_attempt != js.restarts:
                continue
            if pod.phase in (PodPhase.FAILED, PodPhase.UNKNOWN) or pod.disruption_reason is not None:
                failures.setdefault(pool, []).append(pod.disruption_time)
        for gone in unit.departed:
            pool = gone.node_pool or (node_pool_of.get(gone.node_name) if gone.node_name else None)
            if pool in suspect and (gone.failed or gone.disruption_reason is not None):
                failures.setdefault(pool, []).append(gone.gone_at)
    return failures


def hold_since(world: World, wl: Workload) -> datetime | None:
    return parse_time(wl.annotations.get(world.keys.held_since, ""))


def unhealthy(world: World, pool: str | None) -> bool:
    """Pool is Unhealthy, or unknown/vanished (all its nodes gone)."""
    if pool is None:
        return True
    found = world.slices.get(pool)
    return found is None or found.health is SliceHealth.UNHEALTHY
