"""Quota of several ClusterQueues in one cohort (pure decisions; Kueue v0.19.2; the multi-team scenario).

Each ClusterQueue has a nominal quota. What it lends (`lendingLimit`, default all of it) goes to the cohort's
pool; the rest is its own. A workload fits when its ClusterQueue's usage stays within its own part, or the part
above comes out of the pool without exceeding it (and without exceeding `borrowingLimit` above nominal). With
one ClusterQueue and no limits this is the single-queue check: total usage within the fleet's quota.

Preemption (the platform's defaults, components/config/queues.py: withinClusterQueue LowerPriority,
reclaimWithinCohort LowerPriority): a pending workload may take lower-priority workloads of its own ClusterQueue,
and lower-priority workloads of *other* ClusterQueues only while those borrow (usage above nominal), and only
when the preemptor itself then fits within its nominal quota. Within-quota workloads of other teams are never
candidates: the premise of the hero controller. Candidates are ranked as Kueue's `candidatesOrdering` does:
other ClusterQueues' first, then lowest priority, then most recently admitted; removed greedily while they still
qualify until the preemptor fits, then added back in reverse while it still fits.
Left out: fair sharing's preemption strategies (the prod stack's cohort turns fair sharing on; its DRS ordering
is not modelled), borrowWithinCohort, hierarchical cohorts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from sim.params import Scenario
from sim.state import Job


@dataclass(frozen=True)
class Cohort:
    nominal: dict[str, int]
    """Nominal quota per ClusterQueue, chips."""
    lendable: dict[str, int]
    """lendingLimit per ClusterQueue, chips (its nominal when unset)."""
    borrow_limit: dict[str, int | None]
    """borrowingLimit per ClusterQueue, chips (None: unlimited)."""

    @classmethod
    def of(cls, scenario: Scenario, chips_per_slice: int) -> Cohort | None:
        """The scenario's cohort, or None for the single ClusterQueue of every other scenario."""
        if not scenario.cluster_queues:
            return None
        return cls(
            nominal={q.name: q.nominal_slices * chips_per_slice for q in scenario.cluster_queues},
            lendable={
                q.name: (q.nominal_slices if q.lending_limit_slices is None else q.lending_limit_slices)
                * chips_per_slice
                for q in scenario.cluster_queues
            },
            borrow_limit={
                q.name: None if q.borrowing_limit_slices is None else q.borrowing_limit_slices * chips_per_slice
                for q in scenario.cluster_queues
            },
        )

    def usage(self, jobs: Iterable[Job], chips_per_slice: int) -> dict[str, int]:
        """Chips each ClusterQueue has reserved."""
        used = dict.fromkeys(self.nominal, 0)
        for j in jobs:
            if j.quota_reserved:
                used[j.cls.queue] += j.slices * chips_per_slice
        return used

    def _own(self, q: str) -> int:
        return self.nominal[q] - self.lendable[q]

    def _pool_used(self, used: dict[str, int]) -> int:
        return sum(max(0, used[q] - self._own(q)) for q in used)

    def fits(self, used: dict[str, int], queue: str, need: int) -> bool:
        """Whether `need` more chips fit in `queue`, with `used` as each ClusterQueue's usage."""
        after = used[queue] + need
        limit = self.borrow_limit[queue]
        if limit is not None and after > self.nominal[queue] + limit:
            return False
        pool = sum(self.lendable.values())
        extra = max(0, after - self._own(queue)) - max(0, used[queue] - self._own(queue))
        return self._pool_used(used) + extra <= pool

    def borrowing(self, used: dict[str, int], queue: str) -> bool:
        return used[queue] > self.nominal[queue]

    def victims(
        self,
        w: Job,
        ranked: Sequence[Job],
        used: dict[str, int],
        chips_per_slice: int,
        also: Callable[[list[Job]], bool] | None = None,
    ) -> list[Job] | None:
        """Kueue's minimal victim set for `w` among `ranked` (admitted workloads), or None when none makes it fit.

        `also`: a further condition the set must meet (TAS: enough free domains after the victims leave)."""
        q = w.cls.queue
        need = w.slices * chips_per_slice

        def demand(j: Job) -> int:
            return j.slices * chips_per_slice

        def after(chosen: list[Job]) -> dict[str, int]:
            left = dict(used)
            for c in chosen:
                left[c.cls.queue] -= demand(c)
            return left

        def fits(chosen: list[Job]) -> bool:
            left = after(chosen)
            return self.fits(left, q, need) and (also is None or also(chosen))

        candidates = sorted(
            (c for c in ranked if c.priority < w.priority),
            key=lambda c: (c.cls.queue == q, c.priority, -(c.last_admitted_at or 0.0), c.id),
        )
        within_nominal = used[q] + need <= self.nominal[q]
        chosen: list[Job] = []
        for c in candidates:
            if fits(chosen):
                break
            # reclaimWithinCohort: only from a ClusterQueue that still borrows, and only for a preemptor that then
            # fits within its own nominal quota.
            if c.cls.queue != q and (not within_nominal or not self.borrowing(after(chosen), c.cls.queue)):
                continue
            chosen.append(c)
        if not fits(chosen):
            return None
        return fill_back(chosen, fits)


def fill_back(chosen: list[Job], fits: Callable[[list[Job]], bool]) -> list[Job]:
    """Kueue's fill-back: drop, newest first, every chosen victim the preemptor fits without."""
    for c in list(reversed(chosen)):
        rest = [x for x in chosen if x is not c]
        if fits(rest):
            chosen = rest
    return chosen
