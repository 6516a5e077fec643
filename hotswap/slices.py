"""Group TPU nodes into slices (one GKE node pool = one slice) and classify each slice's health.

A multi-host slice is all-or-nothing, so one bad host makes the whole slice Unhealthy. Bad conditions must
last `unhealthyGrace` before they count (A1), or `confirmedUnhealthyGrace` once a JobSet pod on the slice has
failed with them; recovered slices must stay good for `recoveryStabilization`
before they are reused (A9). Conditions Kubernetes does not timestamp (cordon, missing nodes, NoSchedule
taints) count at once: they are deliberate or already lasting, not flaps.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum
from functools import lru_cache

from gke_tpu_priority.hotswap.model import ConditionStatus, Node, SliceShape, TaintEffect

UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"
NOT_READY_TAINT = "node.kubernetes.io/not-ready"

# Capacity that belongs to a GKE ProvisioningRequest (flex-start with queued provisioning, Dynamic Workload
# Scheduler; Kueue's ProvisioningRequest admission check). GKE labels and taints such nodes
# `cloud.google.com/gke-queued=true` (NoSchedule); workloads select and tolerate it. Sources: "Run a large-scale
# workload with flex-start with queued provisioning",
# https://cloud.google.com/kubernetes-engine/docs/how-to/provisioningrequest, and the nodeSelector
# `cloud.google.com/gke-queued: "true"` that google/xpk (capacity type FLEX_START) and the Cluster Toolkit's
# queued-provisioning blueprints put on such workloads. Evicting the workload admitted through the request gives
# the nodes back to GKE (Kueue deletes the request on eviction), so such a slice is never spare capacity and
# evicting its occupant frees nothing another JobSet could use.
QUEUED_LABEL = "cloud.google.com/gke-queued"
QUEUED_TAINT = QUEUED_LABEL
"""Label and NoSchedule taint of queued-provisioning nodes (value `true`). The taint is a capacity marker, not a
health condition: `classify_groups` and the planner always tolerate it."""
PROVISIONING_REQUEST_LABEL = "autoscaling.gke.io/provisioning-request"
"""Names the ProvisioningRequest a node was created for (cluster autoscaler). Not found in the GKE pages the
author could read; recognised defensively, since a node made for a request is request-owned by definition."""
CAPACITY_LABEL = "gke-tpu-priority.io/capacity"
"""The platform's own capacity label on the node pools it creates (branch capacity-ladder)."""
QUEUED_CAPACITY = "flex-start-queued"
"""`CAPACITY_LABEL` value of the platform's queued-provisioning pools."""
SPOT_CAPACITY = "spot"
"""`CAPACITY_LABEL` value of the platform's spot pools."""
FLEX_START_LABEL = "cloud.google.com/gke-flex-start"
"""On every flex-start node, queued or not. NOT a request marker by itself: a plain flex-start pool (no queued
provisioning) autoscales like any other pool, and its nodes serve whichever pod the scheduler puts there."""
MARKER_TAINTS = frozenset({QUEUED_TAINT})
_MACHINE_CHIPS = re.compile(r"-(\d+)t$")
# Multi-host TPU slices (v4, v5e, v5p, v6e) use 4-chip hosts; used only when neither machine type nor
# allocatable says otherwise.
_DEFAULT_CHIPS_PER_HOST = 4


class SliceHealth(StrEnum):
    HEALTHY = "Healthy"
    SUSPECT = "Suspect"
    """Something is wrong but for less than `unhealthyGrace`: neither used as spare nor reported."""
    UNHEALTHY = "Unhealthy"
    RECOVERING = "Recovering"
    """All hosts good, but for less than `recoveryStabilization`."""


@dataclass(frozen=True, slots=True)
class Slice:
    """One TPU node pool and its classified health."""

    name: str
    shape: SliceShape
    expected_hosts: int | None
    node_names: tuple[str, ...]
    health: SliceHealth
    since: datetime | None
    """Start of the current health state when known (Unhealthy: earliest bad condition)."""
    unreachable_since: datetime | None = None
    """Earliest time a host got the unreachable taint, for opt-in fast-fail."""
    request_owned: bool = False
    """Some host was made for a GKE ProvisioningRequest (`Node.request_owned`): the slice belongs to the workload
    admitted through that request. Never spare, never freed by evicting its occupant, never handed over."""

    @property
    def usable(self) -> bool:
        """May be handed to a preemptor or a released victim (Healthy, and not a ProvisioningRequest's)."""
        return self.health is SliceHealth.HEALTHY and not self.request_owned


def request_owned_labels(labels: Mapping[str, str]) -> bool:
    """Whether node labels mark a node made for a ProvisioningRequest (queued provisioning).

    `cloud.google.com/gke-queued=true`, the platform's `gke-tpu-priority.io/capacity=flex-start-queued`, or any
    `autoscaling.gke.io/provisioning-request`. `cloud.google.com/gke-flex-start` alone does not count: flex-start
    without queued provisioning is an ordinary autoscaled pool.
    """
    return (
        labels.get(QUEUED_LABEL) == "true"
        or labels.get(CAPACITY_LABEL) == QUEUED_CAPACITY
        or bool(labels.get(PROVISIONING_REQUEST_LABEL))
    )


@lru_cache(maxsize=1024)
def topology_chips(topology: str) -> int | None:
    """Chips in a topology string such as `4x4` or `2x2x1`; None if malformed."""
    dims = topology.lower().split("x")
    if not dims or not all(d.isdigit() and int(d) > 0 for d in dims):
        return None
    chips = 1
    for d in dims:
        chips *= int(d)
    return chips


@lru_cache(maxsize=1024)
def _machine_chips(machine_type: str) -> int | None:
    match = _MACHINE_CHIPS.search(machine_type)
    return int(match.group(1)) if match else None


def chips_per_host(machine_type: str | None, allocatable: Iterable[int | None]) -> int | None:
    """From the machine type suffix (`ct6e-standard-4t` → 4), else the largest observed allocatable."""
    if machine_type:
        chips = _machine_chips(machine_type)
        if chips is not None:
            return chips
    seen = [a for a in allocatable if a]
    return max(seen) if seen else None


@lru_cache(maxsize=1024)
def expected_host_count(topology: str, per_host: int | None) -> int | None:
    """VMs in a slice: v6e 1x1/2x2 → 1, 2x4 → 1 (8t) or 2 (4t), 4x4 → 4, … 16x16 → 64."""
    chips = topology_chips(topology)
    if chips is None:
        return None
    per = per_host if per_host else (chips if chips <= _DEFAULT_CHIPS_PER_HOST else _DEFAULT_CHIPS_PER_HOST)
    return max(1, -(-chips // per))


def slice_key(node: Node) -> str | None:
    """The slice a TPU node belongs to: its node pool for a multi-host slice, `<pool>/<node>` for single-host.

    A GKE pool of single-host shapes (v6e 1x1, 2x2, 2x4 on ct6e-standard-8t) holds one independent slice per
    VM, so one bad VM must not take its pool-mates down with it.
    """
    if not (node.node_pool and node.accelerator and node.topology):
        return None
    if _single_host(node.topology, node.machine_type, node.tpu_chips):
        return f"{node.node_pool}/{node.name}"
    return node.node_pool


@lru_cache(maxsize=1024)
def _single_host(topology: str, machine_type: str | None, tpu_chips: int | None) -> bool:
    """One VM per slice for this node's labels; a fleet has few distinct ones, so `slice_key` looks it up."""
    return expected_host_count(topology, chips_per_host(machine_type, (tpu_chips,))) == 1


def group_by_slice(nodes: Iterable[Node]) -> dict[str, list[Node]]:
    """TPU nodes grouped by `slice_key`, in input order; nodes without TPU labels are left out."""
    by_slice: dict[str, list[Node]] = {}
    for node in nodes:
        key = slice_key(node)
        if key is not None:
            members = by_slice.get(key)
            if members is None:
                by_slice[key] = [node]
            else:
                members.append(node)
    return by_slice


def _node_problem_since(node: Node, tolerated: frozenset[str]) -> tuple[bool, datetime | None]:
    """(is bad, since when); since None means 'unknown', which counts as already past grace."""
    reasons: list[datetime | None] = []
    if node.ready is not ConditionStatus.TRUE:
        reasons.append(node.ready_transition_time)
    if node.deletion_timestamp is not None:
        reasons.append(node.deletion_timestamp)
    if node.unschedulable:
        reasons.append(None)
    for taint in node.taints:
        if taint.effect is TaintEffect.PREFER_NO_SCHEDULE or taint.key in tolerated:
            continue
        added = taint.time_added
        if added is None and taint.key in (UNREACHABLE_TAINT, NOT_READY_TAINT):
            # The NoSchedule twin of these taints has no timeAdded; it tracks the Ready condition.
            added = node.ready_transition_time
        reasons.append(added)
    if not reasons:
        return False, None
    if any(r is None for r in reasons):
        return True, None
    return True, min(r for r in reasons if r is not None)


def _latest_good_since(nodes: Iterable[Node]) -> datetime | None:
    """Latest Ready transition or creation across the nodes: when the slice last became (or was made) good."""
    latest: datetime | None = None
    for node in nodes:
        moment = node.ready_transition_time
        if moment is not None and (latest is None or moment > latest):
            latest = moment
        moment = node.creation_timestamp
        if moment is not None and (latest is None or moment > latest):
            latest = moment
    return latest


def _unreachable_since(nodes: Iterable[Node]) -> datetime | None:
    times = [
        t.time_added or n.ready_transition_time
        for n in nodes
        for t in n.taints
        if t.key == UNREACHABLE_TAINT and (t.time_added or n.ready_transition_time)
    ]
    return min(t for t in times if t is not None) if times else None


@lru_cache(maxsize=1024)
def _shape(accelerator: str, topology: str, per_host: int | None, capacity: str | None = None) -> SliceShape:
    """Shapes are few and immutable: share one instance per distinct value instead of building one per slice."""
    return SliceShape(accelerator, topology, per_host, capacity)


def classify_slice(
    pool: str,
    nodes: list[Node],
    now: datetime,
    grace: timedelta,
    stabilization: timedelta,
    tolerated_taints: frozenset[str],
) -> Slice:
    """Classify one node pool; `nodes` must be non-empty and all carry TPU labels."""
    first = nodes[0]
    machine = first.machine_type or next((n.machine_type for n in nodes if n.machine_type), None)
    per_host = _machine_chips(machine) if machine else None
    if per_host is None:
        per_host = chips_per_host(None, [n.tpu_chips for n in nodes])
    capacity = first.capacity or next((n.capacity for n in nodes if n.capacity), None)
    shape = _shape(first.accelerator or "", first.topology or "", per_host, capacity)
    expected = expected_host_count(shape.topology, per_host)
    names = tuple(sorted([n.name for n in nodes]))
    owned = any(n.request_owned for n in nodes)

    bad_times: list[datetime | None] = []
    for node in nodes:
        # Inline check for the common, fine node (what `_node_problem_since` would find nothing wrong with).
        if node.ready is ConditionStatus.TRUE and node.deletion_timestamp is None and not node.unschedulable:
            for taint in node.taints:
                if taint.effect is not TaintEffect.PREFER_NO_SCHEDULE and taint.key not in tolerated_taints:
                    break
            else:
                continue
        bad, since = _node_problem_since(node, tolerated_taints)
        if bad:
            bad_times.append(since)
    if expected is not None and len(nodes) < expected:
        bad_times.append(None)
    if bad_times:
        unreachable = _unreachable_since(nodes)
        known = [t for t in bad_times if t is not None]
        earliest = None if len(known) < len(bad_times) else min(known)
        if earliest is None or now - earliest >= grace:
            return Slice(pool, shape, expected, names, SliceHealth.UNHEALTHY, earliest, unreachable, owned)
        return Slice(pool, shape, expected, names, SliceHealth.SUSPECT, earliest, unreachable, owned)

    latest = _latest_good_since(nodes)
    if latest is not None and now - latest < stabilization:
        return Slice(pool, shape, expected, names, SliceHealth.RECOVERING, latest, None, owned)
    return Slice(pool, shape, expected, names, SliceHealth.HEALTHY, latest, None, owned)


def classify_slices(
    nodes: Iterable[Node],
    now: datetime,
    grace: timedelta,
    stabilization: timedelta,
    tolerated_taints: Iterable[str] = (),
) -> dict[str, Slice]:
    """Every TPU slice in the snapshot, keyed by `slice_key` (the pool name for multi-host slices)."""
    return classify_groups(group_by_slice(nodes), now, grace, stabilization, tolerated_taints)


def classify_groups(
    groups: Mapping[str, list[Node]],
    now: datetime,
    grace: timedelta,
    stabilization: timedelta,
    tolerated_taints: Iterable[str] = (),
) -> dict[str, Slice]:
    """`classify_slices` for nodes already grouped by `group_by_slice`, sorted by slice key."""
    tolerated = frozenset(tolerated_taints) | MARKER_TAINTS
    return {
        key: classify_slice(key, members, now, grace, stabilization, tolerated)
        for key, members in sorted(groups.items())
    }


def confirm_failures(
    slices: Mapping[str, Slice],
    failures: Mapping[str, Iterable[datetime | None]],
    now: datetime,
    unhealthy_grace: timedelta,
    confirmed_grace: timedelta,
) -> dict[str, Slice]:
    """Promote Suspect slices where a workload already failed to Unhealthy after `confirmed_grace`.

    `failures` maps a slice to when JobSet pods on it failed (None: unknown). `unhealthyGrace` filters flapping
    node conditions that do not touch the work; once a pod on the slice has failed with the node, the flap
    question is moot for that workload (it restarts anyway), and every second of grace is a second its new
    attempt waits for a slice.
    """
    result = dict(slices)
    for pool, failed in failures.items():
        found = slices.get(pool)
        due = None if found is None else confirmation_deadline(found, failed, unhealthy_grace, confirmed_grace)
        if found is not None and due is not None and now >= due:
            result[pool] = replace(found, health=SliceHealth.UNHEALTHY)
    return result


def confirmation_deadline(
    found: Slice, failed: Iterable[datetime | None], unhealthy_grace: timedelta, confirmed_grace: timedelta
) -> datetime | None:
    """When `confirm_failures` promotes this Suspect slice; None if it never will.

    A failure more than `unhealthyGrace` before the bad condition began is unrelated to it and does not count
    (within that window it may well be the same fault: container errors often surface before NotReady).
    """
    if found.health is not SliceHealth.SUSPECT or found.since is None:
        return None
    since = found.since
    related = [since if t is None else max(since, t) for t in failed if t is None or t >= since - unhealthy_grace]
    return min(related) + confirmed_grace if related else None
