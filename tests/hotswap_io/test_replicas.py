"""Whole controllers (`Controller.run`) with leader election: one writer, fencing on loss, crash recovery."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest

from gke_tpu_priority.hotswap.annotations import AnnotationKeys
from gke_tpu_priority.hotswap.config import HotswapConfig, LeaderElectionConfig
from gke_tpu_priority.hotswap.controller import Controller, ExitCode
from testkit.apiserver import FakeApiServer, Fault

from .cluster import (
    NS,
    WORKLOADS,
    add_slices,
    base_cluster,
    evict_pods_on,
    fail_node,
    jobset_restarted,
    kueue_deactivated,
    recover_node,
    run_jobset,
)
from .conftest import ClientFactory
from .helpers import eventually

pytestmark = pytest.mark.timeout(40)

LEASES = "leases.coordination.k8s.io"
CONFIG = HotswapConfig(
    leader_election=LeaderElectionConfig(
        lease_namespace="hotswap-system",
        lease_duration=timedelta(seconds=2),
        renew_deadline=timedelta(seconds=1),
        retry_period=timedelta(milliseconds=200),
    ),
    debounce=timedelta(milliseconds=20),
    resync_period=timedelta(seconds=1),
    writes_per_second=100,
    write_burst=100,
)
KEYS = AnnotationKeys(CONFIG.annotation_domain)
LOW, HIGH = "jobset-low", "jobset-high"


def failed_cluster(api: FakeApiServer) -> None:
    base_cluster(api)
    add_slices(api, "p0", "p1", "v0")
    run_jobset(api, "high", ["p0", "p1"], 1000)
    run_jobset(api, "low", ["v0"], 10)
    fail_node(api, "p0-0", seconds_ago=60)
    evict_pods_on(api, "high", "p0")


def workload_writes(api: FakeApiServer, identity: str | None = None) -> list[str]:
    return [f"{r.name}" for r in api.writes(identity) if r.resource == WORKLOADS]


def low_workload(api: FakeApiServer) -> dict[str, object]:
    obj = api.get(WORKLOADS, LOW, NS)
    assert obj is not None
    return obj


class Replica:
    """One reconciler process: its own client, controller and task."""

    def __init__(self, controller: Controller) -> None:
        self.controller = controller
        self.task: asyncio.Task[ExitCode] = asyncio.create_task(controller.run())

    async def stop(self) -> ExitCode | None:
        self.controller.stop()
        try:
            async with asyncio.timeout(5):
                return await self.task
        except TimeoutError:
            self.task.cancel()
            return None


@pytest.fixture
async def replicas(make_client: ClientFactory) -> AsyncIterator[list[Replica]]:
    started: list[Replica] = []
    yield started
    for replica in started:
        if not replica.task.done():
            await replica.stop()


async def start(make_client: ClientFactory, replicas: list[Replica], identity: str) -> Replica:
    controller = Controller(CONFIG, await make_client(identity), identity=identity, watch_timeout_seconds=30)
    replica = Replica(controller)
    replicas.append(replica)
    return replica


async def test_two_replicas_only_the_leader_writes(
    api: FakeApiServer, make_client: ClientFactory, replicas: list[Replica]
) -> None:
    failed_cluster(api)
    a = await start(make_client, replicas, "a")
    b = await start(make_client, replicas, "b")
    await eventually(lambda: low_workload(api)["spec"]["active"] is False, timeout=10)  # type: ignore[index]
    await asyncio.sleep(1.0)  # a few more passes of both replicas
    leader = "a" if a.controller.is_leader() else "b"
    standby = "b" if leader == "a" else "a"
    assert a.controller.is_leader() != b.controller.is_leader()
    assert workload_writes(api, standby) == []
    assert [w for w in api.writes(standby) if w.resource != LEASES] == []
    assert sorted(set(workload_writes(api, leader))) == [HIGH, LOW]
    # One hold, never two: hold-count stays at 1 across the repeated passes.
    assert low_workload(api)["metadata"]["annotations"][KEYS.hold_count] == "1"  # type: ignore[index]
    # Both replicas are ready (caches synced); only one reports leadership in its metrics.
    assert a.controller.caches_ready() and b.controller.caches_ready()
    leaders = [r.controller.metrics.registry.get_sample_value("hotswap_leader") for r in (a, b)]
    assert sorted(v or 0.0 for v in leaders) == [0.0, 1.0]


async def test_leader_partitioned_mid_operation_stops_writing_and_exits(
    api: FakeApiServer, make_client: ClientFactory, replicas: list[Replica]
) -> None:
    base_cluster(api)
    add_slices(api, "p0", "p1", "v0")
    run_jobset(api, "high", ["p0", "p1"], 1000)
    run_jobset(api, "low", ["v0"], 10)
    a = await start(make_client, replicas, "a")
    await eventually(a.controller.is_leader, timeout=5)
    await eventually(a.controller.caches_ready, timeout=5)
    # Partition the leader from the Lease and slow its writes, then cause the failure.
    api.inject(Fault(resource=LEASES, identity="a", status=503, times=None))
    api.inject(Fault(verb="patch", resource=WORKLOADS, identity="a", delay=1.5, times=None))
    fail_node(api, "p0-0", seconds_ago=60)
    evict_pods_on(api, "high", "p0")
    async with asyncio.timeout(10):
        code = await a.task
    assert code is ExitCode.LEADERSHIP_LOST
    # After its renew deadline it sent at most the one write already in flight, then nothing.
    assert len(workload_writes(api, "a")) <= 1
    b = await start(make_client, replicas, "b")
    await eventually(lambda: low_workload(api)["spec"]["active"] is False, timeout=10)  # type: ignore[index]
    assert b.controller.is_leader()
    assert low_workload(api)["metadata"]["annotations"][KEYS.hold_count] == "1"  # type: ignore[index]


@pytest.mark.parametrize("writes_before_crash", [0, 1, 2])
async def test_crash_at_each_actuation_step_then_restart_converges(
    api: FakeApiServer, make_client: ClientFactory, replicas: list[Replica], writes_before_crash: int
) -> None:
    failed_cluster(api)
    # The first process lands `writes_before_crash` Workload writes, then "dies": nothing more gets through.
    landed: list[str] = []

    def crash_after_k(server: FakeApiServer, key: str, kind: str, obj: dict[str, object]) -> None:
        if key == WORKLOADS and kind == "MODIFIED":
            landed.append(str(obj["metadata"]["name"]))  # type: ignore[index]
            if len(landed) == writes_before_crash:
                server.inject(Fault(identity="first", status=500, times=None))

    if writes_before_crash == 0:
        api.inject(Fault(identity="first", verb="patch", status=500, times=None))
    api.write_hooks.append(crash_after_k)
    first = await start(make_client, replicas, "first")
    await eventually(
        lambda: len(landed) == writes_before_crash and len(api.requests_for("patch", WORKLOADS)) > 0, timeout=10
    )
    first.task.cancel()
    await asyncio.gather(first.task, return_exceptions=True)
    api.write_hooks.clear()
    assert len(landed) == writes_before_crash

    # The replacement waits for the dead leader's lease to expire, then finishes the job.
    second = await start(make_client, replicas, "second")
    await eventually(lambda: low_workload(api)["spec"]["active"] is False, timeout=10)  # type: ignore[index]
    await eventually(lambda: KEYS.op in (api.get(WORKLOADS, HIGH, NS) or {})["metadata"].get("annotations", {}))
    await asyncio.sleep(0.5)
    assert low_workload(api)["metadata"]["annotations"][KEYS.hold_count] == "1"  # type: ignore[index]

    # Kueue evicts, high restarts elsewhere, p0 is repaired: the victim is released, nothing stays held.
    kueue_deactivated(api, "low")
    jobset_restarted(api, "high", ["p1", "v0"], 1000, attempt=1)
    for host in range(4):
        recover_node(api, f"p0-{host}", minutes_ago=10)
    await eventually(lambda: low_workload(api)["spec"]["active"] is True, timeout=10)  # type: ignore[index]
    held = [w for w in api.list_objects(WORKLOADS) if KEYS.held_by in w["metadata"].get("annotations", {})]
    assert held == []
    await eventually(lambda: KEYS.op not in (api.get(WORKLOADS, HIGH, NS) or {})["metadata"].get("annotations", {}))
    assert second.controller.is_leader()


async def test_sigterm_stops_cleanly_and_hands_the_lease_over(
    api: FakeApiServer, make_client: ClientFactory, replicas: list[Replica]
) -> None:
    base_cluster(api)
    a = await start(make_client, replicas, "a")
    await eventually(a.controller.is_leader, timeout=5)
    b = await start(make_client, replicas, "b")
    await eventually(b.controller.caches_ready, timeout=5)
    assert await a.stop() is ExitCode.OK
    lease = api.get(LEASES, CONFIG.leader_election.lease_name, "hotswap-system")
    assert lease is not None and lease["spec"]["holderIdentity"] in ("", None, "b")
    # Released rather than expired: the standby takes over well within one lease duration.
    await eventually(b.controller.is_leader, timeout=1.5)


async def test_api_outage_during_actuation_backs_off_then_converges(
    api: FakeApiServer, make_client: ClientFactory, replicas: list[Replica]
) -> None:
    failed_cluster(api)
    outage = api.inject(Fault(verb="patch", resource=WORKLOADS, status=503, times=None))
    a = await start(make_client, replicas, "a")
    await eventually(lambda: len(api.requests_for("patch", WORKLOADS)) >= 1, timeout=10)
    await asyncio.sleep(2.0)
    attempts = len(api.requests_for("patch", WORKLOADS))
    # Resync is 1 s and failed passes back off: a handful of attempts, not a tight loop.
    assert 1 <= attempts <= 8
    assert a.controller.metrics.registry.get_sample_value("hotswap_reconciles_total", {"result": "partial"})
    api.faults.remove(outage)
    await eventually(lambda: low_workload(api)["spec"]["active"] is False, timeout=10)  # type: ignore[index]
    assert low_workload(api)["metadata"]["annotations"][KEYS.hold_count] == "1"  # type: ignore[index]
