"""`reconciler`: this package's controller, driven by the real planner (`hotswap.planner.plan`).

Each pass converts the simulated cluster into a `ClusterSnapshot`, calls the planner exactly as the controller
does, and interprets its actions: HoldVictim -> annotations + `spec.active=false` (Kueue evicts, the JobSet is
suspended, pods terminate with their grace period), ReleaseVictim -> `spec.active=true` (Kueue requeues),
RecordOp/ClearOp -> preemptor annotations, FastFailPod -> force-delete. PriorityClasses use
preemptionPolicy: Never, so kube-scheduler never preempts.

Passes run on watch events (after `reconciler_reaction_s`), on the resync period and, like the controller, at
the plan's `next_wakeup` plus the debounce (grace, stabilisation, attribution, maxHold, releaseSettle and
fast-fail and starvation deadlines, computed by the planner). While nothing is unhealthy,
recovering, held, in flight or waiting for a node after admission a pass has nothing to do and is skipped
(tested in tests/sim).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from gke_tpu_priority.hotswap.annotations import AnnotationKeys, parse_time
from gke_tpu_priority.hotswap.config import HotswapConfig
from gke_tpu_priority.hotswap.model import ClusterSnapshot, SliceShape
from gke_tpu_priority.hotswap.planner import plan
from gke_tpu_priority.hotswap.planner.actions import (
    Action,
    ClearOp,
    EndRungSwitch,
    FastFailPod,
    HoldVictim,
    PinRung,
    Plan,
    RecordOp,
    ReleaseVictim,
    StartRungSwitch,
)
from sim.engine import Handle
from sim.params import Capacity
from sim.snapshot import CheckpointSignal, at, build_snapshot, pod_uid, workload_uid
from sim.state import Job, JobState, PodPhase

if TYPE_CHECKING:
    from sim.host import SimHost


class ReconcilerPolicy:
    name = "reconciler"
    scheduler_preemption = False

    def __init__(self, config: HotswapConfig | None = None) -> None:
        self._configured = config is not None
        self.config = config or HotswapConfig()
        self._keys = AnnotationKeys(self.config.annotation_domain)
        self._sim: SimHost | None = None
        self._next: Handle | None = None
        self.plans: list[Plan] = []  # kept only when `keep_plans` (tests)
        self.keep_plans = False

    @property
    def max_hold_s(self) -> float:
        return self.config.max_hold.total_seconds()

    @property
    def sim(self) -> SimHost:
        assert self._sim is not None, "attach() first"
        return self._sim

    def attach(self, sim: SimHost) -> None:
        self._sim = sim
        if not self._configured:  # the scenario's knobs, for sweeps; an explicit config wins
            # `topTierPriority` as the platform derives it from its tiers: the highest class that may preempt.
            top = max((c.priority for c in sim.scenario.classes), default=None)
            self.config = sim.scenario.reconciler.hotswap_config().model_copy(update={"top_tier_priority": top})
        sim.track_departures = True

    def plan_admission(self, now: float) -> None:
        del now  # Kueue without TAS: the simulator's quota model

    # ------------------------------------------------------------------ when to run
    def on_change(self) -> None:
        if self.busy():
            self._request(self.sim.timing.reconciler_reaction_s)

    def busy(self) -> bool:
        """Anything the planner could act on: unhealthy/recovering slices, holds, open operations, shared slices,
        admitted JobSets with unbound pods (starvation)."""
        sim = self.sim
        horizon = (
            self.config.unhealthy_grace + self.config.recovery_stabilization + self.config.attribution_window
        ).total_seconds()
        for s in sim.slices:
            if not s.healthy or not s.node_ready or sim.now - s.node_transition <= horizon:
                return True
        if any(len(s.occupants()) > 1 for s in sim.slices):
            return True  # a possible slice priority inversion (lower-priority pods in a higher JobSet's slice)
        keys = self._keys
        settle = self.config.release_settle
        starvation = bool(self.config.starvation_grace)
        for j in sim.live:
            if starvation and j.state is JobState.ADMITTED and any(p.phase is PodPhase.PENDING for p in j.pods):
                return True  # the planner's wake-up then comes at the starvation deadline
            a = j.annotations
            if j.state is JobState.HELD or keys.held_by in a or keys.op in a:
                return True
            released = parse_time(a.get(keys.released_at, ""))
            if released is not None and at(sim.now) - released < settle:
                return True
        return False

    def _request(self, delay: float) -> None:
        due = self.sim.now + delay
        if self._next is not None and self._next.active and self._next.time <= due:
            return
        if self._next is not None:
            self._next.cancel()
        self._next = self.sim.loop.at(due, self._pass)

    # ------------------------------------------------------------------ one pass
    def snapshot(self) -> ClusterSnapshot:
        sim = self.sim
        fleet = sim.scenario.fleet
        shape = SliceShape(fleet.accelerator, fleet.topology, fleet.chips_per_host)
        window = self.config.attribution_window.total_seconds()
        departures = [(d.pod, d.slice, d.host, d.at) for d in sim.recent_departures(window)]
        jobs = [j for j in sim.live if j.state in (JobState.QUEUED, JobState.ADMITTED, JobState.HELD)]
        checkpoints = (
            CheckpointSignal(
                self._keys.last_checkpoint,
                sim.timing.checkpoint_interval_s,
                sim.now,
                sim.scenario.checkpoint_share,
                sim.scenario.seed,
            )
            if sim.scenario.checkpoint_signal and sim.scenario.checkpoint_share > 0.0
            else None
        )
        return build_snapshot(
            sim.slices, jobs, departures, shape, fleet.machine_type, checkpoints, self._queued_room_chips()
        )

    def _queued_room_chips(self) -> int:
        """The ClusterQueue's `google.com/tpu` quota on the ladder's queued flex-start flavor not reserved, as the
        controller reads it from the ClusterQueue's spec and `status.flavorsReservation`."""
        sim = self.sim
        fleet = sim.scenario.fleet
        if not fleet.ladder:
            return 0
        per_slice = sim.chips_per_slice
        used = sum(j.slices * per_slice for j in sim.live if j.quota_reserved and j.flavor is Capacity.QUEUED)
        return max(fleet.slices_of(Capacity.QUEUED) * per_slice - used, 0)

    def _pass(self) -> None:
        self._next = None
        sim = self.sim
        snap = self.snapshot()
        started = time.perf_counter()
        result = plan(snap, at(sim.now), self.config)
        sim.rec.planner_ms.append((time.perf_counter() - started) * 1000.0)
        sim.rec.planner_passes += 1
        if self.keep_plans:
            self.plans.append(result)
        if result.actions:
            actions = result.actions
            sim.loop.after(sim.timing.api_write_s, lambda: self._apply(actions))
        if self.busy() or result.actions:
            self._request(sim.timing.reconciler_resync_s)
        if result.next_wakeup is not None:
            # As the controller: a timer at the wake-up, then the debounce before the pass.
            delay = max((result.next_wakeup - at(sim.now)).total_seconds(), 0.0)
            self._request(delay + self.config.debounce.total_seconds())

    def _apply(self, actions: tuple[Action, ...]) -> None:
        sim = self.sim
        jobs = {workload_uid(j): j for j in sim.live}
        pods = {pod_uid(p): p for p in sim.pods()}
        for action in actions:
            if isinstance(action, FastFailPod):
                pod = pods.get(action.pod.uid)
                if pod is not None:
                    sim.force_fail(pod)
                continue
            job = jobs.get(action.workload.uid)
            if job is None:
                continue  # the Workload vanished (finished): the API server would 404
            if isinstance(action, HoldVictim):
                for key in action.remove_annotations:
                    job.annotations.pop(key, None)
                job.annotations.update(action.set_annotations)
                sim.deactivate(job)
                sim.rec.ops.add(action.op_id)
                if action.fenced:
                    sim.rec.fence_holds[action.op_id] = sim.rec.fence_holds.get(action.op_id, 0) + 1
            elif isinstance(action, ReleaseVictim):
                _remove(job, action.remove_annotations)
                job.annotations.update(action.set_annotations)
                sim.reactivate(job)
            elif isinstance(action, RecordOp):
                job.annotations.update(action.annotations())
                job.rv += 1
            elif isinstance(action, ClearOp):
                _remove(job, action.remove_annotations)
                job.rv += 1
            elif isinstance(action, StartRungSwitch):
                if job.active and job.state is JobState.ADMITTED:  # the actuator's re-check: still admitted
                    job.annotations.update(action.set_annotations)
                    sim.hold_for_rung_switch(job)
            elif isinstance(action, PinRung):
                sim.recreate_workload(job, Capacity(action.capacity))
            elif isinstance(action, EndRungSwitch):
                _remove(job, action.remove_annotations)
                sim.end_rung_switch(job)
        sim.kick()


def _remove(job: Job, keys: tuple[str, ...]) -> None:
    for key in keys:
        job.annotations.pop(key, None)
    job.rv += 1
