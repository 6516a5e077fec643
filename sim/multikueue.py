"""The MultiKueue manager of a simulated fleet, and the hand-picked-region alternative.

What the manager does follows Kueue's MultiKueue workload controller
(pkg/controller/admissionchecks/multikueue/workload.go, read at kubernetes-sigs/kueue 0013485; v0.19.2 assumed to
behave the same [I]):

- The manager's own ClusterQueue reserves quota first (its nominal quota is the workers' total, as the
  `TpuFleet` component sets it; priority order and LowerPriority preemption as every Kueue, `kueue.plan_admission`).
- Then the `AllAtOnce` dispatcher nominates every worker: a copy of the Workload is created in each, and each
  worker's Kueue treats it like any workload (it may even preempt for it). The first copy to be admitted wins and
  the manager deletes the others ("6b. converge onto it"); preemptions made on the losing workers are not undone
  (the waste KEP-8303 sets out to remove).
- When the winning copy is evicted on its worker for any reason (waitForPodsReady timeout, Kueue preemption, or a
  `spec.active=false` hold: the remote Workload is then Evicted, and its spec is out of sync with the manager's)
  while the admission check is Ready, the manager sets the check to Retry: the local Workload is evicted and
  requeued, every remote copy is deleted, and the workload is dispatched anew once the manager readmits it.
- When the winning copy finishes, the manager finishes the local Workload ("3. Finish the local workload").
- Evicting the local Workload on the manager (its own preemption) deletes the remote copies, stopping the run.

Left out: the Incremental dispatcher (rounds of 3 workers every 5 min, only matters with more than 3 workers), an
unreachable worker (`workerLostTimeout`: the simulated workers never lose contact), the manager's requeue backoff
after a Retry (none assumed [I]: Kueue's backoff belongs to waitForPodsReady evictions).

In `independent` mode there is no manager: every JobSet slot of a class is pinned to one region (round robin,
as a user would spread work by hand) and its replacements are submitted there too; nothing ever moves.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from enum import StrEnum
from functools import partial

from sim import kueue
from sim.engine import EventLoop
from sim.params import HOUR, JobClass
from sim.simulator import Simulator
from sim.state import Job, JobState


class FleetMode(StrEnum):
    MULTIKUEUE = "multikueue"
    """JobSets go to the manager; MultiKueue (AllAtOnce) dispatches and re-dispatches them."""
    INDEPENDENT = "independent"
    """Every JobSet is submitted to one region picked by hand (round robin) and stays there."""


@dataclass(eq=False)
class Entry:
    """One JobSet as the manager (or the user) sees it: its local Workload and its remote copies per worker."""

    local: Job
    slot: int
    """Index of its closed-population slot (its replacement takes the same one)."""
    copies: dict[int, Job] = field(default_factory=dict)
    winner: int | None = None
    """Worker whose copy was admitted first (MultiKueue's status.clusterName)."""
    generation: int = 0
    """Local admissions so far: a copy scheduled for an earlier one is not created."""
    last_worker: int | None = None


@dataclass
class DispatchStats:
    dispatches: int = 0  # local Workload admitted on the manager and copied to workers
    copies: int = 0  # remote copies created
    retries: int = 0  # remote eviction with the check Ready -> local evicted and requeued
    retries_by_hold: int = 0  # ... of which the worker's reconciler had deactivated the copy
    moves: int = 0  # a re-dispatched JobSet admitted on another worker than its last one
    manager_preemptions: int = 0
    losing_admissions: int = 0  # a copy admitted while another admission stands (a losing copy not yet deleted,
    # or the evicted winner readmitted by its worker before the manager's Retry deleted it)


class Manager:
    """The manager cluster's Kueue + MultiKueue controller, or the user picking regions (module doc)."""

    def __init__(
        self,
        mode: FleetMode,
        workers: list[Simulator],
        loop: EventLoop,
        classes: tuple[JobClass, ...],
        seed: int,
        dispatch_s: float,
    ) -> None:
        self.mode = mode
        self.workers = workers
        self.loop = loop
        self.classes = classes
        self.seed = seed
        self.dispatch_s = dispatch_s
        self.chips_per_slice = workers[0].chips_per_slice
        self.quota_chips = sum(w.quota_chips for w in workers)
        self.timing = workers[0].timing
        self.live: dict[Job, Entry] = {}  # local Workload -> its entry; insertion-ordered for determinism
        self.stats = DispatchStats()
        self._of: dict[Job, tuple[Entry, int]] = {}  # remote copy -> (entry, worker)
        self._withdrawing: set[Job] = set()
        self._ids = 0
        self._counter: dict[str, int] = {}
        self._rng = {c.name: random.Random(f"{seed}:jobs:{c.name}") for c in classes}
        self._pass_pending = False
        self._slot_region: list[int] = []
        self._slot_class: list[JobClass] = []
        for cls in classes:
            for _ in range(cls.population):
                self._slot_region.append(len(self._slot_class) % len(workers))
                self._slot_class.append(cls)
        for i, w in enumerate(workers):
            w.on_admit = partial(self._on_admit, i)
            w.on_evict = partial(self._on_evict, i)
            w.on_terminal = partial(self._on_terminal, i)

    def start(self) -> None:
        for slot in range(len(self._slot_class)):
            self._submit(slot)

    @property
    def now(self) -> float:
        return self.loop.now

    def _next_id(self) -> int:
        self._ids += 1
        return self._ids

    def _submit(self, slot: int) -> None:
        """A user submits a JobSet of the slot's class (its k-th job of the class is the same in every mode)."""
        cls = self._slot_class[slot]
        k = self._counter.get(cls.name, 0)
        self._counter[cls.name] = k + 1
        work = self._rng[cls.name].expovariate(1.0 / (cls.mean_duration_h * HOUR))
        local = Job(id=self._next_id(), name=f"{cls.name}-{k:05d}", cls=cls, work_s=work, created=self.now)
        entry = Entry(local=local, slot=slot)
        self.live[local] = entry
        if self.mode is FleetMode.INDEPENDENT:
            self._copy(entry, self._slot_region[slot])
        else:
            self._kick()

    # ------------------------------------------------------------------ the manager's Kueue
    def _kick(self) -> None:
        if not self._pass_pending:
            self._pass_pending = True
            self.loop.after(0.0, self._pass)

    def _pass(self) -> None:
        self._pass_pending = False
        plan = kueue.plan_admission(self.live, self.quota_chips, self.chips_per_slice, self.now)
        for victim in plan.preempt:
            self.stats.manager_preemptions += 1
            self._requeue(self.live[victim], victim=True)
        for local in plan.admit:
            local.state = JobState.ADMITTED
            local.quota_reserved = True
            local.last_admitted_at = self.now
            self.loop.after(self.timing.kueue_admission_s + self.dispatch_s, partial(self._dispatch, local))
        if plan.preempt:
            self._kick()

    def _dispatch(self, local: Job) -> None:
        entry = self.live.get(local)
        if entry is None or local.state is not JobState.ADMITTED or entry.copies:
            return
        self.stats.dispatches += 1
        entry.generation += 1
        # AllAtOnce: every worker gets a copy, created one API call at a time in Go map order (random), so which
        # worker sees it first is random: the copies land uniformly within dispatch_s. A worker that has room then
        # wins the race; without the jitter the first worker in the list would win every tie.
        race = random.Random(f"{self.seed}:race:{local.name}:{entry.generation}")
        for i in range(len(self.workers)):
            self.loop.after(race.uniform(0.0, self.dispatch_s), partial(self._offer, entry, i, entry.generation))

    def _offer(self, entry: Entry, worker: int, generation: int) -> None:
        local = entry.local
        if entry.generation != generation or local.state is not JobState.ADMITTED or entry.winner is not None:
            return  # requeued since, or another worker already admitted it (the manager creates no more copies)
        if self.live.get(local) is entry and worker not in entry.copies:
            self._copy(entry, worker)

    def _copy(self, entry: Entry, worker: int) -> None:
        """Create the remote Workload + JobSet: a new object that carries the checkpointed progress and the open
        incident (MTTR runs until the JobSet runs again, wherever that is)."""
        src = entry.local
        copy = Job(
            id=self._next_id(),
            name=src.name,
            cls=src.cls,
            work_s=src.work_s,
            created=self.now,
            progress_s=src.progress_s,
            incident_start=src.incident_start,
            incident_lasting=src.incident_lasting,
            victim_since=src.victim_since,
        )
        entry.copies[worker] = copy
        self._of[copy] = (entry, worker)
        self.stats.copies += 1
        self.workers[worker].adopt(copy, self.seed)

    # ------------------------------------------------------------------ what the workers report
    def _on_admit(self, worker: int, copy: Job) -> None:
        if self.mode is FleetMode.INDEPENDENT or copy not in self._of:
            return
        entry, _ = self._of[copy]
        if entry.winner is not None:
            self.stats.losing_admissions += 1
            return
        entry.winner = worker
        if entry.last_worker is not None and entry.last_worker != worker:
            self.stats.moves += 1
        entry.last_worker = worker
        # The manager sees the reservation on its next reconcile and deletes the other copies.
        self.loop.after(self.dispatch_s, partial(self._converge, entry, worker))

    def _converge(self, entry: Entry, winner: int) -> None:
        if entry.winner != winner:
            return  # requeued meanwhile: the copies belong to a later dispatch
        for i in list(entry.copies):
            if i != winner:
                self._remove(entry, i, victim=False)

    def _on_evict(self, worker: int, copy: Job) -> None:
        if self.mode is FleetMode.INDEPENDENT or copy in self._withdrawing or copy not in self._of:
            return
        entry, _ = self._of[copy]
        if entry.winner != worker:
            return  # a losing copy: the converge step deletes it anyway
        self.stats.retries += 1
        if copy.state is JobState.HELD or not copy.active:
            self.stats.retries_by_hold += 1
        self.loop.after(self.dispatch_s, partial(self._retry, entry))

    def _retry(self, entry: Entry) -> None:
        """Admission check Retry: the local Workload is evicted (remote copies deleted) and requeued."""
        if self.live.get(entry.local) is entry and entry.local.state is JobState.ADMITTED:
            self._requeue(entry, victim=False)
            self._kick()

    def _on_terminal(self, worker: int, copy: Job) -> None:
        found = self._of.pop(copy, None)
        if found is None:
            return
        entry, _ = found
        entry.copies.pop(worker, None)
        if self.mode is FleetMode.INDEPENDENT:
            self._finish(entry)
            return
        self.loop.after(self.dispatch_s, partial(self._finish, entry))

    def _finish(self, entry: Entry) -> None:
        """The remote JobSet finished (or failed for good): the local one ends, its quota is free, and the user's
        next JobSet of the slot is submitted."""
        if self.live.pop(entry.local, None) is None:
            return
        for i in list(entry.copies):
            self._remove(entry, i, victim=False)
        entry.local.state = JobState.FINISHED
        entry.local.quota_reserved = False
        self._submit(entry.slot)
        self._kick()

    # ------------------------------------------------------------------ helpers
    def _requeue(self, entry: Entry, *, victim: bool) -> None:
        """Evict the local Workload: delete every remote copy (taking over its progress and open incident)."""
        for i in list(entry.copies):
            self._remove(entry, i, victim=victim)
        local = entry.local
        local.state = JobState.QUEUED
        local.quota_reserved = False
        entry.winner = None

    def _remove(self, entry: Entry, worker: int, *, victim: bool) -> None:
        copy = entry.copies.pop(worker)
        self._withdrawing.add(copy)
        self.workers[worker].withdraw(copy, victim=victim)
        self._withdrawing.discard(copy)
        self._of.pop(copy, None)
        if worker == entry.winner:
            local = entry.local
            local.progress_s = copy.progress_s
            local.incident_start = copy.incident_start
            local.incident_lasting = copy.incident_lasting
            local.victim_since = copy.victim_since
