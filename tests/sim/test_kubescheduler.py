"""kube-scheduler model: the empty-slice fast path picks what the full search would."""

from __future__ import annotations

import itertools

from sim import kubescheduler
from sim.params import JobClass
from sim.state import Job, Pod, PodPhase, Slice

_uid = itertools.count(1)


def _slices(n: int, hosts: int = 4) -> list[Slice]:
    return [Slice(id=i, pool=f"pool-{i}", hosts=[None] * hosts) for i in range(n)]


def _leader(job_id: int, priority: int, created: float = 0.0) -> Pod:
    cls = JobClass(name=f"c{priority}", priority=priority, slices=1, population=1, mean_duration_h=1.0)
    job = Job(id=job_id, name=f"j{job_id}", cls=cls, work_s=1.0, created=created)
    pod = Pod(job=job, attempt=0, child=0, index=0, created=created, uid=next(_uid))
    job.pods = [pod]
    return pod


def _binds(decisions: list[kubescheduler.Decision]) -> list[tuple[str, int, int]]:
    return [(d.pod.job.name, d.slice.id, d.host) for d in decisions if isinstance(d, kubescheduler.Bind)]


def test_leaders_fill_empty_slices_in_id_order_skipping_slices_tainted_for_others() -> None:
    slices = _slices(4)
    other = _leader(99, 5)
    slices[1].reserved_for = other.job
    leaders = [_leader(i, 10, created=float(i)) for i in range(3)]
    assert _binds(kubescheduler.schedule(leaders, slices, preemption=False)) == [
        ("j0", 0, 0),
        ("j1", 2, 0),
        ("j2", 3, 0),
    ]


def test_once_no_slice_is_empty_a_lower_leader_takes_the_slice_with_most_free_hosts() -> None:
    slices = _slices(3)
    busy = _leader(50, 10)
    busy.phase, busy.slice, busy.host = PodPhase.RUNNING, slices[0], 0
    slices[0].hosts[0] = busy
    for s in slices[1:]:
        s.hosts[0] = s.hosts[1] = _leader(60 + s.id, 10)
    # No slice is empty: slice 0 has 3 free hosts, slices 1 and 2 have 2 each. The priority-10 leader cannot share
    # a slice with another JobSet's priority-10 pods; the priority-1 leader can, and takes the freest slice.
    high, low = _leader(1, 10), _leader(2, 1, created=1.0)
    assert _binds(kubescheduler.schedule([high, low], slices, preemption=False)) == [("j2", 0, 1)]


def test_a_nomination_turns_the_fast_path_off_and_is_honoured() -> None:
    slices = _slices(2)
    nominee = _leader(1, 100)
    nominee.nominated = (slices[0], 0)
    lower = _leader(2, 10, created=1.0)
    # The nominee binds its nominated host; the lower leader may not take a host nominated for a higher pod, and
    # shares slice 0 with a different priority only if it has the most free hosts: slice 1 (4) beats slice 0 (3).
    assert _binds(kubescheduler.schedule([lower, nominee], slices, preemption=False)) == [
        ("j1", 0, 0),
        ("j2", 1, 0),
    ]
