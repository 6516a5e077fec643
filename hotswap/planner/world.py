"""Index a snapshot once per pass: slices, per-JobSet units, occupancy, priorities. Pure and O(n log n)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import lru_cache
from operator import attrgetter

from gke_tpu_priority.hotswap.annotations import (
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
from gke_tpu_priority.hotswap.config import HotswapConfig
from gke_tpu_priority.hotswap.model import (
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
    TaintEffect,
    Workload,
    find_condition,
)
from gke_tpu_priority.hotswap.planner.actions import ObjectRef
from gke_tpu_priority.hotswap.slices import (
    MARKER_TAINTS,
    UNREACHABLE_TAINT,
    Slice,
    SliceHealth,
    chips_per_host,
    classify_slice,
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
OTHER_NAMESPACE = "Workload owned by a JobSet of another namespace: not attributed to it"
_EPOCH = datetime.fromtimestamp(0).astimezone()
_DEFAULT_CONTROLLERS = (None, "", DEFAULT_JOBSET_CONTROLLER)
_NO_POOLS: frozenset[str] = frozenset()
_TERMINAL = (PodPhase.SUCCEEDED, PodPhase.FAILED)
_FINE = (SliceHealth.HEALTHY, SliceHealth.RECOVERING)
_UNPARSED = datetime.min
_NAME = attrgetter("name")
_OWNER = attrgetter("owner_jobset_uid")


@dataclass(slots=True)
class SliceMemo:
    """The fine slices of the last pass by name, reused when a slice is classified exactly the same again (see
    `_fine`). Slices are immutable, so a reused one is indistinguishable from a new one of the same values: the memo
    saves allocations, never changes a plan. Owned by a caller that plans one cluster pass after pass (the
    controller); `build_world` without one classifies every slice afresh."""

    slices: dict[str, Slice] = field(default_factory=dict)


@lru_cache(maxsize=256)
def _slice_chips(topology: str) -> int:
    """`SliceShape.chips` of a topology, 1 when unknown: a fleet has few distinct topologies."""
    return SliceShape("", topology).chips or 1


@dataclass(slots=True, eq=False, init=False)
class Unit:
    """A JobSet with its Kueue Workload: the unit that is disrupted, preempts, or is held.

    `jobset` and `workload` never change after construction, so what is derived from them alone (identity,
    Kueue state, movability) is computed once here instead of on every access in the planner's loops. A large
    fleet is mostly queued JobSets that no rule looks at beyond that, so construction does only what every unit
    needs (positional, no per-unit key string: `key` is built on first use).
    """

    jobset: JobSet
    workload: Workload | None
    kueue_priority: int
    pod_priority: int
    cluster_queue: ClusterQueue | None
    # Read-only views, shared empty defaults: most JobSets of a large fleet are queued and have no pods, and
    # not allocating containers for them keeps a pass's garbage-collector work small.
    live_pods: Sequence[Pod]
    departed: Sequence[DepartedPod]
    occupied: AbstractSet[str]
    """Slices (pools) holding at least one non-terminal pod of this JobSet, any attempt."""
    held_by: HeldBy | None
    op: OpRecord | None
    checkpoint: datetime | None
    """The JobSet's `last-checkpoint` annotation, when the training code publishes one."""
    uid: str
    """uid of the JobSet."""
    running_in_kueue: bool
    """Admitted, active and not being evicted or finished; the JobSet is live."""
    movable: bool
    """Default-strategy exclusive placement per node pool, default controller (B.3, B15)."""
    _key: str | None = field(repr=False)
    _demand: Mapping[SliceShape, int] | None = field(repr=False)
    _chips: int | None = field(repr=False)

    def __init__(
        self,
        jobset: JobSet,
        workload: Workload | None,
        kueue_priority: int,
        pod_priority: int,
        cluster_queue: ClusterQueue | None,
    ) -> None:
        self.jobset = jobset
        self.workload = workload
        self.kueue_priority = kueue_priority
        self.pod_priority = pod_priority
        self.cluster_queue = cluster_queue
        self.live_pods = ()
        self.departed = ()
        self.occupied = _NO_POOLS
        self.held_by = None
        self.op = None
        self.checkpoint = None
        self.uid = jobset.uid
        self._key = None
        self._demand = None
        self._chips = None
        self.running_in_kueue = (
            workload is not None
            and workload.active
            and not jobset.suspended
            and jobset.terminal_state is None
            and _admitted_and_live(workload.conditions)
        )
        topology = jobset.exclusive_topology
        self.movable = (
            (topology == NODEPOOL_LABEL or (topology == HOSTNAME_LABEL and exclusive_per_slice(jobset)))
            and not jobset.node_selector_strategy
            and jobset.managed_by in _DEFAULT_CONTROLLERS
        )

    @property
    def key(self) -> str:
        """`namespace/name` of the JobSet (JobSet.key, built once, on first use)."""
        key = self._key
        if key is None:
            js = self.jobset
            key = self._key = f"{js.namespace}/{js.name}"
        return key

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

    def only_on(self, capacity: str) -> bool:
        """Every TPU slice the JobSet needs selects `capacity` (the `gke-tpu-priority.io/capacity` node label its
        templates carry: Kueue's flavor while admitted, a rung switch's pin while not)."""
        demand = self.demand
        return bool(demand) and all(shape.capacity == capacity for shape in demand)

    @property
    def chips(self) -> int:
        """TPU chips the JobSet runs on (a slice of unknown size counts as one chip)."""
        chips = self._chips
        if chips is None:
            # Summed per replicated job instead of per shape of `demand`: the same total, without the mapping.
            chips = 0
            for rj in self.jobset.replicated_jobs:
                shape = rj.shape
                if shape is not None and rj.replicas > 0:
                    chips += _slice_chips(shape.topology) * rj.replicas
            self._chips = chips
        return chips

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
            for condition in wl.conditions:  # find_condition(wl.conditions, "Admitted"), inline
                if condition.type == "Admitted":
                    if condition.last_transition_time is not None:
                        return condition.last_transition_time
                    break
            if wl.creation_timestamp is not None:
                return wl.creation_timestamp
        return self.jobset.creation_timestamp or _EPOCH


def _admitted_and_live(conditions: tuple[Condition, ...]) -> bool:
    """`Workload.admitted and not evicted and not finished` in one walk (the first condition of a type counts),
    stopping at the first condition that decides it (a queued Workload's Admitted=False)."""
    admitted = evicted = finished = False  # seen yet
    for condition in conditions:
        kind = condition.type
        if kind == "Admitted":
            if not admitted:
                if condition.status is not ConditionStatus.TRUE:
                    return False
                admitted = True
        elif kind == "Evicted":
            if not evicted:
                if condition.status is ConditionStatus.TRUE:
                    return False
                evicted = True
        elif kind == "Finished" and not finished:
            if condition.status is ConditionStatus.TRUE:
                return False
            finished = True
    return admitted


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
    """Workloads carrying the `held-by` (or `rung-switch`) annotation whose JobSet is not a unit: outside `namespaces`
    or the label selector (the configuration shrank), or gone. No rule can reason about them, so they are released
    (a rung switch given up)."""
    slice_failures: dict[str, list[datetime | None]] = field(default_factory=dict)
    """Suspect slice → when JobSet pods failed on it (None: unknown); see `confirm_failures`."""
    unbound: dict[str, datetime] = field(default_factory=dict)
    """JobSet uid → since when its current attempt has had a pod without a node, for JobSets running in Kueue
    (see `unbound_since`): how long they have waited for slices (starvation)."""
    running: list[Unit] = field(default_factory=list)
    """The units running in Kueue, in `units` order: the only possible victims, fresh admissions, borrowers."""
    annotated: list[Unit] = field(default_factory=list)
    """The units whose Workload has annotations, in `units` order: every held victim, preemptor of a recorded
    op and released Workload is one (rules about those walk this, not the whole fleet)."""
    with_pods: list[Unit] = field(default_factory=list)
    """The units with live or recently departed pods, in `units` order."""
    suspects: list[Unit] = field(default_factory=list)
    """The units with a departed pod or a pod on a slice that is not Healthy or Recovering (or on no known
    slice), in `units` order: no other unit can have infra evidence (`infra_evidence`)."""
    idle: list[str] = field(default_factory=list)
    """Usable slices without an occupant, by name (`free_slices` less this pass's reservations)."""
    request_owned: frozenset[str] = frozenset()
    """Slices made for a GKE ProvisioningRequest (`Slice.request_owned`), by name: usually none."""

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
        """The protect annotation, honoured only where the platform lets the team set it (`protectNamespaces`):
        whoever can write a JobSet can write its annotations, so where it lives decides, not what it says."""
        allowed = self.config.protect_namespaces
        if allowed is not None and unit.jobset.namespace not in allowed:
            return False
        key = self.keys.protect
        annotations = unit.jobset.annotations
        if key in annotations and is_true(annotations, key):
            return True
        wl = unit.workload
        return wl is not None and key in wl.annotations and is_true(wl.annotations, key)


def _kueue_priority(wl: Workload | None, boost_enabled: bool) -> int:
    if wl is None:
        return 0
    base = wl.priority or 0
    if boost_enabled:
        raw = wl.annotations.get(KUEUE_PRIORITY_BOOST, "")
        if raw.lstrip("-").isdigit():
            base += int(raw)
    return base


@lru_cache(maxsize=16)
def annotation_keys(domain: str) -> AnnotationKeys:
    """`AnnotationKeys(domain)` whose keys are plain attributes: its properties format the key on every access,
    and the planner reads a few of them once per unit."""
    keys = AnnotationKeys(domain)
    fixed = {name: getattr(keys, name) for name, value in vars(AnnotationKeys).items() if isinstance(value, property)}
    return type("FixedAnnotationKeys", (AnnotationKeys,), fixed)(domain)  # type: ignore[no-any-return]


def build_world(
    snapshot: ClusterSnapshot, now: datetime, config: HotswapConfig, memo: SliceMemo | None = None
) -> World:
    """Index the snapshot for one pass; `memo` (kept by the caller between passes) lets unchanged slices be reused.

    Hand-tuned for large fleets (nested dicts that allocate no key tuples, parses memoised per distinct value),
    in steps: slices from the nodes, each JobSet's Workload, the units, their pods, then what follows from those.
    """
    keys = annotation_keys(config.annotation_domain)
    excluded: dict[str, list[str]] = {}
    groups, node_pool_of = _group_nodes(snapshot.nodes, excluded)
    slices = _classify(groups, now, config, memo)
    queues = {q.name: q for q in snapshot.cluster_queues}
    workload_by_owner, one_each = _workloads_by_owner(snapshot, excluded)
    found = _build_units(snapshot, config, keys, workload_by_owner, queues, excluded)
    units = found.units
    fine = {name for name, slice_ in slices.items() if slice_.health in _FINE}
    pods = _index_pods(snapshot.pods, found.by_key, node_pool_of, fine)
    departed_of = _departed(snapshot, found.by_key, now - config.attribution_window)
    _attach(pods, departed_of, units, excluded)
    unbound = {unit.uid: since for unit in pods.with_unbound_pods if (since := unbound_since(unit)) is not None}
    with_pods = [u for u in units.values() if u.live_pods or u.departed]
    suspects = [u for u in with_pods if u.departed or u in pods.exposed] if pods.exposed or departed_of else []
    failures = _workload_failures(slices, with_pods, node_pool_of)
    if failures:
        slices = confirm_failures(slices, failures, now, config.unhealthy_grace, config.confirmed_unhealthy_grace)
    if one_each and units.keys() >= workload_by_owner.keys():
        orphans: list[Workload] = []  # every Workload's JobSet is a unit
        stray_held: list[Workload] = []
    else:
        orphans, stray_held = _orphans_and_strays(snapshot.workloads, units, config, keys)
    occupants = pods.occupants
    return World(
        now=now,
        config=config,
        keys=keys,
        slices=slices,
        units=units,
        occupants=occupants,
        node_pool_of=node_pool_of,
        nodes=dict(zip(map(_NAME, snapshot.nodes), snapshot.nodes, strict=True)),
        orphan_workloads=orphans,
        queues=queues,
        excluded=excluded,
        stray_held=stray_held,
        slice_failures=failures,
        unbound=unbound,
        running=found.running,
        annotated=found.annotated,
        with_pods=with_pods,
        suspects=suspects,
        idle=[name for name, slice_ in slices.items() if slice_.usable and name not in occupants],
        request_owned=frozenset(name for name, slice_ in slices.items() if slice_.request_owned),
    )


def _group_nodes(nodes: Sequence[Node], excluded: dict[str, list[str]]) -> tuple[dict[str, list[Node]], dict[str, str]]:
    """Each slice's member nodes, and each node's slice (`slice_key`): the pool for multi-host slices, pool/node for
    single-host ones, the bare pool for nodes without TPU labels."""
    groups: dict[str, list[Node]] = {}
    node_pool_of: dict[str, str] = {}
    # Whether a node is single-host depends on its labels alone, and a fleet has few distinct ones: `slice_key`
    # runs once each.
    single_host: dict[tuple[str, str | None, int | None], bool] = {}
    for node in nodes:
        pool, topology = node.node_pool, node.topology
        if pool and topology and node.accelerator:
            labels = (topology, node.machine_type, node.tpu_chips)
            single = single_host.get(labels)
            if single is None:
                single = single_host[labels] = slice_key(node) != pool
            key = f"{pool}/{node.name}" if single else pool
            members = groups.get(key)
            if members is None:
                groups[key] = [node]
            else:
                members.append(node)
            node_pool_of[node.name] = key
            continue
        if node.tpu_chips or (node.machine_type or "").startswith("ct"):
            excluded.setdefault(NODE_WITHOUT_TPU_LABELS, []).append(node.name)
        if pool:
            node_pool_of[node.name] = pool
    return groups, node_pool_of


def _workloads_by_owner(
    snapshot: ClusterSnapshot, excluded: dict[str, list[str]]
) -> tuple[dict[str | None, Workload], bool]:
    """The first Workload by (namespace, name) per owning JobSet, as if the Workloads were sorted by that, and
    whether every Workload has an owner and no owner has two (then a plain mapping is that)."""
    workloads = snapshot.workloads
    by_owner: dict[str | None, Workload] = dict(zip(map(_OWNER, workloads), workloads, strict=True))
    one_each = len(by_owner) == len(workloads) and None not in by_owner
    if not one_each:
        by_owner = _first_by_owner(workloads, lambda wl: False, excluded, NO_OWNER)
    # A Workload speaks for the JobSet that owns it only from the JobSet's own namespace: owner references across
    # namespaces are invalid in Kubernetes, and one written in another namespace (a decoy) must not stand in for the
    # real Workload, whose hold or operation it would replace.
    owner_namespace = {js.uid: js.namespace for js in snapshot.jobsets}
    strays = [w for w in by_owner.values() if w.namespace != owner_namespace.get(w.owner_jobset_uid or "", w.namespace)]
    if strays:
        stray_ids = {id(wl) for wl in strays}

        def elsewhere(wl: Workload) -> bool:
            owner = wl.owner_jobset_uid or ""
            return id(wl) in stray_ids or wl.namespace != owner_namespace.get(owner, wl.namespace)

        by_owner = _first_by_owner(workloads, elsewhere, excluded, OTHER_NAMESPACE)
    return by_owner, one_each


def _first_by_owner(
    workloads: Sequence[Workload], skip: Callable[[Workload], bool], excluded: dict[str, list[str]], why: str
) -> dict[str | None, Workload]:
    """The first Workload by (namespace, name) per owner uid; one without an owner is excluded as NO_OWNER (when
    that is `why`) and one `skip` refuses as `why`."""
    by_owner: dict[str | None, Workload] = {}
    for candidate in workloads:
        owner_uid = candidate.owner_jobset_uid
        if owner_uid is None:
            if why == NO_OWNER:
                excluded.setdefault(NO_OWNER, []).append(candidate.key)
            continue
        if skip(candidate):
            excluded.setdefault(why, []).append(candidate.key)
            continue
        current = by_owner.get(owner_uid)
        if current is None or (candidate.namespace, candidate.name) < (current.namespace, current.name):
            by_owner[owner_uid] = candidate
    return by_owner


@dataclass(slots=True)
class _Units:
    units: dict[str, Unit]
    running: list[Unit]
    annotated: list[Unit]
    by_key: dict[str, dict[str, Unit]]
    """Namespace → name → unit: looking pods up in nested dicts allocates no (namespace, name) key tuples."""


def _build_units(
    snapshot: ClusterSnapshot,
    config: HotswapConfig,
    keys: AnnotationKeys,
    workload_by_owner: Mapping[str | None, Workload],
    queues: Mapping[str, ClusterQueue],
    excluded: dict[str, list[str]],
) -> _Units:
    """One unit per JobSet in view, with its Workload, priorities, queue, hold, op and checkpoint."""
    namespaces = frozenset(config.namespaces)
    found = _Units({}, [], [], {})
    units, by_key = found.units, found.by_key
    in_namespace: dict[str, Unit] | None = None
    last_namespace: str | None = None
    workload_of = workload_by_owner.get
    checkpoints: dict[str, datetime | None] = {}  # `parse_time` per distinct annotation value
    created = 0
    for js in snapshot.jobsets:
        namespace = js.namespace
        if namespaces and namespace not in namespaces:
            continue
        created += 1
        wl = workload_of(js.uid)
        unit = _unit(js, wl, config, keys, queues, found)
        if js.annotations:
            checkpoint = js.annotations.get(keys.last_checkpoint)
            if checkpoint:
                parsed = checkpoints.get(checkpoint, _UNPARSED)
                if parsed is _UNPARSED:
                    parsed = checkpoints[checkpoint] = parse_time(checkpoint)
                unit.checkpoint = parsed
        if (wl is None or not unit.movable) and any(rj.shape is not None for rj in js.replicated_jobs):
            excluded.setdefault(_unit_exclusion(unit), []).append(unit.key)
        units[js.uid] = unit
        if namespace != last_namespace:
            in_namespace = by_key.get(namespace)
            if in_namespace is None:
                in_namespace = by_key[namespace] = {}
            last_namespace = namespace
        assert in_namespace is not None
        in_namespace[js.name] = unit
    if len(units) < created:
        # Two JobSets with one uid: the later one is the unit, so the lists are rebuilt from `units`.
        found.running = [u for u in units.values() if u.running_in_kueue]
        found.annotated = [u for u in units.values() if u.workload is not None and u.workload.annotations]
    return found


def _unit(
    js: JobSet,
    wl: Workload | None,
    config: HotswapConfig,
    keys: AnnotationKeys,
    queues: Mapping[str, ClusterQueue],
    found: _Units,
) -> Unit:
    """The JobSet's unit; listed in `found.annotated` and `found.running` as it is."""
    if wl is None:
        return Unit(js, None, 0, js.pod_priority or 0, None)
    kueue_priority = wl.priority or 0
    if config.priority_boost_enabled:
        raw = wl.annotations.get(KUEUE_PRIORITY_BOOST, "")
        if raw.lstrip("-").isdigit():
            kueue_priority += int(raw)
    queue_name = wl.cluster_queue
    unit = Unit(js, wl, kueue_priority, js.pod_priority or 0, queues.get(queue_name) if queue_name else None)
    annotations = wl.annotations
    if annotations:  # `held_by` and `op` default to None
        held_by = annotations.get(keys.held_by)
        unit.held_by = HeldBy.decode(held_by) if held_by else None
        op = annotations.get(keys.op)
        unit.op = OpRecord.decode(op) if op is not None else None
        found.annotated.append(unit)
    if unit.running_in_kueue:
        found.running.append(unit)
    return unit


@dataclass(slots=True)
class _Pods:
    occupants: dict[str, set[str]] = field(default_factory=dict)
    pods_of: dict[Unit, list[Pod]] = field(default_factory=dict)
    occupied_by: dict[Unit, set[str]] = field(default_factory=dict)
    max_pod_priority: dict[str, int] = field(default_factory=dict)
    with_unbound_pods: dict[Unit, None] = field(default_factory=dict)
    """Units with a pod not bound to a node, in pod order."""
    exposed: set[Unit] = field(default_factory=set)
    """Units with a pod on a node of no slice, or of one that is not Healthy or Recovering: only these (and units
    with departed pods) can have infra evidence, since `confirm_failures` only turns Suspect into Unhealthy."""


def _index_pods(
    pods: Sequence[Pod], by_key: Mapping[str, Mapping[str, Unit]], node_pool_of: Mapping[str, str], fine: set[str]
) -> _Pods:
    """Each unit's pods, the slices they occupy, their highest pod priority, and who occupies each slice."""
    found = _Pods()
    occupants, pods_of, occupied_by, max_pod_priority = (
        found.occupants,
        found.pods_of,
        found.occupied_by,
        found.max_pod_priority,
    )
    in_namespace: Mapping[str, Unit] | None = None
    last_namespace: str | None = None
    for pod in pods:
        pod_namespace = pod.namespace
        if pod_namespace != last_namespace:
            in_namespace = by_key.get(pod_namespace)
            last_namespace = pod_namespace
        owner = in_namespace.get(pod.jobset_name) if in_namespace is not None else None
        node_name = pod.node_name
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
            if node_name is None:
                found.with_unbound_pods[owner] = None
                continue
        elif node_name is None:
            continue
        pool = node_pool_of.get(node_name) or pod.node_pool
        if pool not in fine and owner is not None:
            found.exposed.add(owner)
        if pool is None or pod.phase in _TERMINAL:
            continue
        # Pods of JobSets outside its view, and TPU pods of no JobSet (a `batch/v1` Job's, a bare pod: empty
        # jobset_name), still occupy the slice: a token that is never a victim.
        occupant = owner.uid if owner is not None else f"foreign:{pod_namespace}/{pod.jobset_name or pod.name}"
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
    return found


def _departed(
    snapshot: ClusterSnapshot, by_key: Mapping[str, Mapping[str, Unit]], window_start: datetime
) -> dict[Unit, list[DepartedPod]]:
    """Each unit's pods that departed within the attribution window."""
    departed_of: dict[Unit, list[DepartedPod]] = {}
    for gone in snapshot.departed_pods:
        namespace_units = by_key.get(gone.namespace)
        owner = namespace_units.get(gone.jobset_name) if namespace_units is not None else None
        if owner is not None and gone.gone_at >= window_start:
            departed_of.setdefault(owner, []).append(gone)
    return departed_of


def _attach(
    pods: _Pods,
    departed_of: Mapping[Unit, list[DepartedPod]],
    units: Mapping[str, Unit],
    excluded: dict[str, list[str]],
) -> None:
    """Give each unit its pods, occupied slices, departed pods and pod priority."""
    for unit, owned in pods.pods_of.items():
        unit.live_pods = owned
    for unit, pools in pods.occupied_by.items():
        unit.occupied = pools
        wl = unit.workload
        # Running in Kueue means admitted: only the others can be excluded here.
        if (
            not unit.running_in_kueue
            and wl is not None
            and wl.active
            and not wl.admitted
            and not wl.evicted
            and unit.jobset.terminal_state is None
        ):
            excluded.setdefault(NOT_ADMITTED, []).append(unit.key)
    for unit, departed in departed_of.items():
        unit.departed = departed
    for uid, highest in pods.max_pod_priority.items():
        # Victim side uses the highest pod priority seen (it must be strictly below the preemptor's), the
        # preemptor side its template priority; pods without a PriorityClass count as 0 (D9).
        unit = units[uid]
        unit.pod_priority = highest if unit.jobset.pod_priority is None else max(unit.pod_priority, highest)


def _orphans_and_strays(
    workloads: Sequence[Workload], units: Mapping[str, Unit], config: HotswapConfig, keys: AnnotationKeys
) -> tuple[list[Workload], list[Workload]]:
    """Workloads whose JobSet is not a unit (in view), and those of them the reconciler holds or switches rung."""
    namespaces = frozenset(config.namespaces)
    orphans = [
        wl
        for wl in workloads
        if (wl.owner_jobset_uid is None or wl.owner_jobset_uid not in units)
        and (not namespaces or wl.namespace in namespaces)
    ]
    stray_held = [
        wl
        for wl in workloads
        if (wl.annotations.get(keys.held_by) or wl.annotations.get(keys.rung_switch))
        and (wl.owner_jobset_uid is None or wl.owner_jobset_uid not in units)
    ]
    return orphans, stray_held


_ShapeKey = tuple[str | None, str | None, str, str | None]  # accelerator, topology, machine type, capacity


def _same_time(a: datetime | None, b: datetime | None) -> bool:
    """Indistinguishable instants: equal fields, fold and type, and the same tzinfo (`==` alone is true for one
    instant in two zones, and ignores fold within one)."""
    if a is b:
        return True
    return (
        a is not None and b is not None and a == b and a.tzinfo is b.tzinfo and a.fold == b.fold and type(a) is type(b)
    )


def _classify(
    groups: Mapping[str, list[Node]], now: datetime, config: HotswapConfig, memo: SliceMemo | None
) -> dict[str, Slice]:
    """`classify_groups`, with a fast path for the usual slice: every host present and fine.

    Such a slice is Healthy or Recovering by the latest Ready transition or creation of its hosts; its shape and
    host count follow from the first node's accelerator, topology and machine type when the machine type names
    its chips, so they are taken from the first slice `classify_slice` classified with those labels. Any other
    slice is classified by `classify_slice` itself. `memo` gives the last pass's fine slices and keeps this pass's.
    """
    grace, stabilization = config.unhealthy_grace, config.recovery_stabilization
    # The reconciler's own quarantine taint follows health; were it a health signal, a slice could never recover.
    quarantine = annotation_keys(config.annotation_domain).quarantine_taint
    tolerated = frozenset(config.tolerated_taint_keys) | MARKER_TAINTS | {quarantine}
    shapes: dict[_ShapeKey, tuple[SliceShape, int | None] | None] = {}
    slices: dict[str, Slice] = {}
    previous = memo.slices if memo is not None else {}
    reused: dict[str, Slice] = {}
    for name in sorted(groups):
        members = groups[name]
        first = members[0]
        machine = first.machine_type
        found = None
        labels: _ShapeKey | None = None
        if machine:
            labels = (first.accelerator, first.topology, machine, first.capacity)
            known = shapes.get(labels)
            if known is not None:
                found = _fine(name, members, known[0], known[1], now, stabilization, tolerated, previous.get(name))
                if found is not None:
                    reused[name] = found
        if found is None:
            found = classify_slice(name, members, now, grace, stabilization, tolerated)
            if labels is not None and labels not in shapes:
                # Without chips in the machine type they come from the nodes' allocatable: not cacheable.
                named = chips_per_host(labels[2], ()) is not None
                shapes[labels] = (found.shape, found.expected_hosts) if named else None
        slices[name] = found
    if memo is not None:
        memo.slices = reused
    return slices


def _fine(
    name: str,
    members: list[Node],
    shape: SliceShape,
    expected: int | None,
    now: datetime,
    stabilization: timedelta,
    tolerated: frozenset[str],
    before: Slice | None,
) -> Slice | None:
    """`classify_slice` of a slice whose hosts are all there and fine (else None): Healthy or Recovering; the
    slice of that name from the last pass, `before`, when every field is the same."""
    if expected is not None and len(members) < expected:
        return None
    latest: datetime | None = None
    owned = False
    for node in members:
        if node.ready is not ConditionStatus.TRUE or node.deletion_timestamp is not None or node.unschedulable:
            return None
        if node.request_owned:
            owned = True
        for taint in node.taints:
            if taint.effect is not TaintEffect.PREFER_NO_SCHEDULE and taint.key not in tolerated:
                return None
        moment = node.ready_transition_time
        if moment is not None and (latest is None or moment > latest):
            latest = moment
        moment = node.creation_timestamp
        if moment is not None and (latest is None or moment > latest):
            latest = moment
    names = tuple(sorted([n.name for n in members]))
    health = SliceHealth.RECOVERING if latest is not None and now - latest < stabilization else SliceHealth.HEALTHY
    if (
        before is not None
        and before.health is health
        and _same_time(before.since, latest)
        and before.node_names == names
        and (before.shape is shape or before.shape == shape)
        and before.expected_hosts == expected
        and before.unreachable_since is None
        and before.request_owned is owned
        and before.name == name
    ):
        return before
    return Slice(name, shape, expected, names, health, latest, None, owned)


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


def may_not_preempt(world: World, unit: Unit) -> bool:
    """A JobSet of a tier declared `preempts: false`: the Workload's own priority, not a boosted one, decides."""
    floor = world.config.preemptor_min_priority
    return floor is not None and unit.workload is not None and (unit.workload.priority or 0) < floor


def above_entitlement(world: World, unit: Unit) -> bool:
    """A JobSet whose Workload priority is above its namespace's entitlement (`maxPreemptorPriority`): it got in
    before the admission rule existed, or around it, and never preempts on the strength of that tier."""
    ceiling = world.config.max_preemptor_priority.get(unit.jobset.namespace)
    return ceiling is not None and unit.workload is not None and unit.kueue_priority > ceiling


def on_request_capacity(world: World, unit: Unit) -> bool:
    """The unit runs (or, per a recently departed pod, ran) on a slice made for a GKE ProvisioningRequest.

    Such a JobSet was admitted through Kueue's ProvisioningRequest admission check and its pods select that
    capacity: evicting it gives the nodes back to GKE instead of freeing them, so it is never a victim; and its
    pods could not use reservation or spot slices, so it is never a preemptor either (its restart is Kueue's and
    GKE's business). A unit whose request-owned slice vanished with no departed pod left to tell is not
    recognised; the Workload's admission checks, which would, are not in the snapshot.
    """
    owned = world.request_owned
    if not owned:
        return False
    if not owned.isdisjoint(unit.occupied):
        return True
    for gone in unit.departed:
        pool = (world.node_pool_of.get(gone.node_name) if gone.node_name else None) or gone.node_pool
        if pool in owned:
            return True
    return any(world.slice_of_pod(pod) in owned for pod in unit.live_pods)


def preemptor_refusal(world: World, unit: Unit) -> str | None:
    """Why `unit` may not take slices from others (infra or starvation preemptor); None: it may."""
    if unit.workload is None:
        return "not Kueue-managed"
    if not unit.running_in_kueue:
        return "not running in Kueue"
    if unit.held_by is not None:
        return "held as a victim"
    if may_not_preempt(world, unit):
        return "its tier may not preempt (preemptorMinPriority)"
    if above_entitlement(world, unit):
        return "its priority is above its namespace's entitlement (maxPreemptorPriority)"
    if unit.cluster_queue is not None and unit.cluster_queue.uses_tas:
        return "TAS ClusterQueue (Kueue replaces failed nodes itself)"
    if not unit.movable:
        return "not default exclusive node-pool placement"
    if on_request_capacity(world, unit):
        return "runs on ProvisioningRequest capacity (queued provisioning)"
    return None


def hold_since(world: World, wl: Workload) -> datetime | None:
    return parse_time(wl.annotations.get(world.keys.held_since, ""))


def unhealthy(world: World, pool: str | None) -> bool:
    """Pool is Unhealthy, or unknown/vanished (all its nodes gone)."""
    if pool is None:
        return True
    found = world.slices.get(pool)
    return found is None or found.health is SliceHealth.UNHEALTHY
