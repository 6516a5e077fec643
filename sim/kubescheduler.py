"""kube-scheduler placement of JobSet pods with exclusive node-pool topology (pure decisions).

Models what matters for hotswap:
- the activeQ is ordered by pod priority, then creation time;
- a leader (completion index 0) needs a host in a pool with no pod of *another* job-key at its *own*
  priority (priority-scoped anti-affinity, JobSet >= v0.7); followers exist only once their leader is bound
  and are pinned to the leader's pool by nodeSelector;
- with ``preemption`` (PriorityClass preemptionPolicy PreemptLowerPriority) PostFilter evicts lower-priority
  pods one node at a time, picking the node whose victim has the lowest priority, then the latest start;
  a pod that already nominated a node does not preempt again while that node is being freed.
A host holds one pod (4 chips each). Pool choice among free pools: most free hosts, then lowest id.
Two policy hooks, off unless a policy sets them: a Kueue TAS assignment pins a leader to its child Job's slice
(`Job.topology`), and a slice tainted for one JobSet (`Slice.reserved_for`) takes only that JobSet's leaders.
Capacity ladder: a pod carries its Kueue flavor's nodeSelector (`Job.flavor`), and a queued flex-start slice takes
only the JobSet its ProvisioningRequest was made for (`Slice.owner`; the `cloud.google.com/gke-queued` taint).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sim.params import Capacity
from sim.state import Pod, PodPhase, Slice


@dataclass(frozen=True)
class Bind:
    pod: Pod
    slice: Slice
    host: int


@dataclass(frozen=True)
class Preempt:
    preemptor: Pod
    victim: Pod
    slice: Slice
    host: int


Decision = Bind | Preempt


def _pod_order(p: Pod) -> tuple[int, float, int]:
    return (-p.priority, p.created, p.uid)


def _anti_affinity_ok(pod: Pod, s: Slice, cycle: dict[int, list[Pod]], nominated: dict[tuple[int, int], Pod]) -> bool:
    """Leader rule: no pod of another job-key with the same priority in the pool, counting this cycle's binds and
    the pods nominated to the pool's hosts. kube-scheduler filters a pod as if every nominated pod of equal or
    higher priority already ran on its nominated node (framework `RunFilterPluginsWithNominatedPods`), so two
    leaders of one JobSet cannot both preempt their way into the same pool."""
    hosts = len(s.hosts)
    waiting = (holder for h in range(hosts) if (holder := nominated.get((s.id, h))) is not None and holder is not pod)
    return all(
        other is None or other.job_key == pod.job_key or other.priority != pod.priority
        for other in (*s.hosts, *cycle.get(s.id, ()), *waiting)
    )


def _capacity_ok(pod: Pod, s: Slice) -> bool:
    """The flavor's nodeSelector and the queued-provisioning taint (always true outside the capacity ladder)."""
    if s.capacity is None:
        return True
    if s.capacity is Capacity.QUEUED:
        return s.owner is pod.job
    return pod.job.flavor is None or pod.job.flavor is s.capacity


def _leader_pools(
    pod: Pod, candidates: Iterable[Slice], cycle: dict[int, list[Pod]], nominated: dict[tuple[int, int], Pod]
) -> list[Slice]:
    """The candidates a leader may go to: schedulable, not tainted for another JobSet, anti-affinity met."""
    return [
        s
        for s in candidates
        if s.schedulable
        and (s.reserved_for is None or s.reserved_for is pod.job)
        and _capacity_ok(pod, s)
        and _anti_affinity_ok(pod, s, cycle, nominated)
    ]


def _leader_slice(pod: Pod) -> Slice | None:
    for p in pod.job.pods:
        if p.child == pod.child and p.index == 0 and p.attempt == pod.attempt:
            if p.phase in (PodPhase.STARTING, PodPhase.RUNNING) and p.slice is not None:
                return p.slice
            return None
    return None


def schedule(pending: Iterable[Pod], slices: Sequence[Slice], preemption: bool) -> list[Decision]:
    """One scheduling cycle over all pending pods. Does not mutate state."""
    taken: set[tuple[int, int]] = set()
    # Nominations reserve a host against lower-priority pods (and against peers later in the queue).
    nominated: dict[tuple[int, int], Pod] = {}
    queue = sorted(pending, key=_pod_order)
    for p in queue:
        if p.nominated is not None and p.nominated[0].schedulable:
            nominated[(p.nominated[0].id, p.nominated[1])] = p
    decisions: list[Decision] = []
    # Slices with a free host at the start of the cycle, in fleet order: binds only take hosts away, and
    # `free_hosts` still checks each one.
    open_slices = [s for s in slices if None in s.hosts]
    victims: set[int] = set()
    cycle: dict[int, list[Pod]] = {}  # pods bound in this cycle, by slice id
    # Empty slices by id. While nothing is nominated, an empty slice untouched this cycle has the most free hosts
    # a slice can have (all slices have as many hosts) and meets anti-affinity, so the lowest-id one a leader may
    # use is the slice the full search would pick: on an empty fleet each leader then costs O(1), not O(slices).
    uniform = len({len(s.hosts) for s in slices}) <= 1
    empty = sorted((s for s in open_slices if all(p is None for p in s.hosts)), key=lambda s: s.id) if uniform else []
    first_untouched = 0

    def lowest_empty(pod: Pod) -> Slice | None:
        nonlocal first_untouched
        while first_untouched < len(empty) and empty[first_untouched].id in cycle:
            first_untouched += 1  # a bind this cycle: never empty again within it
        for s in itertools.islice(empty, first_untouched, None):
            if (
                s.id not in cycle
                and s.schedulable
                and (s.reserved_for is None or s.reserved_for is pod.job)
                and _capacity_ok(pod, s)
            ):
                return s
        return None

    def bind(pod: Pod, s: Slice, h: int) -> None:
        taken.add((s.id, h))
        cycle.setdefault(s.id, []).append(pod)
        decisions.append(Bind(pod, s, h))

    def free_hosts(s: Slice, pod: Pod) -> list[int]:
        out = []
        for h, occupant in enumerate(s.hosts):
            if occupant is not None or (s.id, h) in taken:
                continue
            holder = nominated.get((s.id, h))
            if holder is not None and holder is not pod and holder.priority >= pod.priority:
                continue
            out.append(h)
        return out

    for pod in queue:
        if pod.nominated is not None and pod.nominated[0].schedulable:
            s, h = pod.nominated
            # The nominated node is only tried first: the pod still passes every filter there (anti-affinity
            # included) before it binds, else it is scheduled afresh.
            if pod.index != 0 or _anti_affinity_ok(pod, s, cycle, nominated):
                if s.hosts[h] is None and (s.id, h) not in taken:
                    bind(pod, s, h)
                    continue
                if any(o is not None and o.phase is PodPhase.TERMINATING for o in s.hosts):
                    continue  # wait for the victims it already chose
            elif nominated.get((s.id, h)) is pod:
                del nominated[(s.id, h)]
        if pod.index == 0:
            pinned = pod.job.topology.get(pod.child) if pod.job.topology is not None else None
            fresh = lowest_empty(pod) if pinned is None and not nominated else None
            if fresh is not None:
                bind(pod, fresh, free_hosts(fresh, pod)[0])
                continue
            # Only a slice with a free host can take the leader without preemption, so the filters run on those
            # first (on a full fleet they are few: without this every pending leader filters every slice).
            pools = _leader_pools(pod, [pinned] if pinned is not None else open_slices, cycle, nominated)
            if preemption and not any(free_hosts(s, pod) for s in pools):
                pools = _leader_pools(pod, [pinned] if pinned is not None else slices, cycle, nominated)
        else:
            leader_pool = _leader_slice(pod)
            if leader_pool is None:
                continue  # follower rejected by the JobSet webhook until the leader is bound
            pools = [leader_pool] if leader_pool.schedulable else []
        best: tuple[int, int, Slice, int] | None = None
        for s in pools:
            hosts = free_hosts(s, pod)
            if hosts and (best is None or (-len(hosts), s.id) < (best[0], best[1])):
                best = (-len(hosts), s.id, s, hosts[0])
        if best is not None:
            bind(pod, best[2], best[3])
            continue
        if not preemption:
            continue
        choice: tuple[tuple[int, float, int, int], Slice, int, Pod] | None = None
        for s in pools:
            for h, occupant in enumerate(s.hosts):
                if (
                    occupant is None
                    or occupant.phase is PodPhase.TERMINATING
                    or occupant.priority >= pod.priority
                    or occupant.uid in victims
                    or (s.id, h) in taken
                ):
                    continue
                holder = nominated.get((s.id, h))
                if holder is not None and holder.priority >= pod.priority:
                    continue
                started = occupant.running_at if occupant.running_at is not None else occupant.created
                key = (occupant.priority, -started, s.id, h)
                if choice is None or key < choice[0]:
                    choice = (key, s, h, occupant)
        if choice is not None:
            _, s, h, victim = choice
            victims.add(victim.uid)
            nominated[(s.id, h)] = pod
            decisions.append(Preempt(pod, victim, s, h))
    return decisions
