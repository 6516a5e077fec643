"""`hindsight`: a clairvoyant reference policy, the yardstick for the online ones.

No real system: it reads what no controller can know, the true repair time of each failure (`Slice.repair_at`) and
every JobSet's progress since its last checkpoint, and acts at the instant of the fault:

- a failure that heals before the disrupted JobSet could restart anyway (`SimHost.lasting_after_s`: detection
  plus the JobSet's own fail/drain/recreate) gets no eviction at all: restarting in place is as fast as anything;
- for a lasting one it fails the dead pods at once (no detection delay), fences the JobSet's surviving slices and
  any free slice against other pods, and for the slices still missing evicts the set of lower-priority JobSets
  that throws away the least progress (an exact minimum-cost cover over chips x progress since their last
  checkpoint), suspending them with Workload.spec.active=false; the JobSet itself restarts in place (a Kueue
  requeue would not start its new attempt any sooner: see `Simulator._start_admitted`);
- the victims are released (spec.active=true) as soon as the preemptor runs again;
- a lower-priority JobSet whose pods share a slice with a high-priority JobSet that is not running (their leaders
  bound in one scheduling cycle on a slice nobody fenced) is evicted at once: it has not run on that attempt.

It acts for high-priority JobSets only (the badput it bounds) and never uses kube-scheduler preemption. What it
leaves out, so it bounds the online policies in the figures they target rather than in every conceivable way: it
does not time an eviction to fall just after a victim's next checkpoint, does not look ahead to later failures or
job completions, and does nothing for a high-priority JobSet that waits without a failure (starvation after
admission). tests/sim/test_peers.py checks that its high-priority badput is at most every other policy's on a
seeded scenario; docs/benchmarks.md has where it is not a bound per seed (checkpoint grid, storms).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sim.state import Job, JobState, Slice, checkpointed_s

if TYPE_CHECKING:
    from sim.host import SimHost


WATCH_S = 1.0
"""While a rescue is open, how often it looks whether the preemptor runs again (then it releases at once)."""


class HindsightPolicy:
    name = "hindsight"
    scheduler_preemption = False

    def __init__(self) -> None:
        self._sim: SimHost | None = None
        self._seen: set[tuple[int, float]] = set()  # (slice, failed_at) already handled
        self.victims: dict[Job, set[Job]] = {}  # preemptor -> its held victims
        self._watching = False

    @property
    def sim(self) -> SimHost:
        assert self._sim is not None, "attach() first"
        return self._sim

    def attach(self, sim: SimHost) -> None:
        self._sim = sim

    def plan_admission(self, now: float) -> None:
        del now  # Kueue without TAS: the simulator's quota model

    def on_change(self) -> None:
        sim = self.sim
        for s in sim.slices:
            if not s.healthy and s.failed_at is not None and (s.id, s.failed_at) not in self._seen:
                self._seen.add((s.id, s.failed_at))
                self._fault(s)
        for job in [j for j in sim.live if self._starving(j)]:
            self._rescue(job, None, lasting=True)
        self._clear_shared()
        for job in [j for j in self.victims if j.active and not j.running and j in sim.live]:
            self._top_up(job)  # a rescue still short of slices (a storm took more, or no victim was free yet)
        done = [j for j in self.victims if j.running or not j.active or j.state is JobState.HELD or j not in sim.live]
        for job in done:
            self._release(job)
        if self.victims and not self._watching:
            self._watching = True
            sim.loop.after(WATCH_S, self._watch)

    def _watch(self) -> None:
        """The preemptor's pods turning Running is no state change the simulator announces: look again soon."""
        self._watching = False
        self.on_change()

    # ------------------------------------------------------------------ a fault
    def _fault(self, s: Slice) -> None:
        sim = self.sim
        assert s.repair_at is not None and s.fault_kind is not None
        hit = sorted({p.job for p in s.hosts if p is not None and p.job.state is JobState.ADMITTED}, key=lambda j: j.id)
        for job in hit:
            if not sim.rec.is_high(job.priority):
                continue
            lasting = s.repair_at - sim.now > sim.lasting_after_s(s.fault_kind)
            if not lasting:
                sim.note(f"hindsight: {s.pool} heals before {job.name} could restart elsewhere; no eviction")
            self._rescue(job, s, lasting)

    def _starving(self, job: Job) -> bool:
        """An admitted high-priority JobSet, no rescue open, that cannot place all its slices: not enough of its
        own, free, or soon-repaired slices (a fresh admission onto a full fleet, or one after a requeue)."""
        sim = self.sim
        if job in self.victims or job.state is not JobState.ADMITTED or job.running or job.restarting:
            return False
        if not sim.rec.is_high(job.priority) or not job.pods:
            return False
        return len(self._available(job)) < job.slices

    def _available(self, job: Job) -> set[Slice]:
        """Slices the JobSet can have without evicting anyone: its own healthy ones and those fenced for it, free
        ones, and down ones that are back before a restart elsewhere could run."""
        sim = self.sim
        out = {p.slice for p in job.all_pods() if p.slice is not None and p.slice.healthy}
        for s in sim.slices:
            if (s.reserved_for is not None and s.reserved_for is not job) or (
                s.owner is not None and s.owner is not job
            ):
                continue  # fenced for another, or queued capacity made for another's ProvisioningRequest
            if (s.healthy and (s.reserved_for is job or (s.schedulable and s.empty))) or (
                not s.healthy
                and s.empty
                and s.repair_at is not None
                and s.fault_kind is not None
                and s.repair_at - sim.now <= sim.lasting_after_s(s.fault_kind)
            ):
                out.add(s)
        return out

    def _rescue(self, job: Job, faulted: Slice | None, lasting: bool) -> None:
        sim = self.sim
        own = {p.slice for p in job.all_pods() if p.slice is not None and p.slice.healthy}
        for s in own:
            s.reserved_for = job  # its surviving slices stay its own while its old pods drain
        if faulted is not None and not lasting:
            faulted.reserved_for = job  # back before a restart elsewhere could run: keep it for the JobSet
        self.victims.setdefault(job, set())  # the rescue is open until the JobSet runs again
        self._top_up(job)
        for pod in [p for p in job.all_pods() if p.slice is not None and not p.slice.healthy]:
            sim.force_fail(pod)  # it knows the fault now; detection would only add delay
        # No requeue through Kueue: the JobSet's restart has begun with the fault, and neither BlockingRecreate
        # nor the Job controller creates a pod of the new attempt before the old ones are gone, requeued or not.
        sim.kick()

    def _soon(self, s: Slice) -> bool:
        """Healthy, or down but back before a restart elsewhere could run."""
        if s.healthy:
            return True
        assert s.repair_at is not None and s.fault_kind is not None
        return s.repair_at - self.sim.now <= self.sim.lasting_after_s(s.fault_kind)

    def _top_up(self, job: Job) -> None:
        """Fence slices for `job` until it has one per replica: free or soon-repaired ones first, then the slices
        of the cheapest lower-priority victims (as many as exist now; later passes add more as they come free)."""
        sim = self.sim
        mine = {s for s in sim.slices if s.reserved_for is job and self._soon(s)}
        short = job.slices - len(mine)
        if short <= 0:
            return
        spare = sorted(self._available(job) - mine, key=lambda s: (not s.healthy, s.repair_at or 0.0, s.id))
        for s in spare[:short]:
            s.reserved_for = job
        short -= min(short, len(spare))
        if short <= 0:
            return
        victims = self._cheapest_cover(job, short)
        for victim in victims:
            for s in _slices_of(victim):
                s.reserved_for = job
            sim.deactivate(victim)
        self.victims.setdefault(job, set()).update(victims)

    def _clear_shared(self) -> None:
        """Evict lower-priority JobSets whose pods share a slice with a high-priority JobSet that is not running.

        Leader anti-affinity is scoped to one priority, so when a slice comes free that nobody fenced (a repair,
        a JobSet leaving) a high-priority leader and a lower-priority one can bind there in the same scheduling
        cycle, before this policy sees the slice. Neither JobSet can then fill the slice, and both would wait for
        waitForPodsReady (15 min). The lower one has not run on this attempt, so evicting it costs no progress."""
        sim = self.sim
        for s in sim.slices:
            jobs = {p.job for p in s.hosts if p is not None and p in p.job.pods}
            if len(jobs) < 2:
                continue
            top = max(jobs, key=lambda j: (j.priority, -j.id))
            if not sim.rec.is_high(top.priority) or top.running or top.state is not JobState.ADMITTED:
                continue
            lower = sorted((j for j in jobs if j.priority < top.priority and j.active), key=lambda j: j.id)
            if not lower:
                continue
            s.reserved_for = top
            for victim in lower:
                sim.note(f"hindsight: {victim.name} shares {s.pool} with {top.name}; evicted")
                sim.deactivate(victim)
            self.victims.setdefault(top, set()).update(lower)

    def _loss_chip_s(self, job: Job) -> float:
        """Progress since the last checkpoint, thrown away if the job stops now."""
        if job.run_start is None:
            return 0.0
        ran = self.sim.now - job.run_start
        kept = checkpointed_s(ran, self.sim.timing.checkpoint_interval_s)
        return (ran - kept) * job.slices * self.sim.chips_per_slice

    def _cheapest_cover(self, preemptor: Job, short: int) -> list[Job]:
        """Exact minimum-loss set of lower-priority JobSets freeing at least `short` healthy slices (0/1 cover,
        capped at `short`; ties: fewer victims, then lower priority, then id); when no set frees `short`, the
        cheapest one freeing the most."""
        held = {v for vs in self.victims.values() for v in vs}
        items: list[tuple[float, int, Job]] = []
        for j in self.sim.live:
            if j.state is not JobState.ADMITTED or j.priority >= preemptor.priority or j in held or not j.active:
                continue
            mine = _slices_of(j)
            if not mine or any(not s.healthy or s.reserved_for is not None or s.owner is not None for s in mine):
                continue  # (evicting a queued-capacity JobSet gives its slices back to GKE, not to the preemptor)
            if any(p is not None and p.job is not j for s in mine for p in s.hosts):
                continue  # a shared slice would not come free
            items.append((self._loss_chip_s(j), len(mine), j))
        items.sort(key=lambda it: (it[0], it[2].priority, it[2].id))
        best: list[tuple[float, int, list[Job]] | None] = [None] * (short + 1)
        best[0] = (0.0, 0, [])
        for loss, width, j in items:
            for have in range(short, -1, -1):
                cur = best[have]
                if cur is None:
                    continue
                to = min(short, have + width)
                cand = (cur[0] + loss, cur[1] + 1, [*cur[2], j])
                old = best[to]
                if old is None or (cand[0], cand[1]) < (old[0], old[1]):
                    best[to] = cand
        done = next((b for b in reversed(best) if b is not None), None)  # all of `short`, else as much as exists
        return done[2] if done is not None else []

    def _release(self, job: Job) -> None:
        sim = self.sim
        for s in sim.slices:
            if s.reserved_for is job:
                s.reserved_for = None
        for v in sorted(self.victims.pop(job), key=lambda j: j.id):
            if not v.active and v in sim.live:
                sim.reactivate(v)
        sim.kick()


def _slices_of(job: Job) -> set[Slice]:
    return {p.slice for p in job.all_pods() if p.slice is not None}
