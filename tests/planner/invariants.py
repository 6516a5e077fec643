"""Reusable oracles for the hotswap invariants (docs/planner.md, "Invariants") over one snapshot and its plan.

`violations(snapshot, plan, config)` returns human-readable violations (empty = all hold);
`assert_invariants` raises with all of them. `idempotence_violations` re-plans on the applied snapshot (I11).
These recompute facts independently where practical instead of calling the planner's own helpers.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from datetime import datetime

from gke_tpu_priority.hotswap.annotations import NODEPOOL_LABEL, AnnotationKeys, HeldBy, OpRecord, decode_history
from gke_tpu_priority.hotswap.config import HotswapConfig
from gke_tpu_priority.hotswap.model import ClusterSnapshot, ConditionStatus, JobSet, PodPhase, SliceShape, Workload
from gke_tpu_priority.hotswap.planner import plan as make_plan
from gke_tpu_priority.hotswap.planner.actions import (
    ClearOp,
    EventReason,
    FastFailPod,
    HoldVictim,
    Plan,
    RecordOp,
    ReleaseReason,
    ReleaseVictim,
    make_op_id,
)
from gke_tpu_priority.hotswap.planner.simulate import apply_actions
from gke_tpu_priority.hotswap.slices import (
    Slice,
    SliceHealth,
    classify_slices,
    confirm_failures,
    expected_host_count,
    slice_key,
)


def _workload_index(snapshot: ClusterSnapshot) -> dict[str, Workload]:
    return {f"{w.namespace}/{w.name}": w for w in snapshot.workloads}


def _fresh_admission(wl: Workload, since: datetime) -> bool:
    """Kueue reserved quota for (and admitted) `wl` at or after `since`."""
    times = [
        c.last_transition_time
        for c in wl.conditions
        if c.type in ("QuotaReserved", "Admitted") and c.status is ConditionStatus.TRUE and c.last_transition_time
    ]
    return bool(times) and min(times) >= since


def workload_failures(
    snapshot: ClusterSnapshot, now: datetime, config: HotswapConfig
) -> dict[str, list[datetime | None]]:
    """Slice → failure times of pods of live JobSets there (current attempt Failed/Unknown/disrupted, or gone
    Failed/disrupted): what may confirm a Suspect slice at once."""
    pool_of = {n.name: slice_key(n) or n.node_pool for n in snapshot.nodes}
    live = {
        (j.namespace, j.name): j.restarts
        for j in snapshot.jobsets
        if j.terminal_state is None and (not config.namespaces or j.namespace in config.namespaces)
    }
    found: dict[str, list[datetime | None]] = {}
    for pod in snapshot.pods:
        attempt = live.get((pod.namespace, pod.jobset_name))
        pool = pool_of.get(pod.node_name or "") or pod.node_pool
        bad = pod.phase in (PodPhase.FAILED, PodPhase.UNKNOWN) or pod.disruption_reason is not None
        if pool and bad and attempt == pod.restart_attempt:
            found.setdefault(pool, []).append(pod.disruption_time)
    for gone in snapshot.departed_pods:
        pool = pool_of.get(gone.node_name or "") or gone.node_pool
        recent = gone.gone_at >= now - config.attribution_window  # older departures are forgotten (B.3 (a))
        if pool and recent and (gone.namespace, gone.jobset_name) in live and (gone.failed or gone.disruption_reason):
            found.setdefault(pool, []).append(gone.gone_at)
    return found


def violations(snapshot: ClusterSnapshot, plan: Plan, config: HotswapConfig) -> list[str]:
    now: datetime = plan.now
    keys = AnnotationKeys(config.annotation_domain)
    problems: list[str] = []
    workloads = _workload_index(snapshot)
    jobsets = {j.uid: j for j in snapshot.jobsets}
    slices = classify_slices(
        snapshot.nodes,
        now,
        config.unhealthy_grace,
        config.recovery_stabilization,
        (*config.tolerated_taint_keys, keys.quarantine_taint),
    )
    slices = confirm_failures(
        slices, workload_failures(snapshot, now, config), now, config.unhealthy_grace, config.confirmed_unhealthy_grace
    )
    pool_of = {n.name: slice_key(n) or n.node_pool for n in snapshot.nodes}  # a single-host VM is a slice
    hosts_of: dict[str, list[str]] = {}
    for n in snapshot.nodes:
        if pool_of[n.name]:
            hosts_of.setdefault(pool_of[n.name] or "", []).append(n.name)
    occupants: dict[str, set[str]] = {}
    running: dict[str, int] = {}  # JobSet key -> Running pods, any node
    for pod in snapshot.pods:
        if pod.phase is PodPhase.RUNNING:
            key = f"{pod.namespace}/{pod.jobset_name}"
            running[key] = running.get(key, 0) + 1
        if pod.node_name and pod.phase not in (PodPhase.SUCCEEDED, PodPhase.FAILED):
            pool = pool_of.get(pod.node_name) or pod.node_pool
            if pool:
                occupants.setdefault(pool, set()).add(f"{pod.namespace}/{pod.jobset_name}")

    def jobset_key(wl: Workload) -> str:
        js = jobsets.get(wl.owner_jobset_uid or "")
        return js.key if js else f"{wl.namespace}/?"

    # One write per object per plan: the controller's conditional writes would conflict otherwise.
    targets = Counter((a.pod.key if isinstance(a, FastFailPod) else a.workload.key) for a in plan.actions)
    problems += [f"several writes to {k} in one plan" for k, n in targets.items() if n > 1]

    holds = [a for a in plan.actions if isinstance(a, HoldVictim)]
    events = plan.events
    records = {a.workload.key: a for a in plan.actions if isinstance(a, RecordOp)}
    for hold in holds:
        victim = workloads.get(hold.workload.key)
        preemptor = workloads.get(hold.preemptor.key)
        if victim is None or preemptor is None:
            problems.append(f"hold references unknown workloads {hold}")
            continue
        # I1: strictly lower under both priorities.
        v_js, h_js = jobsets.get(victim.owner_jobset_uid or ""), jobsets.get(preemptor.owner_jobset_uid or "")
        if (victim.priority or 0) >= (preemptor.priority or 0):
            problems.append(f"I1 kueue priority: {victim.key} ({victim.priority}) ≥ {preemptor.key}")
        if v_js and h_js and (v_js.pod_priority or 0) >= (h_js.pod_priority or 0):
            problems.append(f"I1 pod priority: {victim.key} ≥ {preemptor.key}")
        # I5: the hold sets held-by and deactivates in one write (structural), victim was active & unheld.
        if keys.held_by not in hold.set_annotations:
            problems.append(f"I5 hold without held-by on {victim.key}")
        if not victim.active or keys.held_by in victim.annotations:
            problems.append(f"I3 {victim.key} held while already inactive/held")
        # I9: a preemptor of an open op is held only by a strictly higher preemptor (I1 above) in the same pass
        # that aborts its op: the hold's own write removes the op, nothing records a new one, and it is told why.
        if keys.op in victim.annotations or victim.key in records:
            aborted = any(e.reason is EventReason.ABORTED and e.involved.uid == victim.owner_jobset_uid for e in events)
            if victim.key in records or keys.op not in hold.remove_annotations or not aborted:
                problems.append(f"I9 {victim.key} is a preemptor and a victim without its op being aborted")
        # I12: hold rate limit.
        history = decode_history(victim.annotations.get(keys.hold_history, ""))
        recent = [t for t in history if t > now - config.hold_window]
        if len(recent) >= config.max_holds_per_window:
            problems.append(f"I12 {victim.key} held {len(recent)} times in the window")
        if hold.preemptor.key not in records and keys.op not in preemptor.annotations:
            problems.append(f"hold of {victim.key} without an operation on {preemptor.key}")

    # I3: slices and victims claimed at most once across all operations after this plan.
    after = apply_actions(snapshot, plan.actions, now)
    slice_claims: Counter[str] = Counter()
    victim_claims: Counter[str] = Counter()
    for wl in after.workloads:
        op = OpRecord.decode(wl.annotations.get(keys.op, "")) if keys.op in wl.annotations else None
        if op is not None:
            slice_claims.update(op.reserved)
            victim_claims.update(op.victims)
        # I5: every Workload carrying held-by is inactive.
        if keys.held_by in wl.annotations and wl.active:
            problems.append(f"I5 {wl.key} carries held-by but is active after the plan")
        # I9: a held victim carries no op of its own.
        if keys.held_by in wl.annotations and op is not None:
            problems.append(f"I9 {wl.key} is held and still carries an open operation after the plan")
    problems += [f"I3 slice {s} reserved by {n} operations" for s, n in slice_claims.items() if n > 1]
    problems += [f"I3 workload {v} victim of {n} operations" for v, n in victim_claims.items() if n > 1]

    held_after = {jobset_key(w) for w in after.workloads if keys.held_by in w.annotations and not w.active}
    for record in records.values():
        op = record.op
        preemptor = workloads.get(record.workload.key)
        if op is None or preemptor is None:
            problems.append(f"malformed op record {record}")
            continue
        h_js = jobsets.get(preemptor.owner_jobset_uid or "")
        if h_js is None:
            problems.append(f"op for unknown JobSet {preemptor.key}")
            continue
        shapes = [rj.shape for rj in h_js.replicated_jobs if rj.shape is not None]
        victim_keys = set()
        for v in op.victims:
            vw = workloads.get(v)
            if vw is not None:
                victim_keys.add(jobset_key(vw))
        for pool in op.reserved:
            found = slices.get(pool)
            # I4: reserved slices are healthy and of the preemptor's shape.
            if found is None or found.health is SliceHealth.UNHEALTHY:
                problems.append(f"I4 op {op.op_id} reserves unhealthy/unknown slice {pool}")
            elif not any(found.shape.matches(s) for s in shapes):
                problems.append(f"I4 op {op.op_id} reserves {pool} of the wrong shape")
            # I2: a reserved slice is free, or all its occupants are held victims (of this op, or surplus
            # freed by another op in the same pass) or the preemptor itself.
            extra = occupants.get(pool, set()) - victim_keys - held_after - {h_js.key}
            if extra:
                problems.append(f"I2 op {op.op_id} reserves {pool} still used by {sorted(extra)}")
        # I7: every victim frees at least one reserved slice.
        for v in op.victims:
            vw = workloads.get(v)
            if vw is None:
                continue
            vk = jobset_key(vw)
            if keys.held_by in vw.annotations and HeldBy.decode(vw.annotations[keys.held_by]) is not None:
                continue  # reconstructed op, victims held earlier
            # The admission fence (C12) legitimately extends I7: a lower-priority Workload Kueue admitted with the
            # quota this op freed, held before any of its pods runs, frees the quota it would use to take a
            # reserved slice rather than a slice it occupies. It must be a fresh admission that never ran.
            if op.since is not None and _fresh_admission(vw, op.since) and not running.get(vk):
                continue
            if not any(vk in occupants.get(p, set()) for p in op.reserved):
                problems.append(f"I7 victim {v} of {op.op_id} frees no reserved slice")
        previous = OpRecord.decode(preemptor.annotations.get(keys.op, "")) if keys.op in preemptor.annotations else None
        # Fence holds are counted in the op and bounded per op, not only per pass.
        fenced_now = sum(1 for h in holds if h.fenced and h.op_id == op.op_id)
        before = previous.fenced if previous is not None and previous.op_id == op.op_id else 0
        if op.fenced != before + fenced_now:
            problems.append(f"op {op.op_id} counts {op.fenced} fence holds, expected {before} + {fenced_now}")
        if fenced_now and op.fenced > config.fence_holds_per_slice * len(op.reserved):
            problems.append(f"op {op.op_id} fenced {op.fenced} > {config.fence_holds_per_slice} per reserved slice")
        if previous is None or previous.op_id != op.op_id:
            problems += _redundant_victims(
                keys.op, op, h_js, victim_keys, workloads, jobset_key, running, slices, occupants, after
            )
        # I8: infra-only trigger: some pod (live or departed) of the preemptor sat on an unhealthy slice. Only a
        # new op needs one; rewriting an open op (an extension, C12) continues what infra started.
        if previous is not None and previous.op_id == op.op_id:
            continue
        pools_touched = {
            pool_of.get(p.node_name or "") or p.node_pool
            for p in snapshot.pods
            if p.namespace == h_js.namespace and p.jobset_name == h_js.name and p.node_name
        } | {
            d.node_pool or pool_of.get(d.node_name or "")
            for d in snapshot.departed_pods
            if d.namespace == h_js.namespace and d.jobset_name == h_js.name and d.node_name
        }
        if any(p is None or p not in slices or slices[p].health is SliceHealth.UNHEALTHY for p in pools_touched):
            continue
        # I8 is extended for slice priority inversions: in reconciler mode every TPU PriorityClass has
        # preemptionPolicy Never and JobSet's exclusive anti-affinity only separates equal priorities, so a
        # lower-priority leader can share the slice where the preemptor waits for its followers, and nothing but
        # the reconciler can undo that (docs/planner.md, "Slice priority inversions"). Such an op needs no infra
        # evidence, but every slice it takes (not the ones it keeps) must hold live pods of the preemptor's current
        # attempt and of another JobSet, each of which is a victim of this op or already held; and the preemptor
        # is not yet all Running.
        own_pods = [
            p
            for p in snapshot.pods
            if p.namespace == h_js.namespace and p.jobset_name == h_js.name and p.deletion_timestamp is None
        ]
        inversion = bool(op.slices) and sum(p.phase is PodPhase.RUNNING for p in own_pods) < sum(
            len(hosts_of.get(pool, ())) for pool in op.reserved
        )
        for pool in op.slices:
            mine = any(
                (pool_of.get(p.node_name or "") or p.node_pool) == pool and p.restart_attempt == h_js.restarts
                for p in own_pods
                if p.node_name and not p.terminal
            )
            others = occupants.get(pool, set()) - {h_js.key}
            inversion = inversion and mine and bool(others) and others <= victim_keys | held_after
        if not inversion and not _starved(snapshot, plan, config, h_js, preemptor, op, slices, occupants, after):
            problems.append(
                f"I8 op {op.op_id} for {h_js.key} without an unhealthy slice, a priority inversion or starvation"
            )

    # I10 (whatever the reconciler holds it can give back): a held Workload whose JobSet is outside the view
    # (namespace not configured, or no such JobSet) falls under no other rule, so it is released at once.
    released_now = {a.workload.key for a in plan.actions if isinstance(a, ReleaseVictim)}
    for wl in snapshot.workloads:
        owner = jobsets.get(wl.owner_jobset_uid or "")
        outside = owner is None or bool(config.namespaces and owner.namespace not in config.namespaces)
        if wl.annotations.get(keys.held_by) and outside and wl.key not in released_now:
            problems.append(f"I10 {wl.key} is held outside its view and not released")

    # Kueue's reclaimWithinCohort Any: a released victim that fits its queue's nominal quota evicts borrowers of
    # other queues of the cohort irrespective of priority. Capacity and preemptor-gone releases must not expose
    # a running, strictly higher borrower (maxHold and reactivation are not the planner's choice).
    queues = {q.name: q for q in snapshot.cluster_queues}
    for release in (a for a in plan.actions if isinstance(a, ReleaseVictim)):
        released = workloads.get(release.workload.key)
        if released is None or release.reason not in (
            ReleaseReason.CAPACITY,
            ReleaseReason.QUEUED_CAPACITY,
            ReleaseReason.PREEMPTOR_GONE,
        ):
            continue
        own = queues.get(released.cluster_queue or "")
        for other in snapshot.workloads:
            borrower = queues.get(other.cluster_queue or "")
            if (
                borrower is None
                or not borrower.borrowing
                or borrower.cohort_name is None
                or (other.priority or 0) <= (released.priority or 0)
                or not other.active
                or not any(c.type == "Admitted" and c.status is ConditionStatus.TRUE for c in other.conditions)
            ):
                continue
            reclaimers = [
                q for q in queues.values() if q.reclaim_any and q.cohort_name == borrower.cohort_name and q != borrower
            ]
            if (own is None and reclaimers) or own in reclaimers:
                problems.append(f"{released.key} released while reclaimWithinCohort Any could evict {other.key}")

    # B.7(a): a capacity release never takes a shape a strictly higher held victim still waits for (one left held
    # after the plan, not kept by an open op (E3), where no reclaimWithinCohort Any queue can defer releases).
    op_victims_after = {
        v
        for w in after.workloads
        if keys.op in w.annotations and (rec := OpRecord.decode(w.annotations[keys.op])) is not None
        for v in rec.victims
    }
    still_held = [
        w
        for w in after.workloads
        if keys.held_by in w.annotations and not w.active and w.key not in op_victims_after and w.key in workloads
    ]

    def shapes_of(wl: Workload) -> list[SliceShape]:
        js = jobsets.get(wl.owner_jobset_uid or "")
        return [rj.shape for rj in js.replicated_jobs if rj.shape is not None and rj.replicas > 0] if js else []

    if not any(q.reclaim_any for q in snapshot.cluster_queues):
        for release in (a for a in plan.actions if isinstance(a, ReleaseVictim) and a.reason is ReleaseReason.CAPACITY):
            released = workloads.get(release.workload.key)
            if released is None:
                continue
            for waiting in still_held:
                if (waiting.priority or 0) > (released.priority or 0) and any(
                    a.matches(b) for a in shapes_of(released) for b in shapes_of(waiting)
                ):
                    problems.append(f"B.7(a) {released.key} released onto capacity higher held {waiting.key} waits for")

    for release in (a for a in plan.actions if isinstance(a, ReleaseVictim)):
        released = workloads.get(release.workload.key)
        if released is None or keys.held_by not in released.annotations:
            problems.append(f"release of {release.workload.key} which is not held")
    for clear in (a for a in plan.actions if isinstance(a, ClearOp)):
        cleared = workloads.get(clear.workload.key)
        if cleared is None or (keys.op not in cleared.annotations and clear.workload.key not in records):
            problems.append(f"clear of {clear.workload.key} which has no operation")
    return problems


def _redundant_victims(
    op_key: str,
    op: OpRecord,
    js: JobSet,
    victim_keys: set[str],
    workloads: Mapping[str, Workload],
    jobset_key: Callable[[Workload], str],
    running: Mapping[str, int],
    slices: Mapping[str, Slice],
    occupants: Mapping[str, set[str]],
    after: ClusterSnapshot,
) -> list[str]:
    """I7 per operation (not per shape): removing any victim a new op chose leaves its deficit uncovered.

    Ops that free a slice the preemptor itself is on (priority inversions) are not checked: all of its other
    occupants must go. The deficit is what `op.slices` hold per shape of the preemptor. Without victim x, the
    slices that could still serve are those the op takes or its victims occupy, usable, reserved by no other op
    after the plan, whose every occupant is the preemptor or another victim of the op. Fresh admissions held by
    the admission fence free quota, not slices, and are left out.
    """
    if any(js.key in occupants.get(p, set()) for p in op.slices):
        return []  # a slice priority inversion: the op frees the slice the preemptor is on, not any slice
    keys_after = {w.key: w for w in after.workloads}
    reserved_elsewhere = {
        pool
        for w in after.workloads
        if w.owner_jobset_uid != js.uid and (other := OpRecord.decode(w.annotations.get(op_key, ""))) is not None
        for pool in other.reserved
    }
    shapes = {rj.shape for rj in js.replicated_jobs if rj.shape is not None}
    need = {shape: sum(1 for p in op.slices if p in slices and slices[p].shape.matches(shape)) for shape in shapes}
    chosen = []
    fenced = set()
    for key in op.victims:
        wl = workloads.get(key)
        if wl is None or key not in keys_after:
            continue
        vk = jobset_key(wl)
        if op.since is not None and _fresh_admission(wl, op.since) and not running.get(vk):
            fenced.add(vk)  # held for the quota it took, after the victims were chosen: it covers nothing
            continue
        chosen.append(vk)
    problems = []
    for victim in chosen:
        others = victim_keys - {victim} - fenced
        rest = others | {js.key}
        pools = set(op.slices) | {p for p, there in occupants.items() if there & others}
        usable = [
            p
            for p in pools
            if (found := slices.get(p)) is not None
            and found.health is SliceHealth.HEALTHY
            and p not in reserved_elsewhere
            and occupants.get(p, set()) <= rest
        ]
        if need and all(sum(1 for p in usable if slices[p].shape.matches(s)) >= n for s, n in need.items()):
            problems.append(f"I7 victim {victim} of {op.op_id} is redundant: the other victims cover the deficit")
    return problems


def exclusive_per_slice(js: JobSet) -> bool:
    """Node pool, or the VM when every TPU shape of the JobSet is single-host (restated for the oracle)."""
    shapes = [rj.shape for rj in js.replicated_jobs if rj.shape is not None]
    single_host = bool(shapes) and all(expected_host_count(s.topology, s.chips_per_host) == 1 for s in shapes)
    return js.exclusive_topology == NODEPOOL_LABEL or (
        js.exclusive_topology == "kubernetes.io/hostname" and single_host
    )


def _waited(snapshot: ClusterSnapshot, plan: Plan, config: HotswapConfig, js: JobSet, wl: Workload) -> bool:
    """The JobSet may starve: it runs in Kueue (admitted, active, not evicted or finished, not suspended or held),
    is Kueue-managed with default exclusive placement and default controller, not in a TAS ClusterQueue, and a pod
    of its current attempt has had no node for starvationGrace (since its creation, and its Workload's admission
    and PodsReady transitions)."""
    keys = AnnotationKeys(config.annotation_domain)
    conditions = {c.type: c for c in wl.conditions}
    admitted = conditions.get("Admitted")
    live = (
        wl.active
        and not js.suspended
        and js.terminal_state is None
        and keys.held_by not in wl.annotations
        and admitted is not None
        and admitted.status is ConditionStatus.TRUE
        and all(conditions[k].status is not ConditionStatus.TRUE for k in ("Evicted", "Finished") if k in conditions)
    )
    movable = (
        exclusive_per_slice(js)
        and not js.node_selector_strategy
        and js.managed_by in (None, "", "jobset.sigs.k8s.io/jobset-controller")
    )
    queue = next((q for q in snapshot.cluster_queues if q.name == wl.cluster_queue), None)
    if not config.starvation_grace or not live or not movable or (queue is not None and queue.uses_tas):
        return False
    unbound = [
        p
        for p in snapshot.pods
        if p.namespace == js.namespace
        and p.jobset_name == js.name
        and p.restart_attempt == js.restarts
        and p.node_name is None
        and not p.terminal
        and p.deletion_timestamp is None
    ]
    if not unbound:
        return False
    created = [p.creation_timestamp for p in unbound if p.creation_timestamp is not None]
    starts = [min(created)] if created else []
    starts += [
        c.last_transition_time
        for c in wl.conditions
        if c.type in ("QuotaReserved", "Admitted", "PodsReady") and c.last_transition_time is not None
    ]
    return bool(starts) and plan.now - max(starts) >= config.starvation_grace


def _starved(
    snapshot: ClusterSnapshot,
    plan: Plan,
    config: HotswapConfig,
    js: JobSet,
    wl: Workload,
    op: OpRecord,
    slices: Mapping[str, Slice],
    occupants: Mapping[str, set[str]],
    after: ClusterSnapshot,
) -> bool:
    """I8 is extended for starvation: in reconciler mode kube-scheduler never preempts TPU pods, so a JobSet Kueue
    admitted can wait for slices lower-priority work occupies until waitForPodsReady evicts it. A new op may be
    opened for it, under its own op id, when starvationGrace is not 0, the JobSet waited (`_waited`), and the free
    healthy slices no other op reserves do not cover what it lacks, together with what other waiting JobSets of at
    least its Kueue priority lack (free slices are left to those first)."""
    keys = AnnotationKeys(config.annotation_domain)
    if op.op_id != make_op_id(f"{js.uid}/starvation", js.restarts) or not _waited(snapshot, plan, config, js, wl):
        return False
    reserved_elsewhere = {
        pool
        for w in after.workloads
        if w.key != wl.key
        and keys.op in w.annotations
        and (other := OpRecord.decode(w.annotations[keys.op])) is not None
        for pool in other.reserved
    }
    free = [
        pool
        for pool, found in slices.items()
        if found.health is SliceHealth.HEALTHY and not occupants.get(pool) and pool not in reserved_elsewhere
    ]
    jobsets = {j.uid: j for j in snapshot.jobsets}
    ahead = [
        (other_js, w)
        for w in snapshot.workloads
        if w.key != wl.key
        and (w.priority or 0) >= (wl.priority or 0)
        and (other_js := jobsets.get(w.owner_jobset_uid or "")) is not None
        and _waited(snapshot, plan, config, other_js, w)
    ]

    def lacking(job: JobSet, shape: SliceShape) -> int:
        need = sum(r.replicas for r in job.replicated_jobs if r.shape is not None and r.shape.matches(shape))
        have = sum(
            1
            for pool, there in occupants.items()
            if job.key in there
            and (found := slices.get(pool)) is not None
            and found.health is not SliceHealth.UNHEALTHY
            and found.shape.matches(shape)
        )
        return max(need - have, 0)

    for shape in {rj.shape for rj in js.replicated_jobs if rj.shape is not None}:
        own = lacking(js, shape)
        others = sum(lacking(j, shape) for j, _ in ahead)
        if own and sum(1 for pool in free if slices[pool].shape.matches(shape)) < own + others:
            return True
    return False


def assert_invariants(snapshot: ClusterSnapshot, plan: Plan, config: HotswapConfig) -> None:
    found = violations(snapshot, plan, config)
    assert not found, "invariant violations:\n  " + "\n  ".join(found)


def idempotence_violations(snapshot: ClusterSnapshot, plan: Plan, config: HotswapConfig) -> list[str]:
    """I11: planning again on the snapshot that results from applying the plan issues no new writes."""
    after = apply_actions(snapshot, (*plan.taints, *plan.actions), plan.now)
    again = make_plan(after, plan.now, config)
    return [f"I11 second pass writes {a!r}" for a in (*again.taints, *again.actions)]


def budget_bound(plan: Plan) -> bool:
    """The pass left work undone because `maxVictimsPerPass` ran out (a Blocked event says so)."""
    return any(e.reason is EventReason.BLOCKED and "maxVictimsPerPass" in e.message for e in plan.events)


def convergence_violations(
    snapshot: ClusterSnapshot, plan: Plan, config: HotswapConfig, max_passes: int = 10
) -> list[str]:
    """I11, allowing for the victim budget: when `maxVictimsPerPass` bound, the next passes hold the rest by
    design, so they must each keep I1..I12 and reach a pass that writes nothing; otherwise plain idempotence."""
    if not budget_bound(plan):
        return idempotence_violations(snapshot, plan, config)
    current, previous = snapshot, plan
    for _ in range(max_passes):
        current = apply_actions(current, previous.actions, plan.now)
        previous = make_plan(current, plan.now, config)
        problems = violations(current, previous, config)
        if problems:
            return [f"pass after the budget bound: {p}" for p in problems]
        if not previous.actions:
            return []
    return [f"I11 passes did not converge under maxVictimsPerPass within {max_passes} passes"]
