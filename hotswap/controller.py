"""The reconcile loop: watches feed caches; one serialised pass at a time plans and actuates, as leader only.

The caches hold typed values converted when each object changes (hotswap/kube/store.py), so a pass assembles its
snapshot without converting anything again, then plans in a worker thread: the event loop stays free for watch
events, Lease renewals and probes during the pass.

A pass is triggered by any cache change (debounced, so a burst of pod events makes one pass), at the plan's
`next_wakeup` (a grace, stabilisation or hold deadline that no watch event marks), and by a periodic resync.
It runs only when every cache is synced and healthy (never plan on a partial view) and only while this
replica holds the Lease. Standby replicas keep their caches warm so a takeover is quick.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from enum import IntEnum
from typing import Any

from kubernetes_asyncio import client

from gke_tpu_priority.hotswap.annotations import AnnotationKeys, OpRecord, parse_time
from gke_tpu_priority.hotswap.config import HotswapConfig
from gke_tpu_priority.hotswap.gctuning import collection_deferred, freeze_long_lived
from gke_tpu_priority.hotswap.kube.actuator import Actuator, LeadershipLost, Outcome, Result
from gke_tpu_priority.hotswap.kube.backoff import Backoff
from gke_tpu_priority.hotswap.kube.client import REQUEST_TIMEOUT
from gke_tpu_priority.hotswap.kube.events import EventRecorder
from gke_tpu_priority.hotswap.kube.informer import Informer
from gke_tpu_priority.hotswap.kube.leader import LeaderElector, LeaseSettings
from gke_tpu_priority.hotswap.kube.ratelimit import TokenBucket
from gke_tpu_priority.hotswap.kube.resources import (
    CLUSTER_QUEUES,
    JOBSETS,
    NODES,
    PODS,
    PRIORITY_CLASSES,
    RESOURCE_FLAVORS,
    TOPOLOGIES,
    WATCHED,
    WORKLOADS,
    ResourceKind,
)
from gke_tpu_priority.hotswap.kube.snapshot import JsonObj, SnapshotBuilder, trimmed
from gke_tpu_priority.hotswap.metrics import Metrics
from gke_tpu_priority.hotswap.model import ClusterSnapshot
from gke_tpu_priority.hotswap.planner import SliceMemo
from gke_tpu_priority.hotswap.planner import plan as make_plan
from gke_tpu_priority.hotswap.planner.actions import ClearOp, EventReason, Plan, ReleaseVictim
from gke_tpu_priority.hotswap.planner.backstop import backstop_plan

log = logging.getLogger(__name__)


class ExitCode(IntEnum):
    OK = 0
    LEADERSHIP_LOST = 3


@dataclass
class RecoveryTracker:
    """Remembers when each operation's preemptor was disrupted, to observe MTTR when the op is Done."""

    failure_times: dict[str, datetime] = field(default_factory=dict)

    def note(self, op_id: str, failure_time: datetime | None) -> None:
        if failure_time is not None and op_id not in self.failure_times:
            self.failure_times[op_id] = failure_time

    def finish(self, op_id: str) -> datetime | None:
        return self.failure_times.pop(op_id, None)


def disruption_time(snapshot: ClusterSnapshot, namespace: str, jobset: str) -> datetime | None:
    """Earliest sign of infrastructure disruption for a JobSet: departed pods or DisruptionTarget pods."""
    times = [p.gone_at for p in snapshot.departed_pods if (p.namespace, p.jobset_name) == (namespace, jobset)]
    times += [
        p.disruption_time
        for p in snapshot.pods
        if (p.namespace, p.jobset_name) == (namespace, jobset) and p.disruption_time is not None
    ]
    return min(times) if times else None


def wakeup_delay(wakeup: datetime, now: datetime, debounce: timedelta) -> float:
    """Seconds until the pass a plan asked for, never less than the debounce (no tight loops)."""
    return max((wakeup - now).total_seconds(), debounce.total_seconds())


class Controller:
    """Owns the caches, the lease, and the reconcile loop of one replica."""

    def __init__(
        self,
        config: HotswapConfig,
        api: client.ApiClient,
        *,
        identity: str,
        metrics: Metrics | None = None,
        dry_run: bool | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        watch_timeout_seconds: int = 300,
        lease_api: client.ApiClient | None = None,
    ) -> None:
        self.config = config
        self.identity = identity
        self.metrics = metrics or Metrics()
        self.dry_run = config.dry_run if dry_run is None else dry_run
        self.keys = AnnotationKeys(config.annotation_domain)
        self._clock = clock
        self._slice_memo = SliceMemo()  # the planner's memo of unchanged slices, kept from pass to pass
        self._trigger = asyncio.Event()
        self._stopping = asyncio.Event()
        self._heartbeat = time.monotonic()
        self._passes = 0
        self._heap_frozen = False
        self._watch_tasks: list[asyncio.Task[None]] = []
        self._retry_backoff = Backoff(base=1.0, cap=config.resync_period.total_seconds())
        self._previous_blocked: set[tuple[str, str]] = set()
        self._wakeup: asyncio.TimerHandle | None = None
        self.next_wakeup: datetime | None = None
        """When the last plan asked for its next pass (None: only events and the resync)."""
        self.recovery = RecoveryTracker()
        self.builder = SnapshotBuilder(
            attribution_window=config.attribution_window, clock=clock, namespaces=frozenset(config.namespaces)
        )
        # One cluster-wide watch per kind, whatever `namespaces` says (filtered here, not by the server): the
        # connection count stays fixed (8 watches) instead of growing with the namespaces, and every pod using
        # TPU chips is seen wherever it runs. Nodes, pods, JobSets and Workloads are cached as typed values
        # (only the fields the reconciler reads), the few small kinds as raw objects without managedFields.
        transforms: dict[str, Callable[[JsonObj], object]] = {
            NODES.name: self.builder.node_value,
            PODS.name: self.builder.pod_value,
            JOBSETS.name: self.builder.jobset_value,
            WORKLOADS.name: self.builder.workload_value,
        }
        self.informers: dict[str, list[Informer]] = {}
        for watched in WATCHED:
            # JobSets outside the configured selector are invisible: never preemptors or victims; their pods
            # still count as (foreign) occupants because the pod watch is not narrowed.
            kind = (
                replace(watched, label_selector=config.label_selector)
                if watched == JOBSETS and config.label_selector
                else watched
            )
            self.informers[kind.name] = [
                Informer(
                    api,
                    kind,
                    on_change=self._on_change,
                    metrics=self.metrics,
                    watch_timeout_seconds=watch_timeout_seconds,
                    transform=transforms.get(kind.name, trimmed),
                )
            ]
        for informer in self.informers[NODES.name]:
            informer.listeners.append(self.builder.on_node_event)
        for informer in self.informers[PODS.name]:
            informer.listeners.append(self.builder.on_pod_event)
        for informer in self.informers[PRIORITY_CLASSES.name]:
            informer.listeners.append(
                lambda _kind, _obj: self.builder.on_priority_classes(self._objects(PRIORITY_CLASSES))
            )
        lease = config.leader_election
        self.elector: LeaderElector | None = None
        # A dry run writes nothing, not even the Lease: it must never keep the real leader out.
        if lease.enabled and not self.dry_run:
            self.elector = LeaderElector(
                # Its own client (connection pool) when given: renewals never queue behind watches or writes.
                lease_api or api,
                LeaseSettings(
                    name=lease.lease_name,
                    namespace=lease.lease_namespace,
                    identity=identity,
                    lease_duration=lease.lease_duration.total_seconds(),
                    renew_deadline=lease.renew_deadline.total_seconds(),
                    retry_period=lease.retry_period.total_seconds(),
                ),
                self.metrics,
                on_lost=self._trigger.set,
            )
        self.actuator = Actuator(
            api,
            self.keys,
            limiter=TokenBucket(config.writes_per_second, config.write_burst),
            recorder=EventRecorder(api, identity, self.metrics, dry_run=self.dry_run, op_id_key=self.keys.op_id),
            metrics=self.metrics,
            is_leader=self.may_write,
            dry_run=self.dry_run,
            fast_fail_enabled=config.fast_fail.enabled,
            write_timeout=self.write_timeout,
        )

    # ---- health --------------------------------------------------------------------------------------

    def caches_ready(self) -> bool:
        return all(i.synced and i.healthy for group in self.informers.values() for i in group)

    def workloads_ready(self) -> bool:
        """The Workload cache alone is synced and healthy: enough to release what is held (backstop pass)."""
        return all(i.synced and i.healthy for i in self.informers[WORKLOADS.name])

    def write_timeout(self) -> float:
        """Deadline of the next write: it must land while this replica still holds the Lease.

        A write sent just before the renew deadline with the ordinary request timeout could land seconds after a
        standby took over; bounded by the time left before `renewDeadline`, it lands (or is abandoned by this
        client) before any standby can acquire, which takes at least `leaseDuration` after the last renewal."""
        if self.elector is None:
            return REQUEST_TIMEOUT
        return min(REQUEST_TIMEOUT, self.elector.time_left())

    def is_leader(self) -> bool:
        return self.elector.is_leader() if self.elector is not None else True

    def may_write(self) -> bool:
        """The write fence: leader, and not shutting down."""
        return self.is_leader() and not self._stopping.is_set()

    def alive(self) -> bool:
        """Liveness: the loop has ticked recently (it ticks at least every resync period)."""
        budget = 3 * self.config.resync_period.total_seconds() + 60
        return time.monotonic() - self._heartbeat < budget

    @property
    def passes(self) -> int:
        return self._passes

    def _on_priority_class(self, _event: str, _value: object) -> None:
        self.builder.on_priority_classes(self._objects(PRIORITY_CLASSES))

    def _on_change(self, _kind: str) -> None:
        self._trigger.set()

    def stop(self) -> None:
        """Request a graceful stop (SIGTERM): no new writes; the in-flight request finishes."""
        self._stopping.set()
        self._trigger.set()

    # ---- loop ----------------------------------------------------------------------------------------

    def start_watches(self) -> None:
        """Start every informer (idempotent); caches fill in the background."""
        if not self._watch_tasks:
            self._watch_tasks = [
                asyncio.create_task(i.run(), name=f"watch-{i.name}") for g in self.informers.values() for i in g
            ]

    async def stop_watches(self) -> None:
        for task in self._watch_tasks:
            task.cancel()
        await asyncio.gather(*self._watch_tasks, return_exceptions=True)
        self._watch_tasks = []

    async def run(self) -> ExitCode:
        """Watch, campaign, and reconcile until :meth:`stop` (OK) or until leadership is lost."""
        self.start_watches()
        elector_task = asyncio.create_task(self.elector.run(), name="lease") if self.elector else None
        was_leader = False
        try:
            while not self._stopping.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._trigger.wait(), timeout=self.config.resync_period.total_seconds())
                self._heartbeat = time.monotonic()
                if self._stopping.is_set():
                    break
                lease_gone = elector_task is not None and elector_task.done()
                if lease_gone or (self.elector is not None and was_leader and not self.is_leader()):
                    log.error("leadership lost; exiting so the Deployment restarts this replica")
                    return ExitCode.LEADERSHIP_LOST
                # Debounce: let a burst of watch events settle into one pass.
                await asyncio.sleep(self.config.debounce.total_seconds())
                self._trigger.clear()
                if not self.is_leader():
                    continue
                was_leader = True
                if not self.caches_ready():
                    if self.workloads_ready():
                        log.info("caches not synced and healthy; releasing only what maxHold or users release")
                        await self.backstop_once()
                    else:
                        log.info("caches not synced and healthy yet; skipping pass")
                    continue
                if not self._heap_frozen:
                    # The synced caches are the bulk of the heap: no later full collection should walk them.
                    freeze_long_lived()
                    self._heap_frozen = True
                try:
                    await self.reconcile_once()
                except LeadershipLost:
                    if self._stopping.is_set():
                        break
                    log.error("leadership lost during a pass; stopped writing")
                    return ExitCode.LEADERSHIP_LOST
            return ExitCode.OK
        finally:
            self._cancel_wakeup()
            if elector_task is not None:
                elector_task.cancel()
                await asyncio.gather(elector_task, return_exceptions=True)
            if self.elector is not None:
                await self.elector.release()
            await self.stop_watches()

    def _objects(self, kind: ResourceKind) -> list[Any]:
        return [value for informer in self.informers[kind.name] for value in informer.cache.values()]

    def snapshot(self) -> ClusterSnapshot:
        """Assembled from the typed caches: only objects changed since they were cached were converted."""
        return self.builder.assemble(
            nodes=self._objects(NODES),
            pods=self._objects(PODS),
            jobsets=self._objects(JOBSETS),
            workloads=self._objects(WORKLOADS),
            cluster_queues=self._objects(CLUSTER_QUEUES),
            resource_flavors=self._objects(RESOURCE_FLAVORS),
            topologies=self._objects(TOPOLOGIES),
        )

    async def backstop_once(self) -> list[Outcome]:
        """A release-only pass from the Workload cache (maxHold, external reactivation): see planner/backstop."""
        plan = backstop_plan(self._objects(WORKLOADS), self._clock(), self.config)
        self._schedule_wakeup(plan)
        if not plan.actions:
            return []
        try:
            outcomes = await self.actuator.execute(plan)
        except LeadershipLost:
            return []
        for outcome in outcomes:
            if outcome.result is Result.APPLIED and isinstance(outcome.action, ReleaseVictim):
                log.warning(
                    "released a held workload while other caches were unavailable",
                    extra={"op_id": outcome.action.op_id},
                )
        return outcomes

    async def reconcile_once(self) -> list[Outcome]:
        """One pass: snapshot, plan, actuate, account."""
        started = time.monotonic()
        result = "ok"
        try:
            with collection_deferred():  # no full GC inside snapshot + plan (hotswap/gctuning.py)
                # Assembled here, on the loop that owns the caches (a few ms of tuple building); planned in a
                # worker thread on that immutable snapshot, so the loop keeps draining watches, renewing the Lease
                # and answering probes while a large fleet is planned.
                snapshot = self.snapshot()
                now = self._clock()
                plan = await asyncio.to_thread(make_plan, snapshot, now, self.config, self._slice_memo)
            # What the snapshot leaves out is a fact about the cluster, exported in dry-run too.
            self.metrics.excluded.clear()
            for reason, count, _examples in plan.diagnostics.exclusions:
                self.metrics.excluded.labels(reason=reason).set(count)
            self._schedule_wakeup(plan)
            plan = self._dedupe_blocked(plan)
            self._note_failures(plan, snapshot)
            outcomes = await self.actuator.execute(plan)
            self._account(plan, outcomes, snapshot, now)
            if any(not o.ok and o.result is not Result.SKIPPED for o in outcomes):
                result = "partial"
                # Re-plan from what actually happened before the resync, but back off so an API outage
                # or a 403 does not turn into a tight retry loop.
                delay = self._retry_backoff.next_delay()
                asyncio.get_running_loop().call_later(delay, self._trigger.set)
            else:
                self._retry_backoff.reset()
            log.info(
                "reconcile pass",
                extra={
                    "pass": self._passes,
                    "seconds": round(time.monotonic() - started, 4),
                    "writes": plan.writes,
                    "events": len(plan.events),
                    "dry_run": self.dry_run,
                    "results": sorted(o.result.value for o in outcomes),
                    "diagnostics": {k: v for k, v in vars_of(plan.diagnostics).items() if v not in (0, (), "")},
                },
            )
            return outcomes
        except LeadershipLost:
            result = "not_leader"
            raise
        except Exception:
            result = "error"
            log.exception("reconcile pass failed")
            return []
        finally:
            self._passes += 1
            self.metrics.reconciles.labels(result=result).inc()
            self.metrics.reconcile_duration.observe(time.monotonic() - started)

    def _schedule_wakeup(self, plan: Plan) -> None:
        """Trigger a pass at `plan.next_wakeup`; each pass replaces the previous request."""
        self._cancel_wakeup()
        self.next_wakeup = plan.next_wakeup
        if plan.next_wakeup is not None:
            delay = wakeup_delay(plan.next_wakeup, plan.now, self.config.debounce)
            self._wakeup = asyncio.get_running_loop().call_later(delay, self._trigger.set)

    def _cancel_wakeup(self) -> None:
        if self._wakeup is not None:
            self._wakeup.cancel()
            self._wakeup = None

    def _dedupe_blocked(self, plan: Plan) -> Plan:
        """Emit HotswapBlocked when a preemptor becomes blocked, not on every pass while it stays blocked."""
        blocked = {(d.involved.uid, d.message) for d in plan.events if d.reason is EventReason.BLOCKED}
        fresh = blocked - self._previous_blocked
        for _ in fresh:
            self.metrics.ops.labels(result="blocked").inc()
        self._previous_blocked = blocked
        events = tuple(
            d for d in plan.events if d.reason is not EventReason.BLOCKED or (d.involved.uid, d.message) in fresh
        )
        return replace(plan, events=events)

    def _note_failures(self, plan: Plan, snapshot: ClusterSnapshot) -> None:
        for decision in plan.events:
            if decision.reason is EventReason.PLANNED and decision.op_id:
                involved = decision.involved
                failure = disruption_time(snapshot, involved.namespace, involved.name)
                if failure is not None and decision.op_id not in self.recovery.failure_times:
                    lag = (plan.now - failure).total_seconds()
                    self.metrics.detection_to_plan.observe(max(0.0, lag))
                self.recovery.note(decision.op_id, failure)

    def _account(self, plan: Plan, outcomes: list[Outcome], snapshot: ClusterSnapshot, now: datetime) -> None:
        if self.dry_run:
            return
        workloads = {w.uid: w for w in snapshot.workloads}
        failed_ops = {o.action.op_id for o in outcomes if not o.ok and o.action.op_id}
        for outcome in outcomes:
            action = outcome.action
            if outcome.result is not Result.APPLIED:
                continue
            if isinstance(action, ReleaseVictim):
                held = workloads.get(action.workload.uid)
                since = parse_time(held.annotations.get(self.keys.held_since, "")) if held else None
                if since is not None:
                    self.metrics.hold_duration.observe(max(0.0, (now - since).total_seconds()))
            if isinstance(action, ClearOp):
                preemptor = workloads.get(action.workload.uid)
                record = OpRecord.decode(preemptor.annotations.get(self.keys.op, "")) if preemptor else None
                done = any(d.reason is EventReason.DONE and d.op_id == action.op_id for d in plan.events)
                if done and record is not None:
                    self.metrics.slices_freed.inc(len(record.slices))
                    if record.since is not None:
                        self.metrics.plan_to_done.observe(max(0.0, (now - record.since).total_seconds()))
        for decision in plan.events:
            if decision.op_id in failed_ops:
                continue
            if decision.reason is EventReason.PLANNED:
                self.metrics.ops.labels(result="planned").inc()
            elif decision.reason is EventReason.INVERSION_RESOLVED:
                # An op opened without an infrastructure failure; it still ends in Done or Aborted.
                self.metrics.ops.labels(result="planned").inc()
                self.metrics.ops.labels(result="inversion").inc()
            elif decision.reason is EventReason.DONE:
                self.metrics.ops.labels(result="done").inc()
                failure = self.recovery.finish(decision.op_id)
                if failure is not None:
                    self.metrics.failure_to_preemptor_ready.observe(max(0.0, (now - failure).total_seconds()))
            elif decision.reason is EventReason.ABORTED:
                self.metrics.ops.labels(result="aborted").inc()
                self.recovery.finish(decision.op_id)
        self.metrics.held_workloads.set(plan.diagnostics.held_workloads)
        self.metrics.starved_preemptors.set(plan.diagnostics.starved_preemptors)
        self.metrics.quarantined_nodes.set(plan.diagnostics.nodes_quarantined)


def vars_of(obj: object) -> dict[str, object]:
    """Field values of a slotted dataclass (``vars`` does not work with ``slots=True``)."""
    return {name: getattr(obj, name) for name in getattr(obj, "__dataclass_fields__", {})}
