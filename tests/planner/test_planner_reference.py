"""The optimised planner decides exactly as the straightforward version it replaced.

`build_world` (snapshot indexing, slice classification) and victim selection (`VictimIndex` + the lazy
`choose_victims`) were restructured for speed. This module keeps reference copies of the previous, simple
implementations and compares both on hypothesis-generated snapshots, including shared slices, single-host
slices, non-TPU nodes, foreign pods, departed pods, hold annotations and every scope.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gke_tpu_priority.hotswap.annotations import KUEUE_PRIORITY_BOOST, AnnotationKeys, HeldBy, OpRecord, format_time
from gke_tpu_priority.hotswap.config import HotswapConfig, Scope
from gke_tpu_priority.hotswap.model import (
    ClusterSnapshot,
    ConditionStatus,
    DepartedPod,
    Node,
    Pod,
    PodPhase,
    SliceShape,
    TaintEffect,
    Workload,
)
from gke_tpu_priority.hotswap.planner.victims import (
    Candidate,
    VictimIndex,
    choose_victims,
    in_scope,
    scope_group,
    victim_order,
    why_not_victim,
)
from gke_tpu_priority.hotswap.planner.world import Unit, World, build_world
from gke_tpu_priority.hotswap.slices import (
    NOT_READY_TAINT,
    UNREACHABLE_TAINT,
    Slice,
    SliceHealth,
    chips_per_host,
    confirm_failures,
    expected_host_count,
    slice_key,
)
from testkit.builders import SHAPE_2X4, SHAPE_4X4, T0, Fleet, JobSetBuilder, NodeBuilder, WorkloadBuilder
from tests.planner.invariants import workload_failures

KEYS = AnnotationKeys(HotswapConfig().annotation_domain)
FAIL_MODES = ("unreachable", "not-ready", "cordon", "deleted")

# --- reference: slice classification and snapshot indexing as they were before optimisation ------------------


def _ref_node_problem_since(node: Node, tolerated: frozenset[str]) -> tuple[bool, datetime | None]:
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
            added = node.ready_transition_time
        reasons.append(added)
    if not reasons:
        return False, None
    if any(r is None for r in reasons):
        return True, None
    return True, min(r for r in reasons if r is not None)


def _ref_classify_slice(
    pool: str, nodes: list[Node], now: datetime, grace: timedelta, stabilization: timedelta, tolerated: frozenset[str]
) -> Slice:
    first = nodes[0]
    machine = next((n.machine_type for n in nodes if n.machine_type), None)
    per_host = chips_per_host(machine, (n.tpu_chips for n in nodes))
    shape = SliceShape(first.accelerator or "", first.topology or "", per_host)
    expected = expected_host_count(shape.topology, per_host)
    names = tuple(sorted(n.name for n in nodes))
    times = [
        t.time_added or n.ready_transition_time
        for n in nodes
        for t in n.taints
        if t.key == UNREACHABLE_TAINT and (t.time_added or n.ready_transition_time)
    ]
    unreachable = min(t for t in times if t is not None) if times else None
    bad_times: list[datetime | None] = []
    for node in nodes:
        bad, since = _ref_node_problem_since(node, tolerated)
        if bad:
            bad_times.append(since)
    if expected is not None and len(nodes) < expected:
        bad_times.append(None)
    if bad_times:
        known = [t for t in bad_times if t is not None]
        earliest = None if len(known) < len(bad_times) else min(known)
        if earliest is None or now - earliest >= grace:
            return Slice(pool, shape, expected, names, SliceHealth.UNHEALTHY, earliest, unreachable)
        return Slice(pool, shape, expected, names, SliceHealth.SUSPECT, earliest, unreachable)
    goods = []
    for n in nodes:
        good = [t for t in (n.ready_transition_time, n.creation_timestamp) if t is not None]
        goods.append(max(good) if good else None)
    known_goods = [g for g in goods if g is not None]
    latest = max(known_goods) if known_goods else None
    if latest is not None and now - latest < stabilization:
        return Slice(pool, shape, expected, names, SliceHealth.RECOVERING, latest)
    return Slice(pool, shape, expected, names, SliceHealth.HEALTHY, latest)


def _ref_running_in_kueue(unit: Unit) -> bool:
    wl, js = unit.workload, unit.jobset
    return (
        wl is not None
        and wl.active
        and wl.admitted
        and not wl.evicted
        and not wl.finished
        and not js.suspended
        and js.terminal_state is None
    )


def _ref_world(snapshot: ClusterSnapshot, now: datetime, config: HotswapConfig) -> dict[str, Any]:
    """The previous `build_world`, returning the `_summary` of what it built."""
    by_pool: dict[str, list[Node]] = defaultdict(list)
    for node in snapshot.nodes:
        key = slice_key(node)
        if key is not None:
            by_pool[key].append(node)
    tolerated = frozenset(config.tolerated_taint_keys)
    slices = {
        pool: _ref_classify_slice(pool, members, now, config.unhealthy_grace, config.recovery_stabilization, tolerated)
        for pool, members in sorted(by_pool.items())
    }
    slices = confirm_failures(
        slices,
        workload_failures(snapshot, now, config),
        now,
        config.unhealthy_grace,
        config.confirmed_unhealthy_grace,
    )
    node_pool_of = {n.name: key for n in snapshot.nodes if (key := slice_key(n) or n.node_pool)}
    queues = {q.name: q for q in snapshot.cluster_queues}
    workload_by_owner: dict[str, Workload] = {}
    for candidate in sorted(snapshot.workloads, key=lambda w: (w.namespace, w.name)):
        if candidate.owner_jobset_uid is not None:
            workload_by_owner.setdefault(candidate.owner_jobset_uid, candidate)

    def in_ns(namespace: str) -> bool:
        return not config.namespaces or namespace in config.namespaces

    units: dict[str, dict[str, Any]] = {}
    by_key: dict[tuple[str, str], dict[str, Any]] = {}
    for js in snapshot.jobsets:
        if not in_ns(js.namespace):
            continue
        wl = workload_by_owner.get(js.uid)
        demand: dict[SliceShape, int] = defaultdict(int)
        for rj in js.replicated_jobs:
            if rj.shape is not None and rj.replicas > 0:
                demand[rj.shape] += rj.replicas
        kueue_priority = 0
        if wl is not None:
            kueue_priority = wl.priority or 0
            raw = wl.annotations.get(KUEUE_PRIORITY_BOOST, "")
            if config.priority_boost_enabled and raw.lstrip("-").isdigit():
                kueue_priority += int(raw)
        unit: dict[str, Any] = {
            "jobset": js,
            "uid": js.uid,
            "key": js.key,
            "workload": wl,
            "kueue_priority": kueue_priority,
            "pod_priority": js.pod_priority or 0,
            "cluster_queue": queues.get(wl.cluster_queue) if wl is not None and wl.cluster_queue else None,
            "live_pods": [],
            "departed": [],
            "occupied": set(),
            "demand": dict(demand),
            "held_by": HeldBy.decode(wl.annotations.get(KEYS.held_by, "")) if wl is not None else None,
            "op": OpRecord.decode(wl.annotations.get(KEYS.op, ""))
            if wl is not None and KEYS.op in wl.annotations
            else None,
        }
        units[js.uid] = unit
        by_key[(js.namespace, js.name)] = unit
    occupants: dict[str, set[str]] = defaultdict(set)
    pod_priorities: dict[str, list[int]] = defaultdict(list)
    for pod in snapshot.pods:
        owner = by_key.get((pod.namespace, pod.jobset_name))
        if owner is not None:
            owner["live_pods"].append(pod)
            if pod.priority is not None:
                pod_priorities[owner["uid"]].append(pod.priority)
        if pod.phase in (PodPhase.SUCCEEDED, PodPhase.FAILED) or pod.node_name is None:
            continue
        pool = node_pool_of.get(pod.node_name) or pod.node_pool
        if pool is None:
            continue
        occupants[pool].add(owner["uid"] if owner is not None else f"foreign:{pod.namespace}/{pod.jobset_name}")
        if owner is not None:
            owner["occupied"].add(pool)
    for gone in snapshot.departed_pods:
        owner = by_key.get((gone.namespace, gone.jobset_name))
        if owner is not None and gone.gone_at >= now - config.attribution_window:
            owner["departed"].append(gone)
    for uid, unit in units.items():
        seen = pod_priorities.get(uid, [])
        if unit.pop("jobset").pod_priority is None and seen:
            unit["pod_priority"] = max(seen)
        elif seen:
            unit["pod_priority"] = max(unit["pod_priority"], max(seen))
    orphans = [
        wl
        for wl in snapshot.workloads
        if (wl.owner_jobset_uid is None or wl.owner_jobset_uid not in units) and in_ns(wl.namespace)
    ]
    return {
        "slices": slices,
        "units": [{**u, "occupied": sorted(u["occupied"])} for u in units.values()],
        "occupants": {pool: sorted(uids) for pool, uids in occupants.items()},
        "node_pool_of": node_pool_of,
        "nodes": {n.name: n for n in snapshot.nodes},
        "orphans": orphans,
    }


def _summary(world: World) -> dict[str, Any]:
    units = [
        {
            "uid": u.uid,
            "key": u.key,
            "workload": u.workload,
            "kueue_priority": u.kueue_priority,
            "pod_priority": u.pod_priority,
            "cluster_queue": u.cluster_queue,
            "live_pods": list(u.live_pods),
            "departed": list(u.departed),
            "occupied": sorted(u.occupied),
            "demand": dict(u.demand),
            "held_by": u.held_by,
            "op": u.op,
        }
        for u in world.units.values()
    ]
    return {
        "slices": world.slices,
        "units": units,
        "occupants": {pool: sorted(uids) for pool, uids in world.occupants.items()},
        "node_pool_of": world.node_pool_of,
        "nodes": world.nodes,
        "orphans": world.orphan_workloads,
    }


# --- reference: victim selection as it was before optimisation -----------------------------------------------


@dataclass(frozen=True)
class _RefCandidate:
    unit: Unit
    pools: frozenset[str]
    lost_chip_s: float
    """Chips x progress since the last checkpoint (or the attempt's start): what evicting it throws away."""


def _lost_chip_s(unit: Unit, now: datetime) -> float:
    """Restated: chips of the JobSet x seconds since its last safe point (checkpoint, attempt start, admission)."""

    def per_slice(topology: str) -> int:
        dims = topology.lower().split("x")
        return math.prod(int(d) for d in dims) if all(d.isdigit() for d in dims) else 1

    chips = sum(per_slice(shape.topology) * n for shape, n in unit.demand.items())
    safe = unit.start_time()
    created = [p.creation_timestamp for p in unit.live_pods if p.restart_attempt == unit.jobset.restarts]
    known = [t for t in created if t is not None]
    if known:
        safe = max(safe, min(known))
    if unit.checkpoint is not None:
        safe = max(safe, unit.checkpoint)
    return chips * max((now - safe).total_seconds(), 0.0)


def _ref_freed(chosen: Iterable[_RefCandidate], occupants: Mapping[str, set[str]]) -> int:
    members = list(chosen)
    uids = {c.unit.uid for c in members}
    pools: set[str] = set().union(*(c.pools for c in members)) if members else set()
    return sum(1 for p in pools if occupants.get(p, set()) <= uids)


def _ref_choose(
    needed: int, candidates: list[_RefCandidate], occupants: Mapping[str, set[str]], now: datetime
) -> list[_RefCandidate] | None:
    def order(c: _RefCandidate) -> tuple[int, int, float, str]:
        return (c.unit.kueue_priority, c.unit.pod_priority, c.lost_chip_s, c.unit.key)

    def gain(c: _RefCandidate, uids: set[str], freed: set[str], waiting: set[str]) -> int:
        with_c = uids | {c.unit.uid}
        own = sum(1 for p in c.pools if p not in freed and occupants.get(p, set()) <= with_c)
        return own + sum(1 for p in waiting - c.pools if occupants.get(p, set()) <= with_c)

    if needed <= 0:
        return []
    ordered = sorted(candidates, key=order)
    threshold: int | None = None
    prefix: list[_RefCandidate] = []
    index = 0
    while index < len(ordered):
        level = ordered[index].unit.kueue_priority
        while index < len(ordered) and ordered[index].unit.kueue_priority == level:
            prefix.append(ordered[index])
            index += 1
        if _ref_freed(prefix, occupants) >= needed:
            threshold = level
            break
    if threshold is None:
        return None
    chosen: list[_RefCandidate] = []
    uids: set[str] = set()
    freed: set[str] = set()
    waiting: set[str] = set()
    remaining = list(prefix)
    while len(freed) < needed and remaining:
        gains = [(gain(c, uids, freed, waiting), c) for c in remaining]
        closing = [(g, c) for g, c in gains if len(freed) + g >= needed]
        if closing:
            _, pick = min(closing, key=lambda gc: (gc[0], order(gc[1])))
        else:
            best, pick = min(gains, key=lambda gc: (-gc[0], order(gc[1])))
            if best <= 0:
                break
        chosen.append(pick)
        remaining.remove(pick)
        uids.add(pick.unit.uid)
        for p in pick.pools | waiting:
            (freed if occupants.get(p, set()) <= uids else waiting).add(p)
        waiting -= freed
    if len(freed) < needed:
        chosen = list(prefix)
    for victim in reversed(list(chosen)):
        trial = [c for c in chosen if c is not victim]
        if _ref_freed(trial, occupants) >= needed:
            chosen = trial
    return sorted(chosen, key=lambda c: c.unit.key)


def _ref_candidates(
    world: World, preemptor: Unit, shape: SliceShape, eligible: list[Unit], excluded: set[str]
) -> list[_RefCandidate]:
    candidates = []
    for victim in eligible:
        if victim.workload is None:
            continue
        lower = victim.kueue_priority < preemptor.kueue_priority and victim.pod_priority < preemptor.pod_priority
        if not lower or not in_scope(world, preemptor, victim):
            continue
        pools = frozenset(
            pool
            for pool in victim.occupied
            if (found := world.slices.get(pool)) is not None
            and found.usable
            and pool not in excluded
            and found.shape.matches(shape)
        )
        if pools:
            candidates.append(_RefCandidate(victim, pools, _lost_chip_s(victim, world.now)))
    return candidates


# --- generated snapshots --------------------------------------------------------------------------------------


@st.composite
def snapshots(draw: st.DrawFn) -> ClusterSnapshot:
    """Fleets with shared and single-host slices, failures, odd nodes, foreign and departed pods, holds."""
    pools = [f"s{i:02d}" for i in range(draw(st.integers(2, 14)))]
    wide = draw(st.lists(st.sampled_from(pools), max_size=3, unique=True))
    fleet = Fleet().slices(*[p for p in pools if p not in wide])
    if wide:
        fleet.slices(*wide, topology="2x4")
    singles = [f"one{i}" for i in range(draw(st.integers(0, 2)))]
    if singles:
        fleet.slices(*singles, topology="2x2")
    for name, cohort in (("cq-a", "cohort"), ("cq-b", "cohort"), ("cq-c", None), ("cq-d", "other")):
        fleet.queue(name, cohort)
    jobs = []
    for j in range(draw(st.integers(2, 12))):
        namespace = draw(st.sampled_from(["ml", "ml", "ml", "batch"]))
        on = draw(st.lists(st.sampled_from(pools), min_size=1, max_size=3, unique=True))  # often shares slices
        shape = SHAPE_2X4 if all(p in wide for p in on) else SHAPE_4X4
        builder = JobSetBuilder(namespace, f"job{j}").replicated_job("w", len(on), shape)
        priority = draw(st.sampled_from([10, 10, 100, 100, 500, 1000]))
        workload = WorkloadBuilder(namespace, f"wl-{j}")
        if draw(st.booleans()):
            workload.annotation(KUEUE_PRIORITY_BOOST, str(draw(st.sampled_from([-20, 5, 900]))))
        hold = draw(st.sampled_from(["none"] * 6 + ["held", "history", "op"]))
        if hold == "held":
            workload.active(False).annotation(KEYS.held_by, f"ml/job0/js-x/{draw(st.integers(0, 2))}")
            workload.annotation(KEYS.held_since, format_time(T0 - timedelta(minutes=draw(st.integers(1, 600)))))
        elif hold == "history":
            workload.annotation(KEYS.hold_history, format_time(T0 - timedelta(hours=draw(st.integers(1, 30)))))
        elif hold == "op":
            workload.annotation(KEYS.op, draw(st.sampled_from(["id=op-1;attempt=0;slices=s00;victims=", "bad"])))
        admitted = T0 - timedelta(minutes=draw(st.integers(1, 300)))
        pod_priority = draw(st.sampled_from([None, priority, priority, priority, 50]))
        js = fleet.run(
            builder,
            on,
            priority,
            draw(st.sampled_from(["cq-a", "cq-b", "cq-c", "cq-d"])),
            workload,
            pod_priority=pod_priority,
            admitted_at=admitted,
            pod_phase=draw(st.sampled_from([PodPhase.RUNNING] * 8 + [PodPhase.PENDING, PodPhase.FAILED])),
        )
        jobs.append((js, on))
    failed: set[str] = set()
    for js, on in jobs:
        if draw(st.integers(0, 4)) == 0:
            pool = draw(st.sampled_from(on))
            if pool in failed:
                continue
            failed.add(pool)
            ago = timedelta(seconds=draw(st.integers(1, 900)))
            fleet.fail(pool, T0 - ago, how=draw(st.sampled_from(FAIL_MODES)), hosts=draw(st.integers(1, 4)))
            if draw(st.booleans()):
                fleet.evict_pods(js, pool, T0 - ago)
            else:
                fleet.depart_pods(js, pool, T0 - ago - timedelta(minutes=draw(st.sampled_from([0, 30]))))
    if draw(st.booleans()):  # a recovering node
        pool = draw(st.sampled_from(pools))
        name = fleet.pools[pool][0]
        ready = T0 - timedelta(seconds=draw(st.integers(1, 600)))
        fleet.node(name, NodeBuilder(name).pool(pool).tpu().ready_since(ready))
    if draw(st.booleans()):  # a CPU node, and a foreign pod on a TPU slice
        fleet.node("cpu-0", NodeBuilder("cpu-0").pool("system"))
        pool = draw(st.sampled_from(pools))
        fleet.pods.append(
            Pod(
                "other",
                "foreign-0",
                "uid-foreign",
                "theirs",
                node_name=fleet.pools[pool][-1],
                node_pool=pool,
                phase=PodPhase.RUNNING,
            )
        )
    if draw(st.booleans()):  # an orphan Workload
        fleet.set_workload(WorkloadBuilder("ml", "orphan").priority(5).obj())
    snapshot = fleet.snapshot()
    if draw(st.booleans()):  # a JobSet whose template has no PriorityClass, its pods some (or none, or negative)
        target = snapshot.jobsets[0]
        value = draw(st.sampled_from([None, -5, 7]))
        snapshot = replace(
            snapshot,
            jobsets=(replace(target, pod_priority=None), *snapshot.jobsets[1:]),
            pods=tuple(
                replace(p, priority=value) if (p.namespace, p.jobset_name) == (target.namespace, target.name) else p
                for p in snapshot.pods
            ),
        )
    if draw(st.booleans()):  # a departed pod whose node is gone from the snapshot
        gone = DepartedPod("ml", "job0", 0, "vanished-0", None, T0 - timedelta(minutes=2))
        snapshot = replace(snapshot, departed_pods=(*snapshot.departed_pods, gone))
    return snapshot


@st.composite
def crowded_fleets(draw: st.DrawFn) -> ClusterSnapshot:
    """One healthy 4x4 pool per job mostly, some shared, few priority levels: many victim sets to choose from."""
    fleet = Fleet().queue("cq-a", "cohort").queue("cq-b", "cohort").queue("cq-c", None)
    free = [f"p{i:02d}" for i in range(24)]
    fleet.slices(*free)
    used: list[str] = []
    for j in range(draw(st.integers(3, 12))):
        size = draw(st.integers(1, 3))
        on = []
        for _ in range(size):
            if used and (not free or draw(st.integers(0, 4)) == 0):
                on.append(draw(st.sampled_from(used)))  # shared with an earlier job
            else:
                on.append(free.pop(0))
        on = list(dict.fromkeys(on))
        used.extend(on)
        priority = draw(st.sampled_from([10, 10, 100, 100, 1000]))
        fleet.run(
            JobSetBuilder("ml", f"job{j}").replicated_job("w", len(on)),
            on,
            priority,
            draw(st.sampled_from(["cq-a", "cq-b", "cq-c"])),
            pod_priority=draw(st.sampled_from([priority, priority, priority + 1, 5])),
            admitted_at=T0 - timedelta(minutes=draw(st.integers(1, 5))),
        )
    return fleet.snapshot()


CONFIGS = st.builds(
    HotswapConfig,
    scope=st.sampled_from(list(Scope)),
    priority_boost_enabled=st.booleans(),
    namespaces=st.sampled_from([(), ("ml",)]),
    max_holds_per_window=st.sampled_from([1, 3]),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshot=snapshots(), config=CONFIGS, later=st.integers(0, 900))
def test_world_index_matches_the_reference(snapshot: ClusterSnapshot, config: HotswapConfig, later: int) -> None:
    now = T0 + timedelta(seconds=later)
    world = build_world(snapshot, now, config)
    assert _summary(world) == _ref_world(snapshot, now, config)
    for unit in world.units.values():
        assert unit.running_in_kueue == _ref_running_in_kueue(unit)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshot=st.one_of(snapshots(), crowded_fleets()), config=CONFIGS, data=st.data())
def test_victim_selection_matches_the_reference(
    snapshot: ClusterSnapshot, config: HotswapConfig, data: st.DataObject
) -> None:
    world = build_world(snapshot, T0, config)
    units = sorted(world.units.values(), key=lambda u: u.key)
    with_workload = [u for u in units if u.workload is not None]
    for preemptor in with_workload:  # scope groups partition exactly as in_scope pairs units
        for victim in with_workload:
            group = scope_group(world, preemptor)
            assert in_scope(world, preemptor, victim) == (group is not None and group == scope_group(world, victim))

    uids = [u.uid for u in units]
    disrupted = set(data.draw(st.lists(st.sampled_from(uids), max_size=2))) if uids else set()
    eligible = [u for u in units if why_not_victim(world, u, disrupted, set()) is None]
    index = VictimIndex(world, disrupted, set())
    taken = data.draw(st.lists(st.sampled_from(eligible), max_size=2, unique=True)) if eligible else []
    index.take(taken)
    eligible = [u for u in eligible if u not in taken]
    slices = sorted(world.slices)
    excluded = set(data.draw(st.lists(st.sampled_from(slices), max_size=3))) if slices else set()
    chosen = {u.uid for u in data.draw(st.lists(st.sampled_from(eligible), max_size=1))} if eligible else set()
    shapes = sorted({s.shape for s in world.slices.values()}, key=lambda shape: shape.topology)
    for preemptor in with_workload:
        for shape in shapes:
            for needed in (1, 2, 3, 5):
                reference = _ref_choose(
                    needed,
                    _ref_candidates(world, preemptor, shape, [u for u in eligible if u.uid not in chosen], excluded),
                    world.occupants,
                    world.now,
                )
                got = choose_victims(needed, index.candidates(preemptor, shape, chosen, excluded), world.occupants)
                expected = None if reference is None else [(c.unit.key, c.pools) for c in reference]
                assert (None if got is None else [(c.unit.key, c.pools) for c in got]) == expected


@st.composite
def victim_pools(draw: st.DrawFn) -> tuple[list[Unit], dict[str, frozenset[str]], dict[str, set[str]]]:
    """Victims (as Units), the slices each could free, and every slice's occupants (some shared, some foreign)."""
    units: list[Unit] = []
    pools_of: dict[str, frozenset[str]] = {}
    occupants: dict[str, set[str]] = defaultdict(set)
    for j in range(draw(st.integers(1, 8))):
        started = T0 - timedelta(minutes=draw(st.integers(1, 4)))
        js = replace(JobSetBuilder("ml", f"v{j}").obj(), creation_timestamp=started)
        unit = Unit(js, None, draw(st.sampled_from([1, 1, 2, 3])), draw(st.sampled_from([1, 2])), None)
        pools = set()
        for k in range(draw(st.integers(1, 4))):
            shared = occupants and draw(st.integers(0, 3)) == 0
            pools.add(draw(st.sampled_from(sorted(occupants))) if shared else f"p{j}-{k}")
        for pool in pools:
            occupants[pool].add(unit.uid)
        units.append(unit)
        pools_of[unit.uid] = frozenset(pools)
    for pool in draw(st.lists(st.sampled_from(sorted(occupants)), max_size=2)):
        occupants[pool].add("foreign:other/theirs")
    return units, pools_of, dict(occupants)


@settings(max_examples=400, deadline=None)
@given(case=victim_pools(), needed=st.integers(0, 6))
def test_choose_victims_matches_the_reference(
    case: tuple[list[Unit], dict[str, frozenset[str]], dict[str, set[str]]], needed: int
) -> None:
    units, pools_of, occupants = case
    reference = _ref_choose(
        needed, [_RefCandidate(u, pools_of[u.uid], _lost_chip_s(u, T0)) for u in units], occupants, T0
    )
    ordered = sorted((Candidate(u, pools_of[u.uid], victim_order(u, T0)) for u in units), key=lambda c: c.order)
    got = choose_victims(needed, iter(ordered), occupants)
    expected = None if reference is None else [(c.unit.key, c.pools) for c in reference]
    assert (None if got is None else [(c.unit.key, c.pools) for c in got]) == expected
