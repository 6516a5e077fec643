"""`hero`: CoreWeave's kueue-hero-workload-controller on top of Kueue TAS (`kueue-tas`).

What it reproduces (github.com/coreweave/kueue-hero-workload-controller, docs/ARCHITECTURE.md, docs/PLAN.md):

- A hero (here: a high-priority JobSet) is stuck when Kueue reports a TAS no-fit (pkg/hero/stuck.go
  `IsStuckTASNoFit`: QuotaReserved=False with reason TopologyPlacementFailed); a hero pending on quota is not.
- One drain cluster-wide, heroes in `NextHero` order: priority, then age, then name (pkg/drain/order.go).
- Domain selection (pkg/selection/select.go `SelectDomains`, `packWithinParent`): domains holding a workload at or
  above the hero's priority are infeasible; each feasible domain costs the sum of its victims'
  `Cost` (pkg/selection/cost.go: 0.7 p/p_hero + 0.2 pods/(pods + hero pods) + 0.1 run/(run + 6 h)); the cheapest
  domains (empty ones cost 0) are picked until the hero's demand is covered, ties by domain name.
- The drain taints the selected domains (only the hero tolerates them), suspends the victims with
  Workload.spec.active=false and reactivates each as soon as Kueue has evicted it, so it requeues outside the taint.
- Head-of-line blocking (pkg/controller/drain/reconciler.go `Reconcile`): only the head of `NextHero` may start a
  drain; when it has no feasible domains it retries after 1 min (`requeueNoFeasible`) and nobody else drains.
- Wake-up delays: Kueue retries a parked workload only on Kueue events, and victim pods finishing their
  termination is not one (docs/PLAN.md sec. 4), so the drained hero is not admitted before hero's scheduling
  nudge; the drain controller checks its victims every 15 s (`VICTIM_POLL_S`) and bumps the nudge at once when
  they are gone. The 2-minute re-bump is not needed here (the simulated Kueue retries on every later event), and
  the ~3 min channel stall after bursts of node writes is left out (in hero's favour).
- The janitor (pkg/controller/janitor/reconciler.go) ends the drain when the hero's pods are all Running, it
  finished, was deactivated, was placed elsewhere, or after drainTimeout = 30 min (pkg/config/config.go `Default`),
  with no retry backoff; teardown untaints and reactivates every victim still suspended.

Modelled as: the hero's deployment premise (PLAN.md sec. 1: the workloads in the way are within-quota workloads of
other ClusterQueues, which Kueue cannot preempt), so Kueue's own preemption does not fire for topology here
(`preempt_for_topology=False`; in the multi-team scenario, `sim.cohort`, the premise holds by itself);
failures are handled by the `kueue-tas` node controller (NodeFailures eviction and requeue), after which the
requeued hero is stuck on no-fit and the drain starts. A topology domain is one slice
(the hero's required level is the node pool); the cross-ClusterQueue cost multiplier is the same for every victim
here, so it is left out. Left out: dry-run, non-blocking pod labels, multi-level parent grouping, and the 30 s
poll's jitter.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from sim.kueue import LADDER, AdmissionPlan
from sim.params import Capacity
from sim.policies.kueue_tas import KueueTASPolicy
from sim.state import Job, JobState, Slice
from sim.tas import free_domains

DRAIN_TIMEOUT_S = 30 * 60.0
"""drainTimeout default (pkg/config/config.go)."""
POLL_S = 30.0
"""The drain controller's poll while a hero is stuck (docs/ARCHITECTURE.md: 'the 30s poll')."""
VICTIM_POLL_S = 15.0
"""The drain controller's requeue while its victims' pods are still on the drained domains."""
NO_FEASIBLE_RETRY_S = 60.0
"""`requeueNoFeasible`: the head hero's retry when no domain set is feasible; nobody behind it drains meanwhile."""
WEIGHTS = (0.7, 0.2, 0.1)
"""Cost weights: priority, pod count, runtime (pkg/config/config.go `Default`)."""
RUNTIME_HALF_LIFE_S = 6 * 3600.0


@dataclass
class Drain:
    hero: Job
    slices: list[Slice]
    victims: set[Job]
    started: float
    ended: float | None = None
    reason: str = ""
    nudged: bool = False
    """Hero's scheduling nudge bumped: Kueue retries the parked hero (its victims' pods are gone)."""


class HeroPolicy(KueueTASPolicy):
    name = "hero"

    def __init__(self) -> None:
        super().__init__(preempt_for_topology=False)
        self.drain: Drain | None = None
        self.drains: list[Drain] = []
        self._pass_due: float | None = None
        self._blocked_until = 0.0  # head-of-line: the head hero had no feasible domains; nobody drains until then

    def plan_admission(self, now: float) -> AdmissionPlan:
        """Kueue TAS, except that a hero whose drain has not nudged Kueue yet stays parked (wake-up delay)."""
        drain = self.drain
        if drain is None or drain.nudged:
            return super().plan_admission(now)
        return self._plan([j for j in self.sim.live if j is not drain.hero], now)

    def on_change(self) -> None:
        super().on_change()
        if self.drain is not None or self._stuck():
            self._request(self.sim.timing.reconciler_reaction_s)

    def _request(self, delay: float) -> None:
        due = self.sim.now + delay
        if self._pass_due is not None and self.sim.now <= self._pass_due <= due:
            return
        self._pass_due = due
        self.sim.loop.at(due, lambda: self._pass(due))

    # ------------------------------------------------------------------ the two loops
    def _pass(self, due: float) -> None:
        if self._pass_due != due:
            return  # superseded by an earlier request
        self._pass_due = None
        if self.drain is not None:
            self._janitor(self.drain)
        if self.drain is None:
            self._start_drain()
        if self.drain is not None or self._stuck():
            self._request(POLL_S)

    def _quota_fits(self, job: Job) -> bool:
        sim = self.sim
        need = job.slices * sim.chips_per_slice
        if sim.cohort is not None:
            return sim.cohort.fits(sim.cohort.usage(sim.live, sim.chips_per_slice), job.cls.queue, need)
        used = sum(j.slices * sim.chips_per_slice for j in sim.live if j.quota_reserved)
        return used + need <= sim.quota_chips

    def _drain_flavor(self, job: Job) -> Capacity | bool | None:
        """Where a drain could place `job`: on a capacity ladder, the first flavor with domains (reservation,
        spot) whose quota fits while no flavor admits it (False when it is not stuck: quota fits nowhere, or the
        queued flavor admits it without domains); without a ladder None when quota fits, else False."""
        sim = self.sim
        fleet = sim.scenario.fleet
        if not fleet.ladder:
            return None if self._quota_fits(job) else False
        need = job.slices * sim.chips_per_slice
        used = dict.fromkeys(LADDER, 0)
        for j in sim.live:
            if j.quota_reserved and j.flavor is not None:
                used[j.flavor] += j.slices * sim.chips_per_slice
        fits = [c for c in LADDER if used[c] + need <= fleet.slices_of(c) * sim.chips_per_slice]
        if not fits or Capacity.QUEUED in fits:
            return False
        free = free_domains(sim.live, sim.slices, job)
        if any(sum(1 for s in free if s.capacity is c) >= job.slices for c in fits):
            return False  # Kueue admits it there on its next cycle
        return fits[0]

    def _stuck(self) -> list[Job]:
        """Heroes Kueue left pending on topology (quota fits, no free domain), in NextHero order."""
        sim = self.sim
        out = []
        for j in sim.live:
            if not sim.rec.is_high(j.priority) or j.state is not JobState.QUEUED or not j.active:
                continue
            if j.requeue_at > sim.now:
                continue
            flavor = self._drain_flavor(j)
            if flavor is False:
                continue
            if flavor is not None or len(free_domains(sim.live, sim.slices, j)) < j.slices:
                out.append(j)
        return sorted(out, key=lambda j: (-j.priority, j.created, j.name))

    def _start_drain(self) -> None:
        sim = self.sim
        if sim.now < self._blocked_until:
            return
        for hero in self._stuck()[:1]:  # only the head of NextHero may drain
            chosen = self._select(hero)
            if chosen is None:
                # NoFeasibleDomains: the head retries after requeueNoFeasible, and nobody behind it drains.
                self._blocked_until = sim.now + NO_FEASIBLE_RETRY_S
                self._request(NO_FEASIBLE_RETRY_S)
                return
            slices, victims = chosen
            drain = Drain(hero, slices, victims, sim.now)
            self.drain = drain
            self.drains.append(drain)
            sim.rec.count("hero_drains")
            sim.rec.count("hero_drain_victims", len(victims))
            for s in slices:
                s.reserved_for = hero
            sim.note(f"hero drain for {hero.name}: {[s.pool for s in slices]}, victims {[v.name for v in victims]}")
            for v in sorted(victims, key=lambda j: j.id):
                sim.deactivate(v)
            sim.loop.after(VICTIM_POLL_S, partial(self._victim_poll, drain))
            sim.kick()
            return

    def _victim_poll(self, drain: Drain) -> None:
        """The drain's 15 s requeue: once no victim pod is left on the drained domains, bump the nudge."""
        if self.drain is not drain or drain.nudged:
            return
        hero = drain.hero
        if any(p is not None and p.job is not hero for s in drain.slices for p in s.hosts):
            self.sim.loop.after(VICTIM_POLL_S, partial(self._victim_poll, drain))
            return
        drain.nudged = True
        self.sim.note(f"hero nudges Kueue for {hero.name}")
        self.sim.kick()

    def _select(self, hero: Job) -> tuple[list[Slice], set[Job]] | None:
        sim = self.sim
        holders: dict[int, list[Job]] = {}
        for j in sim.live:
            if j.quota_reserved and j.topology is not None:
                for s in j.topology.values():
                    holders.setdefault(s.id, []).append(j)
        hero_pods = hero.slices * sim.scenario.fleet.hosts_per_slice
        flavor = self._drain_flavor(hero)  # on a ladder: the domains of the flavor Kueue would give it
        candidates: list[tuple[float, str, Slice, list[Job]]] = []
        for s in sim.slices:
            if not s.schedulable or s.reserved_for is not None or s.capacity is Capacity.QUEUED:
                continue
            if isinstance(flavor, Capacity) and s.capacity is not flavor:
                continue
            occupants = holders.get(s.id, [])
            if any(o.priority >= hero.priority for o in occupants):
                continue  # another hero (or an equal) lives here: never stack heroes
            cost = sum(self._cost(o, hero, hero_pods) for o in occupants)
            candidates.append((cost, s.pool, s, occupants))
        if len(candidates) < hero.slices:
            return None
        candidates.sort(key=lambda c: (c[0], c[1]))
        picked = candidates[: hero.slices]
        return [c[2] for c in picked], {o for c in picked for o in c[3]}

    def _cost(self, victim: Job, hero: Job, hero_pods: int) -> float:
        w_p, w_n, w_r = WEIGHTS
        pods = victim.slices * self.sim.scenario.fleet.hosts_per_slice
        running = self.sim.now - victim.run_start if victim.run_start is not None else 0.0
        return (
            w_p * min(victim.priority / hero.priority, 1.0)
            + w_n * pods / (pods + hero_pods)
            + w_r * running / (running + RUNTIME_HALF_LIFE_S)
        )

    def _janitor(self, drain: Drain) -> None:
        sim = self.sim
        for v in drain.victims:
            if v.state is JobState.HELD and not v.active:
                sim.reactivate(v)  # evicted by Kueue: requeue it outside the taint
        hero = drain.hero
        mine = {s.id for s in drain.slices}
        if hero not in sim.live:
            self._end(drain, "finished")
        elif not hero.active:
            self._end(drain, "abandoned")
        elif hero.running:
            self._end(drain, "placed")
        elif hero.quota_reserved and hero.topology is not None and not {s.id for s in hero.topology.values()} & mine:
            self._end(drain, "placed elsewhere")
        elif sim.now - drain.started >= DRAIN_TIMEOUT_S:
            self._end(drain, "timeout")

    def _end(self, drain: Drain, reason: str) -> None:
        sim = self.sim
        drain.ended, drain.reason = sim.now, reason
        sim.rec.count("hero_drains_ended_" + reason.replace(" ", "_"))
        for s in drain.slices:
            if s.reserved_for is drain.hero:
                s.reserved_for = None
        for v in drain.victims:
            if not v.active:
                sim.reactivate(v)
        sim.note(f"hero drain for {drain.hero.name} ends: {reason}")
        self.drain = None
        sim.kick()
