"""The fleet model: failures, JobSet restarts, Kueue admission, kube-scheduler binding, metrics.

The random event streams (slice failures, repair times, failure kinds, storms, job durations) are drawn
from per-entity generators keyed by the seed, so they are identical under every policy: the k-th failure of
slice i and the k-th job of a class look the same whatever the policy did before.
"""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any

from sim import kubescheduler, kueue
from sim.cohort import Cohort
from sim.engine import EventLoop
from sim.metrics import Recorder, summarise
from sim.params import (
    HOUR,
    Capacity,
    FailureClock,
    FailureKind,
    JobClass,
    RepairBand,
    Scenario,
    StormArrivals,
)
from sim.policies.base import Policy
from sim.state import Departure, Job, JobState, Pod, PodPhase, Slice, checkpointed_s


@dataclass(frozen=True)
class RunResult:
    scenario: str
    policy: str
    seed: int
    summary: dict[str, Any]
    events: int


def draw_repair_s(rng: random.Random, scenario: Scenario) -> float:
    return draw_band_s(rng, scenario.failures.repair_mixture)


def draw_band_s(rng: random.Random, bands: tuple[RepairBand, ...]) -> float:
    band = rng.choices(bands, weights=[b.weight for b in bands])[0]
    return rng.uniform(band.low_s, band.high_s)


class Simulator:
    """One scenario under one policy. Call :meth:`run` once."""

    def __init__(self, scenario: Scenario, policy: Policy, loop: EventLoop | None = None) -> None:
        self.scenario = scenario
        self.timing = scenario.timing
        self.policy = policy
        self.loop = loop if loop is not None else EventLoop()  # a fleet's workers share one clock (fleet.py)
        fleet = scenario.fleet
        self.slices = [
            Slice(id=i, pool=f"tpu-pool-{i:04d}", hosts=[None] * fleet.hosts_per_slice) for i in range(fleet.slices)
        ]
        for s in self.slices:
            self._init_capacity(s)
        self.chips_per_slice = fleet.hosts_per_slice * fleet.chips_per_host
        self.quota_chips = fleet.slices * self.chips_per_slice
        self.cohort = Cohort.of(scenario, self.chips_per_slice)  # None: one ClusterQueue of quota_chips
        self.jobs: list[Job] = []
        self.live: dict[Job, None] = {}  # not finished / failed; insertion-ordered for determinism
        self.rec = Recorder(high_threshold=scenario.high_threshold)
        self._uid = 0
        self._class_counter: dict[str, int] = {}
        self._class_rng = {c.name: random.Random(f"{scenario.seed}:jobs:{c.name}") for c in scenario.classes}
        self._slice_rng = [random.Random(f"{scenario.seed}:slice:{s.id}") for s in self.slices]
        self._storm_rng = random.Random(f"{scenario.seed}:storm")
        # Spot preemptions on their own per-slice streams: the other streams stay as they were without a ladder.
        self._spot_rng = {
            s.id: random.Random(f"{scenario.seed}:spot:{s.id}") for s in self.slices if s.capacity is Capacity.SPOT
        }
        self._pass_pending = False
        # JobSet failurePolicy.restartStrategy: the platform's BlockingRecreate (every policy) unless the policy
        # models a JobSet left at JobSet's own default, Recreate (`scheduler-recreate`).
        self._recreate_each_child = getattr(policy, "restart_strategy", "BlockingRecreate") == "Recreate"
        self._child_pending: dict[Job, set[int]] = {}
        self._interrupted: set[Job] = set()
        self._victim_attempt: dict[Job, int] = {}
        self._victim_admitted_since: dict[Job, float] = {}
        self._ended = False
        self.departures: deque[Departure] = deque()
        self.track_departures = False  # the reconciler policy turns this on
        self.trace: list[tuple[float, str]] | None = None  # set to [] to record a readable event log
        # Fleet hooks (sim/fleet.py): a MultiKueue manager watches its remote copies. on_terminal replaces
        # the closed-population resubmission (the manager submits the replacement).
        self.on_admit: Callable[[Job], None] | None = None
        self.on_evict: Callable[[Job], None] | None = None
        self.on_terminal: Callable[[Job], None] | None = None

    # ------------------------------------------------------------------ setup and run
    def run(self, on_progress: Callable[[float], None] | None = None) -> RunResult:
        self.start()
        self.loop.run(self.scenario.horizon_h * HOUR, on_progress)
        return self.finish()

    def start(self) -> None:
        """Attach the policy, submit the populations, start the failure clocks (run() = start, loop, finish; a fleet
        starts every worker on one shared loop, then finishes each)."""
        self.policy.attach(self)
        for cls in self.scenario.classes:
            for _ in range(cls.population):
                self._submit(cls)
        rate = self.scenario.failures.rate_per_slice_s
        for s in self.slices:
            rng = self._slice_rng[s.id]
            if self._slice_clocks_only:
                self.loop.at(rng.expovariate(rate), partial(self._poisson_failure, s))
            else:
                at, repair, unreachable = self._next_tick(rng, 0.0)
                self.loop.at(at, partial(self._empty_slice_clock, s, repair, unreachable))
        for sid, rng in self._spot_rng.items():
            self.loop.at(rng.expovariate(self.scenario.failures.spot_rate_per_slice_s), partial(self._spot_clock, sid))
        if self.scenario.failures.storm_slices and self.scenario.failures.storm_every_h > 0:
            self.loop.at(self._storm_gap_s(), self._storm)
        self._kick()

    def finish(self) -> RunResult:
        horizon = self.scenario.horizon_h * HOUR
        self._finalise(horizon)
        return RunResult(
            scenario=self.scenario.name,
            policy=self.policy.name,
            seed=self.scenario.seed,
            summary=self._summary(horizon),
            events=self.loop.processed,
        )

    @property
    def now(self) -> float:
        return self.loop.now

    def _submit(self, cls: JobClass) -> Job:
        k = self._class_counter.get(cls.name, 0)
        self._class_counter[cls.name] = k + 1
        work = self._class_rng[cls.name].expovariate(1.0 / (cls.mean_duration_h * HOUR))
        job = Job(id=len(self.jobs), name=f"{cls.name}-{k:05d}", cls=cls, work_s=work, created=self.now)
        self.jobs.append(job)
        self.live[job] = None
        self._start_replica_clocks(job, self.scenario.seed)
        return job

    def _start_replica_clocks(self, job: Job, seed: int) -> None:
        if not self._slice_clocks_only:
            for child in range(job.slices):
                rng = random.Random(f"{seed}:replica:{job.name}:{child}")
                # On the absolute timeline: a JobSet submitted later under one policy than another still has
                # its ticks at the same moments, so only ticks before its submission are skipped.
                tick = self._next_tick(rng, 0.0)
                while tick[0] < self.now:
                    tick = self._next_tick(rng, tick[0])
                self.loop.at(tick[0], partial(self._replica_clock, job, child, rng, tick[1], tick[2]))

    def note(self, what: str) -> None:
        """Append to the event log when tracing (per-incident timelines in tests and investigations)."""
        if self.trace is not None:
            self.trace.append((self.now, what))

    # ------------------------------------------------------------------ coalesced control loops
    def kick(self) -> None:
        """Ask for a control pass (Kueue, kube-scheduler, policy) at the current instant."""
        self._kick()

    def _kick(self) -> None:
        """Run Kueue, kube-scheduler and the policy once at the current instant."""
        if not self._pass_pending:
            self._pass_pending = True
            self.loop.after(0.0, self._control_pass)

    def _control_pass(self) -> None:
        self._pass_pending = False
        plan = self.policy.plan_admission(self.now)  # a topology-aware policy's Kueue; None: quota only
        if plan is None:
            plan = self._plan_quota()
        for victim in plan.preempt:
            self.rec.kueue_preemptions += 1
            if victim in plan.topology_victims:
                self.rec.count("kueue_topology_preemptions")
                self._mark_victim(victim)  # evicted for the preemptor's topology, not quota: the policy's victim
            self._evict(victim, JobState.QUEUED, victim=True)
        for job in plan.admit:
            job.flavor = plan.flavor.get(job)
            self._admit(job)
            if job in plan.placement:
                job.topology = dict(enumerate(plan.placement[job]))
        pending = [p for j in self.live if j.state is JobState.ADMITTED for p in j.pods if p.phase is PodPhase.PENDING]
        if pending:
            for d in kubescheduler.schedule(pending, self.slices, self.policy.scheduler_preemption):
                if isinstance(d, kubescheduler.Bind):
                    self._bind(d.pod, d.slice, d.host)
                else:
                    self._preempt(d)
        self.policy.on_change()

    def detection_s(self, kind: FailureKind) -> float:
        """Fault -> the slice is Unhealthy for a hotswap controller. A repair shorter than this is a transient
        nobody can act on: its MTTR is reported apart, not hidden.

        A crash fails the pods with the node, which confirms the bad condition (`confirmedUnhealthyGrace`); an
        unreachable kubelet leaves them looking Running, so only `unhealthyGrace` after NotReady counts.
        """
        t = self.timing
        if kind is FailureKind.CRASH:
            return max(t.fault_to_node_unhealthy_s, t.fault_to_pod_failed_s) + t.confirmed_grace_s
        if kind is FailureKind.SPOT_PREEMPTION:
            # The notice turns the nodes NotReady ("node is shutting down") and gives the pods a DisruptionTarget
            # at once: confirmed, or else the plain grace on NotReady.
            return min(t.confirmed_grace_s, t.unhealthy_grace_s)
        return t.node_monitor_grace_s + t.unhealthy_grace_s

    def lasting_after_s(self, kind: FailureKind) -> float:
        """A repair longer than this is a lasting one: it outlasts detection and the JobSet's own restart (its
        pods fail, the healthy slice's pods drain, new pods are created), so the slice is not back when the new
        attempt needs it. Shorter ones are transients: restarting in place is as fast as anything can be."""
        t = self.timing
        if kind is FailureKind.CRASH:
            failed = t.fault_to_pod_failed_s
        elif kind is FailureKind.SPOT_PREEMPTION:
            # The kubelet's shutdown kills the pods at spot_pod_grace_s: that was their termination grace.
            return max(self.detection_s(kind), t.spot_pod_grace_s + t.jobset_recreate_s)
        else:
            failed = t.node_monitor_grace_s + (t.fast_fail_after_s if t.fast_fail else t.taint_eviction_s)
        restart = failed + t.pod_termination_grace_s + t.jobset_recreate_s
        return max(self.detection_s(kind), restart)

    # ------------------------------------------------------------------ failures
    def _poisson_failure(self, s: Slice) -> None:
        rng = self._slice_rng[s.id]
        if s.healthy:
            self._fail_slice(s, rng)
            nxt = (s.repair_at or self.now) + rng.expovariate(self.scenario.failures.rate_per_slice_s)
        else:  # already down (storm): the memoryless clock restarts after the repair
            nxt = (s.repair_at or self.now) + rng.expovariate(self.scenario.failures.rate_per_slice_s)
        self.loop.at(max(nxt, self.now), lambda: self._poisson_failure(s))

    @property
    def _slice_clocks_only(self) -> bool:
        return self.scenario.failures.clock is FailureClock.SLICE

    def _owner(self, s: Slice) -> tuple[int, int] | None:
        """The JobSet replica whose clock times this slice's failures: the one on its first occupied host."""
        for pod in s.hosts:
            if pod is not None:
                return pod.job_key
        return None

    def _empty_slice_clock(self, s: Slice, repair: float, unreachable: float) -> None:
        """FailureClock.OCCUPANT, an empty slice's share: a tick fails it only while healthy and unoccupied (the
        occupant's clock covers it otherwise)."""
        if s.healthy and self._owner(s) is None:
            self._fail_drawn(s, repair, unreachable)
        at, repair, unreachable = self._next_tick(self._slice_rng[s.id], self.now)
        self.loop.at(at, partial(self._empty_slice_clock, s, repair, unreachable))

    def _next_tick(self, rng: random.Random, after: float) -> tuple[float, float, float]:
        """(time, repair, unreachable draw) of a clock's next tick: the same three draws per tick, always."""
        at = after + rng.expovariate(self.scenario.failures.rate_per_slice_s)
        return at, draw_repair_s(rng, self.scenario), rng.random()

    def _replica_clock(self, job: Job, child: int, rng: random.Random, repair: float, unreachable: float) -> None:
        """FailureClock.OCCUPANT, a JobSet replica's share: a tick fails the healthy slice this replica occupies
        (and owns), if any. The clock runs while the JobSet lives."""
        if job not in self.live:
            return
        key = (job.id, child)
        hosts = {p.slice for p in job.all_pods() if p.child == child and p.slice is not None}
        for s in sorted(hosts, key=lambda x: x.id):
            if s.healthy and self._owner(s) == key:
                self._fail_drawn(s, repair, unreachable)
        at, repair, unreachable = self._next_tick(rng, self.now)
        self.loop.at(at, partial(self._replica_clock, job, child, rng, repair, unreachable))

    def _fail_drawn(self, s: Slice, repair: float, unreachable: float) -> None:
        kind = (
            FailureKind.UNREACHABLE if unreachable < self.scenario.failures.unreachable_fraction else FailureKind.CRASH
        )
        self._fail_now(s, repair, kind)

    def _storm(self) -> None:
        f = self.scenario.failures
        rng = self._storm_rng
        chosen = rng.sample(range(len(self.slices)), min(f.storm_slices, len(self.slices)))
        for sid in chosen:
            delay = rng.uniform(0.0, f.storm_window_s)
            repair = draw_repair_s(rng, self.scenario)
            kind = FailureKind.UNREACHABLE if rng.random() < f.unreachable_fraction else FailureKind.CRASH
            s = self.slices[sid]
            self.loop.after(delay, partial(self._fail_now, s, repair, kind))
        self.loop.after(self._storm_gap_s(), self._storm)

    def _storm_gap_s(self) -> float:
        """Seconds to the next storm, from the storms' own stream (the same storms under every policy)."""
        f = self.scenario.failures
        mean = f.storm_every_h * HOUR
        return self._storm_rng.expovariate(1.0 / mean) if f.storm_arrivals is StormArrivals.POISSON else mean

    def _fail_slice(self, s: Slice, rng: random.Random) -> None:
        repair = draw_repair_s(rng, self.scenario)
        unreachable = rng.random() < self.scenario.failures.unreachable_fraction
        self._fail_now(s, repair, FailureKind.UNREACHABLE if unreachable else FailureKind.CRASH)

    def _fail_now(self, s: Slice, repair_s: float, kind: FailureKind) -> None:
        if not s.healthy or not s.present:  # queued capacity nobody requested has no VMs to fail
            return
        t = self.timing
        self._close_idle(s)
        self._close_occupied(s)
        s.healthy = False
        s.schedulable = False
        s.fault_kind = kind
        s.failed_at = self.now
        s.repair_at = self.now + repair_s
        epoch = s.failed_at
        self.note(f"fault {s.pool} {kind.value} repair in {repair_s:.0f}s")
        # Only the current attempt is hit: an old attempt's pods still draining here (a requeued JobSet's new
        # attempt may already exist elsewhere) die with the node, but must not stop the new attempt from starting.
        for job in {p.job for p in s.hosts if p is not None and p in p.job.pods}:
            self._interrupt(job)
            if job.incident_start is None and job.state is JobState.ADMITTED:
                job.incident_start = self.now
                job.incident_lasting = repair_s > self.lasting_after_s(kind)
                self.rec.incidents_all += 1
                if self.rec.is_high(job.priority):
                    self.rec.incidents_high += 1
        if kind is FailureKind.CRASH:
            self.loop.after(min(t.fault_to_node_unhealthy_s, repair_s), lambda: self._node_down(s, epoch))
            self.loop.after(t.fault_to_pod_failed_s, lambda: self._pods_fail(s, epoch, only_if_down=False))
        elif kind is FailureKind.SPOT_PREEMPTION:
            self._spot_notice(s)
            self.loop.after(t.spot_pod_grace_s, lambda: self._pods_fail(s, epoch, only_if_down=False))
            self.loop.after(t.spot_notice_s, lambda: self._spot_vms_gone(s, epoch))
        else:
            if repair_s > t.node_monitor_grace_s:
                self.loop.after(t.node_monitor_grace_s, lambda: self._node_down(s, epoch, unreachable=True))
            if t.fast_fail and repair_s > t.node_monitor_grace_s + t.fast_fail_after_s:
                self.loop.after(t.node_monitor_grace_s + t.fast_fail_after_s, lambda: self._pods_fail(s, epoch, True))
            elif repair_s > t.node_monitor_grace_s + t.taint_eviction_s:
                self.loop.after(t.node_monitor_grace_s + t.taint_eviction_s, lambda: self._taint_evict(s, epoch))
        self.loop.after(repair_s, lambda: self._repair(s, epoch))
        self._kick()

    def _node_down(self, s: Slice, epoch: float, unreachable: bool = False) -> None:
        if s.failed_at != epoch or s.healthy:
            return
        s.node_ready = False
        s.node_transition = self.now
        s.unreachable = unreachable
        self.note(f"nodes of {s.pool} NotReady")
        self._kick()

    def _pods_fail(self, s: Slice, epoch: float, only_if_down: bool) -> None:
        """Containers on the faulted slice are dead: their pods become terminal and leave the node."""
        if s.failed_at != epoch or (only_if_down and s.healthy):
            return
        for pod in list(s.hosts):
            if pod is not None and (pod.bound_at or 0.0) <= epoch:
                pod.failed = True
                self._pod_gone(pod)
        self._kick()

    def _taint_evict(self, s: Slice, epoch: float) -> None:
        """No fast-fail: pods get deleted by the taint manager but stay as zombies until the repair."""
        if s.failed_at != epoch or s.healthy:
            return
        for pod in list(s.hosts):
            if pod is not None and pod.phase is not PodPhase.TERMINATING:
                pod.disruption, pod.disruption_at = "DeletionByTaintManager", self.now
                self._mark_terminating(pod)
                if pod in pod.job.pods and pod.job.state is JobState.ADMITTED:
                    self._child_failed(pod.job)
        self._kick()

    def _repair(self, s: Slice, epoch: float) -> None:
        if s.failed_at != epoch:
            return
        if s.nodes_deleted:  # spot capacity came back: the MIG recreated the VMs, they register as new Nodes
            s.nodes_deleted = False
            s.created_at = self.now
        # Whatever was on the node died with it (crash before detection, zombies of an unreachable node).
        for pod in list(s.hosts):
            if pod is not None:
                pod.failed = True
                self._pod_gone(pod)
        self.rec.down_slice_s += self.now - epoch
        s.healthy = True
        s.schedulable = True
        s.node_ready = True
        s.unreachable = False
        s.node_transition = self.now
        s.fault_kind = None
        s.repair_at = None
        s.vacated_by_victim = False
        s.idle_since = self.now
        self.note(f"repaired {s.pool}")
        if self._returning(s) and s.empty:
            self._vanish(s)  # its request was given up while it was down: the nodes go back to GKE
        self._kick()

    # ------------------------------------------------------------------ JobSet mechanics
    def _interrupt(self, job: Job, *, victim: bool = False, completed: bool = False) -> None:
        """Training stops now; progress since the last checkpoint is lost (none of it when the work completed).
        The loss is a victim's when `victim` (Kueue preemption) or the policy marked the job as one."""
        self._interrupted.add(job)
        if job.completion is not None:
            job.completion.cancel()
            job.completion = None
        if job.run_start is None:
            return
        if job.state is JobState.ADMITTED:
            self._arm_pods_ready(job, recovery=True)
        ran = self.now - job.run_start
        ckpt = self.timing.checkpoint_interval_s
        kept = ran if completed or ckpt <= 0 else checkpointed_s(ran, ckpt)
        job.progress_s += kept
        self.rec.productive_slice_s += ran * job.slices
        self._account_running(job, kept, ran - kept, victim=victim or job.victim_since is not None)
        if self.rec.is_high(job.priority):
            self.rec.high_run_s += ran
            self.rec.high_lost_s += ran - kept
        job.run_start = None

    def _account_running(self, job: Job, kept_s: float, lost_s: float, *, victim: bool) -> None:
        rec = self.rec
        rec.useful_slice_s[job.cls.name] = rec.useful_slice_s.get(job.cls.name, 0.0) + kept_s * job.slices
        if rec.is_high(job.priority):
            rec.high_useful_slice_s += kept_s * job.slices
        if not victim:
            rec.wasted_own_slice_s += lost_s * job.slices
            return
        rec.wasted_victim_slice_s += lost_s * job.slices
        if job.victim_since is not None:
            rec.wasted_policy_victim_slice_s += lost_s * job.slices

    def _child_failed(self, job: Job) -> None:
        """A child Job failed (backoffLimit 0): apply the JobSet failurePolicy."""
        if job.restarting or job.state is not JobState.ADMITTED:
            return
        self._interrupt(job)
        counts = not job.cls.restarts_ignore_disruption
        if counts and job.restarts_counted >= job.cls.max_restarts:
            self.rec.permanent_failures += 1
            if job in self._victim_attempt:
                self.rec.permanent_victim_failures += 1
            self._terminal(job, JobState.FAILED)
            return
        job.attempt += 1
        job.restarts_counted += int(counts)
        self.note(f"{job.name} restarts (attempt {job.attempt})")
        job.restarting = True
        for pod in list(job.pods):
            self._delete_pod(pod)
        job.pods = []
        self._maybe_recreate(job)

    def _maybe_recreate(self, job: Job) -> None:
        """BlockingRecreate: the new attempt is created once every old pod is gone. Recreate: each child Job is
        recreated once its own old pods are gone (jobset v0.12.0 foreground-deletes each child Job and creates
        the new one when the old is gone), so a crashed child's leader does not wait for its siblings' grace."""
        if self._recreate_each_child:
            self._maybe_recreate_children(job)
            return
        if not job.restarting or job.terminating or job.recreate is not None:
            return
        job.recreate = self.loop.after(self.timing.jobset_recreate_s, lambda: self._recreate(job))

    def _maybe_recreate_children(self, job: Job) -> None:
        if not job.restarting or job.state is not JobState.ADMITTED:
            return
        have = {p.child for p in job.pods}
        draining = {p.child for p in job.terminating}
        pending = self._child_pending.setdefault(job, set())
        for child in range(job.slices):
            if child in have or child in draining or child in pending:
                continue
            pending.add(child)
            self.loop.after(self.timing.jobset_recreate_s, partial(self._recreate_child, job, child, job.attempt))

    def _recreate_child(self, job: Job, child: int, attempt: int) -> None:
        self._child_pending.get(job, set()).discard(child)
        if job.state is not JobState.ADMITTED or not job.restarting or job.attempt != attempt:
            return
        if any(p.child == child for p in job.pods):
            return
        job.pods.append(self._new_pod(job, child, 0))
        self.note(f"{job.name} leader {child} created (attempt {job.attempt}, Recreate)")
        if len({p.child for p in job.pods}) == job.slices:
            job.restarting = False
            self._interrupted.discard(job)
        self._kick()

    def _recreate(self, job: Job) -> None:
        job.recreate = None
        if job.state is not JobState.ADMITTED or not job.restarting:
            return
        job.restarting = False
        self._create_leaders(job)

    def _create_leaders(self, job: Job) -> None:
        self._interrupted.discard(job)
        job.pods = [self._new_pod(job, child, 0) for child in range(job.slices)]
        self.note(f"{job.name} leaders created (attempt {job.attempt})")
        self._kick()

    def _new_pod(self, job: Job, child: int, index: int) -> Pod:
        self._uid += 1
        return Pod(job=job, attempt=job.attempt, child=child, index=index, created=self.now, uid=self._uid)

    def _create_followers(self, leader: Pod) -> None:
        job = leader.job
        if leader not in job.pods or leader.phase not in (PodPhase.STARTING, PodPhase.RUNNING):
            return
        hosts = self.scenario.fleet.hosts_per_slice
        job.pods.extend(self._new_pod(job, leader.child, i) for i in range(1, hosts))
        self._kick()

    def _bind(self, pod: Pod, s: Slice, host: int) -> None:
        self._close_idle(s)
        if s.occupied_since is None:
            s.occupied_since = self.now
        s.hosts[host] = pod
        pod.slice, pod.host = s, host
        pod.phase = PodPhase.STARTING
        pod.bound_at = self.now
        pod.nominated = None
        self.note(f"bind {pod.name} -> {s.pool}/{host}")
        self.loop.after(self.timing.pod_start_s, lambda: self._pod_running(pod))
        if pod.index == 0 and self.scenario.fleet.hosts_per_slice > 1:
            self.loop.after(self.timing.follower_create_s, lambda: self._create_followers(pod))

    def _pod_running(self, pod: Pod) -> None:
        if pod.phase is not PodPhase.STARTING:
            return
        pod.phase = PodPhase.RUNNING
        pod.running_at = self.now
        job = pod.job
        want = job.slices * self.scenario.fleet.hosts_per_slice
        if (
            job.state is JobState.ADMITTED
            and job not in self._interrupted
            and len(job.pods) == want
            and all(p.phase is PodPhase.RUNNING for p in job.pods)
        ):
            self._start_running(job)

    def _start_running(self, job: Job) -> None:
        job.run_start = self.now
        self.note(f"{job.name} running (attempt {job.attempt})")
        job.requeue_count = 0
        job.completion = self.loop.after(max(job.work_s - job.progress_s, 0.0), lambda: self._finish(job))
        if job.incident_start is not None:
            mttr = self.now - job.incident_start
            self.rec.mttr_all_s.append(mttr)
            if self.rec.is_high(job.priority):
                self.rec.mttr_high_s.append(mttr)
                self.rec.high_incidents.append((job.incident_start, self.now, job.name))
                if job.incident_lasting:
                    self.rec.mttr_high_lasting_s.append(mttr)
            job.incident_start = None
        if job.victim_since is not None:
            self.rec.victim_downtime_s.append(self.now - job.victim_since)
            job.victim_since = None
        self._close_stale(job)

    def _finish(self, job: Job) -> None:
        job.completion = None
        self._interrupt(job, completed=True)
        job.progress_s = job.work_s
        job.state = JobState.FINISHED
        self.rec.finished[job.cls.name] = self.rec.finished.get(job.cls.name, 0) + 1
        for pod in list(job.pods):  # Succeeded pods release their hosts at once
            self._pod_gone(pod)
        self._terminal(job, JobState.FINISHED)

    def _terminal(self, job: Job, state: JobState) -> None:
        if job.incident_start is not None:
            self.rec.incidents_aborted += 1
            job.incident_start = None
        job.state = state
        job.finished_at = self.now
        job.quota_reserved = False
        job.topology = None
        job.restarting = False
        self._close_stale(job)
        for pod in list(job.pods):
            self._delete_pod(pod)
        job.pods = []
        self._release_capacity(job)
        self.live.pop(job, None)
        if self.on_terminal is not None:
            self.on_terminal(job)
        else:
            self._submit(job.cls)
        self._kick()

    # ------------------------------------------------------------------ pods
    def _delete_pod(self, pod: Pod) -> None:
        """Delete with the grace period; unbound pods vanish, dead-node pods go immediately."""
        job = pod.job
        if pod in job.pods:
            job.pods.remove(pod)
        if pod.slice is None:
            pod.phase = PodPhase.TERMINATING
            return
        if pod.phase is PodPhase.TERMINATING:
            job.terminating.add(pod)
            return
        job.terminating.add(pod)
        self._mark_terminating(pod)
        s = pod.slice
        if not s.healthy and s.fault_kind is FailureKind.CRASH:
            self._pod_gone(pod)
        elif s.healthy:
            self.loop.after(self.timing.pod_termination_grace_s, lambda: self._pod_gone(pod))
        # unreachable node: zombie until fast-fail or repair removes it

    def _mark_terminating(self, pod: Pod) -> None:
        pod.phase = PodPhase.TERMINATING
        pod.deleted_at = self.now

    def _pod_gone(self, pod: Pod) -> None:
        s = pod.slice
        if s is None or s.hosts[pod.host] is not pod:
            return
        s.hosts[pod.host] = None
        if self.track_departures:
            self.departures.append(Departure(pod, s, pod.host, self.now))
        job = pod.job
        current = pod in job.pods
        job.terminating.discard(pod)
        if current:
            job.pods.remove(pod)
        if s.healthy and s.empty:
            self._close_occupied(s)
            s.idle_since = self.now
            s.vacated_by_victim = job.victim_since is not None
            if self._returning(s):
                self._vanish(s)
        if current and job.state is JobState.ADMITTED:
            self._child_failed(job)
        self._maybe_recreate(job)
        self._kick()

    def _preempt(self, d: kubescheduler.Preempt) -> None:
        d.preemptor.nominated = (d.slice, d.host)
        victim = d.victim
        self.rec.pod_preemptions += 1
        victim.disruption, victim.disruption_at = "PreemptionByScheduler", self.now
        siblings = [p for p in d.slice.hosts if p is not None and p is not victim and p.job_key == victim.job_key]
        if siblings:
            self.rec.partial_preemptions += 1
        self._mark_victim(victim.job)
        # The pod stays part of its child Job until it is gone; then the Job fails (backoffLimit 0) and the
        # victim's JobSet restarts (jobset#928 sequence).
        self._mark_terminating(victim)
        self.loop.after(self.timing.pod_termination_grace_s, lambda: self._pod_gone(victim))

    def _mark_victim(self, job: Job) -> None:
        if self._victim_attempt.get(job) != job.attempt:
            self._victim_attempt[job] = job.attempt
            self.rec.victims += 1
        if job.victim_since is None:
            job.victim_since = self.now
            if job.state is JobState.ADMITTED:
                self._victim_admitted_since[job] = self.now

    def _close_stale(self, job: Job) -> None:
        since = self._victim_admitted_since.pop(job, None)
        if since is not None:
            self.rec.victim_stale_admitted_s += self.now - since

    def _close_idle(self, s: Slice) -> None:
        if s.idle_since is not None and s.healthy:
            idle = self.now - s.idle_since
            backlog = self._backlog()
            if s.vacated_by_victim:
                self.rec.freed_idle_slice_s += idle
                self.rec.reserved_idle_slice_s += idle
            elif backlog:
                self.rec.idle_queued_slice_s += idle
            else:
                self.rec.idle_no_demand_slice_s += idle
            if backlog:
                self.rec.idle_with_backlog_slice_s += idle
        s.idle_since = None
        s.vacated_by_victim = False

    def _close_occupied(self, s: Slice) -> None:
        if s.occupied_since is not None:
            self.rec.occupied_slice_s += self.now - s.occupied_since
            s.occupied_since = None

    def _backlog(self) -> bool:
        return any(j.state is JobState.QUEUED or (j.state is JobState.ADMITTED and not j.running) for j in self.live)

    # ------------------------------------------------------------------ Kueue
    def _admit(self, job: Job) -> None:
        self.note(f"kueue admits {job.name}")
        if self.on_admit is not None:
            self.on_admit(job)
        job.state = JobState.ADMITTED
        job.quota_reserved = True
        job.restarting = False
        job.admitted_at = job.admitted_at or self.now
        job.last_admitted_at = self.now
        if job.victim_since is not None:
            self._victim_admitted_since[job] = self.now
        if job.flavor is Capacity.QUEUED:
            self._request_capacity(job)
            return
        self._unsuspend(job)

    def _unsuspend(self, job: Job) -> None:
        """Admitted (every admission check Ready): the JobSet is unsuspended and its pods are created; the
        waitForPodsReady clock starts."""
        self.loop.after(
            self.timing.kueue_admission_s + self.timing.jobset_recreate_s, lambda: self._start_admitted(job)
        )
        self._arm_pods_ready(job)

    def _arm_pods_ready(self, job: Job, recovery: bool = False) -> None:
        """waitForPodsReady: timeout after admission, recoveryTimeout after PodsReady turns False."""
        job.ready_token += 1
        job.not_ready_since = self.now
        token = job.ready_token
        t = self.timing
        limit = t.pods_ready_recovery_timeout_s if recovery else t.pods_ready_timeout_s
        self.loop.after(limit, lambda: self._pods_ready_check(job, token))

    def _pods_ready_check(self, job: Job, token: int) -> None:
        if token != job.ready_token or job.state is not JobState.ADMITTED or job.running:
            return
        t = self.timing
        job.requeue_count += 1
        # The exponent is capped: a JobSet evicted a thousand times (a livelock) would overflow the float.
        backoff = min(t.requeue_backoff_base_s * 2 ** min(job.requeue_count - 1, 64), t.requeue_backoff_max_s)
        job.requeue_at = self.now + backoff
        self.rec.pods_ready_evictions += 1
        self._evict(job, JobState.QUEUED)
        self.loop.after(backoff, self._kick)

    def _start_admitted(self, job: Job) -> None:
        if job.state is not JobState.ADMITTED or job.pods or job.restarting:
            return
        if job.terminating:
            # Pods of the previous attempt still drain. A Kueue eviction does not cancel a failure-policy restart:
            # BlockingRecreate creates no Job of the new attempt while one of the old exists (jobset v0.12.0
            # constructJobsFromTemplate), and a suspended Job with a podFailurePolicy replaces a pod only once it
            # is terminal (kubernetes Job controller onlyReplaceFailedPods). So admission cannot start the new
            # attempt early: it starts when the last old pod is gone, as a restart does (_maybe_recreate).
            # JobSet-wide: after a suspend and resume without a restart each child Job waits only for its own
            # pods, so this is conservative for a victim released before its pods are gone (rare).
            job.restarting = True
            self._maybe_recreate(job)  # Recreate: the children whose old pods are gone start now
            return
        self._create_leaders(job)

    def _evict(self, job: Job, to: JobState, *, victim: bool = False) -> None:
        """Kueue eviction: suspend the JobSet, release quota (terminating pods do not count)."""
        if to is JobState.HELD and job.active:
            return  # reactivated before Kueue processed the deactivation
        job.rv += 1
        if job.state is not JobState.ADMITTED:
            if to is JobState.HELD and job.state is JobState.QUEUED:
                job.state = JobState.HELD
            return
        self.note(f"kueue evicts {job.name} -> {to.value}")
        self._interrupt(job, victim=victim)  # an open incident stays open: MTTR runs until the job runs again
        self._close_stale(job)
        job.state = to
        job.quota_reserved = False
        job.topology = None
        job.restarting = False
        self._release_capacity(job)
        if job.recreate is not None:
            job.recreate.cancel()
            job.recreate = None
        for pod in list(job.pods):
            self._delete_pod(pod)
        job.pods = []
        if self.on_evict is not None:
            self.on_evict(job)
        self._kick()

    def evict_requeue(self, job: Job) -> None:
        """A Kueue eviction that requeues at once without backoff (NodeFailures; Kueue's jobframework reconciler
        sets Requeued=true for it as for Preempted)."""
        self._evict(job, JobState.QUEUED)

    # Workload.spec.active as the reconciler writes it -------------------------------------------------
    def deactivate(self, job: Job) -> None:
        """spec.active=false: Kueue evicts (Deactivated) and does not requeue."""
        self.note(f"hold {job.name} (spec.active=false)")
        self._mark_victim(job)
        self.rec.holds += 1
        job.held_since = self.now
        job.active = False
        job.rv += 1
        self.loop.after(self.timing.kueue_admission_s, lambda: self._evict(job, JobState.HELD))

    def reactivate(self, job: Job) -> None:
        """spec.active=true: Kueue requeues (Reactivated) keeping the creation timestamp."""
        if job.held_since is not None:
            self.rec.hold_s.append(self.now - job.held_since)
            job.held_since = None
        self.note(f"release {job.name} (spec.active=true)")
        self.rec.releases += 1
        job.active = True
        job.rv += 1
        self._requeue_active(job)

    def _requeue_active(self, job: Job) -> None:
        """Kueue puts an active Workload that was held (suspended) back in the queue once it has seen it."""

        def requeue() -> None:
            if job.state is JobState.HELD and job.active:
                job.state = JobState.QUEUED
                self._kick()

        self.loop.after(self.timing.kueue_admission_s, requeue)

    # Rung switch (the reconciler's `planner.rungs`) -------------------------------------------------
    def hold_for_rung_switch(self, job: Job) -> None:
        """spec.active=false to move the JobSet to another rung: Kueue evicts and suspends it, as for a hold,
        but it is nobody's victim (its own slices are gone)."""
        self.note(f"rung switch: hold {job.name}")
        job.active = False
        job.rv += 1
        self.loop.after(self.timing.kueue_admission_s, lambda: self._evict(job, JobState.HELD))

    def recreate_workload(self, job: Job, capacity: Capacity) -> None:
        """The JobSet's pod templates pinned to `capacity` and its held Workload deleted: Kueue creates a new one
        from the pinned template (active, no annotations, no requeue backoff) and queues it."""
        if job.state is not JobState.HELD:
            return
        self.note(f"rung switch: {job.name} pinned to {capacity.value}, Workload recreated")
        self.rec.count("rung_switches")
        job.pinned = capacity
        job.workload_generation += 1
        job.annotations = {}
        job.active = True
        job.requeue_at = 0.0
        job.requeue_count = 0
        job.rv += 1
        self._requeue_active(job)

    def end_rung_switch(self, job: Job) -> None:
        """A switch given up: the annotations go and spec.active=true, and Kueue requeues the Workload as it was."""
        self.note(f"rung switch given up: {job.name}")
        job.active = True
        job.rv += 1
        self._requeue_active(job)

    # ------------------------------------------------------------------ capacity ladder (Fleet.ladder)
    def _init_capacity(self, s: Slice) -> None:
        """Label the slice with its capacity mode; queued flex-start capacity starts without nodes (nobody asked)."""
        s.capacity = self.scenario.fleet.capacity_of(s.id)
        if s.capacity is Capacity.QUEUED:
            s.present = False
            s.schedulable = False
            s.idle_since = None  # capacity that does not exist is not idle
            s.absent_since = 0.0

    def _plan_quota(self) -> kueue.AdmissionPlan:
        """Kueue's quota-only admission: one flavor, or one per capacity mode in ladder order."""
        fleet = self.scenario.fleet
        if not fleet.ladder:
            return kueue.plan_admission(self.live, self.quota_chips, self.chips_per_slice, self.now, self.cohort)
        quotas = {c: fleet.slices_of(c) * self.chips_per_slice for c in kueue.LADDER}
        return kueue.plan_ladder_admission(self.live, quotas, self.chips_per_slice, self.now, fleet.spot_max_priority)

    def _spot_clock(self, sid: int) -> None:
        """GCP reclaims a spot slice (Poisson per slice, its own stream: the same moments under every policy). A
        slice already down for a hardware fault has no VMs to reclaim; the tick is skipped."""
        rng = self._spot_rng[sid]
        f = self.scenario.failures
        back_s = draw_band_s(rng, f.spot_return_mixture)
        s = self.slices[sid]
        if s.healthy:
            self._fail_now(s, self.timing.spot_notice_s + back_s, FailureKind.SPOT_PREEMPTION)
        self.loop.after(rng.expovariate(f.spot_rate_per_slice_s), partial(self._spot_clock, sid))

    def _spot_notice(self, s: Slice) -> None:
        """The preemption notice: the kubelet's graceful node shutdown marks the nodes NotReady ("node is shutting
        down") and starts terminating every pod with a DisruptionTarget (TerminationByKubelet). The pods are not
        deleted through the API (no deletionTimestamp); they turn Failed when killed, `spot_pod_grace_s` later."""
        s.node_ready = False
        s.node_transition = self.now
        for pod in s.hosts:
            if pod is not None and pod.phase is not PodPhase.TERMINATING:
                pod.phase = PodPhase.TERMINATING
                pod.disruption, pod.disruption_at = "TerminationByKubelet", self.now
        self.note(f"spot preemption notice {s.pool}")

    def _spot_vms_gone(self, s: Slice, epoch: float) -> None:
        """End of the notice: the VMs are stopped and their Node objects deleted (the cloud node lifecycle
        controller removes Nodes whose instance is gone) until GCP gives the capacity back."""
        if s.failed_at != epoch or s.healthy:
            return
        for pod in list(s.hosts):  # nothing outlives the VM (pods bound after the notice cannot exist: unschedulable)
            if pod is not None:
                pod.failed = True
                self._pod_gone(pod)
        s.nodes_deleted = True
        self.note(f"spot VMs of {s.pool} gone")
        self._kick()

    def _request_capacity(self, job: Job) -> None:
        """Quota reserved on the queued flex-start flavor: Kueue creates a ProvisioningRequest and admits only once
        GKE has made all the slices (queued_provisioning_s later). Slices already back with GKE are taken first;
        one still draining its last owner's pods is waited for (it goes back within a termination grace).
        Left out: a request that is never filled, and partial capacity (DWS gives all or nothing)."""
        job.awaiting_capacity = True
        free = [s for s in self.slices if s.capacity is Capacity.QUEUED and s.owner is None]
        claimed = sorted(free, key=lambda s: (s.present, s.id))[: job.slices]
        for s in claimed:
            s.owner = job
        job.provisioned = claimed
        self.note(f"{job.name} provisioning request for {len(claimed)} queued slices")
        self.loop.after(self.timing.queued_provisioning_s, partial(self._capacity_provisioned, job, claimed))

    def _capacity_provisioned(self, job: Job, claimed: list[Slice]) -> None:
        if job.provisioned is not claimed or not job.awaiting_capacity:
            return  # evicted (request deleted) before GKE filled it
        if any(s.present for s in claimed):  # the previous owner's nodes are not gone yet
            self.loop.after(self.timing.kueue_admission_s, partial(self._capacity_provisioned, job, claimed))
            return
        for s in claimed:
            self._close_absent(s)
            s.present = True
            s.schedulable = True
            s.node_ready = True
            s.node_transition = s.created_at = self.now
            s.idle_since = self.now
        job.awaiting_capacity = False
        self.note(f"{job.name} provisioning request filled")
        self._unsuspend(job)
        self._kick()

    def _release_capacity(self, job: Job) -> None:
        """The workload lost its quota (evicted, finished, failed): Kueue deletes its ProvisioningRequest and the
        nodes go back to GKE once its pods are gone; nobody else may use them meanwhile."""
        job.flavor = None
        job.awaiting_capacity = False
        released, job.provisioned = job.provisioned, []
        for s in released:
            s.owner = None
            s.schedulable = False
            if s.healthy and s.empty and s.present:
                self._vanish(s)

    @staticmethod
    def _returning(s: Slice) -> bool:
        """Queued capacity whose request is gone: nodes still there, but no admitted workload's (a new request
        that claimed the slice waits for GKE to make fresh nodes)."""
        return s.capacity is Capacity.QUEUED and s.present and (s.owner is None or s.owner.awaiting_capacity)

    def _vanish(self, s: Slice) -> None:
        """A released queued slice leaves the cluster (called only when healthy and empty)."""
        self._close_idle(s)
        self._close_occupied(s)
        s.present = False
        s.schedulable = False
        s.idle_since = None
        s.absent_since = self.now
        self.note(f"queued slice {s.pool} returned to GKE")

    def _close_absent(self, s: Slice) -> None:
        """Capacity that did not exist is not provisioned capacity: it leaves the goodput ledger's denominator."""
        if s.absent_since is not None:
            self.rec.absent_slice_s += self.now - s.absent_since
            s.absent_since = None

    # ------------------------------------------------------------------ end of run
    def _finalise(self, horizon: float) -> None:
        self._ended = True
        for job in list(self.live):
            if job.run_start is not None:
                ran = horizon - job.run_start
                self.rec.productive_slice_s += ran * job.slices
                # Work in flight at the horizon is not thrown away: the run goes on.
                self._account_running(job, ran, 0.0, victim=False)
                if self.rec.is_high(job.priority):
                    self.rec.high_run_s += ran
        for s in self.slices:
            self._close_idle(s)
            self._close_occupied(s)
            self._close_absent(s)
            if not s.healthy and s.failed_at is not None:
                self.rec.down_slice_s += horizon - s.failed_at

    def end_states(self) -> dict[str, int]:
        counts = {state.value: 0 for state in JobState}
        for job in self.jobs:
            counts[job.state.value] += 1
        return counts

    def lost_victims(self) -> int:
        """Victims that nothing will ever run again: inactive without a live hold."""
        max_hold = getattr(self.policy, "max_hold_s", math.inf)
        resync = self.timing.reconciler_resync_s
        lost = 0
        for job in self.jobs:
            if job.state is not JobState.HELD:
                continue
            if job.held_since is None or self.now - job.held_since > max_hold + resync:
                lost += 1
        return lost

    def _summary(self, horizon: float) -> dict[str, Any]:
        high_population = sum(c.population for c in self.scenario.classes if self.rec.is_high(c.priority))
        return summarise(
            self.rec,
            slices=len(self.slices),
            horizon_s=horizon,
            high_population=high_population,
            lost_victims=self.lost_victims(),
            end_states=self.end_states(),
            chips_per_slice=self.chips_per_slice,
        )

    # ------------------------------------------------------------------ hooks for the reconciler policy
    def force_fail(self, pod: Pod) -> None:
        """Fast-fail: mark the pod Failed and delete it with grace 0, as the reconciler's fast-fail does."""
        if pod.slice is not None and pod.slice.hosts[pod.host] is pod:
            pod.failed = True
            self._pod_gone(pod)

    def recent_departures(self, window_s: float) -> list[Departure]:
        while self.departures and self.departures[0].at < self.now - window_s:
            self.departures.popleft()
        return list(self.departures)

    # ------------------------------------------------------------------ fleet hooks (sim/fleet.py)
    def adopt(self, job: Job, clock_seed: int) -> None:
        """A workload created here from outside (a MultiKueue remote copy, a JobSet a user submitted to this region):
        queued in this Kueue. Its replica failure clocks are keyed by `clock_seed` and its name, so the same JobSet
        meets the same faults on whichever worker it runs."""
        self.jobs.append(job)
        self.live[job] = None
        self._start_replica_clocks(job, clock_seed)
        self._kick()

    def withdraw(self, job: Job, *, victim: bool) -> None:
        """The workload's owner deleted it (MultiKueue removes a remote copy): an admitted one is evicted first (its
        pods terminate with their grace period), then it leaves this cluster without a replacement."""
        self._evict(job, JobState.QUEUED, victim=victim)
        self.live.pop(job, None)
        self.jobs.remove(job)
        self._kick()

    def fail_slice(self, s: Slice, repair_s: float, kind: FailureKind = FailureKind.CRASH) -> None:
        """An externally scheduled fault (a region's degradation), with the same effects as a drawn one."""
        self._fail_now(s, repair_s, kind)

    # ------------------------------------------------------------------ helpers for policies and tests
    def pods(self) -> Iterable[Pod]:
        for job in self.live:
            yield from job.all_pods()
