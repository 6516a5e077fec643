"""Lease-based leader election against the fake API server."""

from __future__ import annotations

import asyncio

import pytest

from gke_tpu_priority.hotswap.kube.leader import LeaderElector, LeaseSettings
from gke_tpu_priority.hotswap.metrics import Metrics
from testkit.apiserver import FakeApiServer, Fault

from .conftest import ClientFactory
from .helpers import eventually

pytestmark = pytest.mark.timeout(20)

LEASES = "leases.coordination.k8s.io"


def settings(identity: str) -> LeaseSettings:
    return LeaseSettings(
        name="hotswap",
        namespace="hotswap-system",
        identity=identity,
        lease_duration=1.0,
        renew_deadline=0.6,
        retry_period=0.1,
    )


async def test_two_candidates_exactly_one_leads_and_standby_takes_over_on_release(
    api: FakeApiServer, make_client: ClientFactory
) -> None:
    a = LeaderElector(await make_client("a"), settings("a"), Metrics())
    b = LeaderElector(await make_client("b"), settings("b"), Metrics())
    tasks = [asyncio.create_task(a.run()), asyncio.create_task(b.run())]
    try:
        await eventually(lambda: a.is_leader() or b.is_leader())
        await asyncio.sleep(0.5)
        assert a.is_leader() != b.is_leader()
        leader, standby = (a, b) if a.is_leader() else (b, a)
        lease = api.get(LEASES, "hotswap", "hotswap-system")
        assert lease is not None and lease["spec"]["holderIdentity"] == leader.settings.identity
        # Renewals kept the lease; the standby never wrote it.
        standby_writes = [w for w in api.writes(standby.settings.identity) if w.resource == LEASES]
        assert standby_writes == []
        tasks[[a, b].index(leader)].cancel()
        await leader.release()
        await eventually(standby.is_leader, timeout=3)
        lease = api.get(LEASES, "hotswap", "hotswap-system")
        assert lease is not None and lease["spec"]["leaseTransitions"] == 1
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def test_partitioned_leader_fences_itself_and_reports_loss(
    api: FakeApiServer, make_client: ClientFactory
) -> None:
    lost: list[str] = []
    metrics_a = Metrics()
    a = LeaderElector(await make_client("a"), settings("a"), metrics_a, on_lost=lambda: lost.append("a"))
    b = LeaderElector(await make_client("b"), settings("b"), Metrics())
    task_a = asyncio.create_task(a.run())
    await eventually(a.is_leader)
    task_b = asyncio.create_task(b.run())
    try:
        # Partition the leader from the API: every lease call it makes fails.
        api.inject(Fault(resource=LEASES, identity="a", status=503, times=None))
        await eventually(lambda: not a.is_leader(), timeout=2)
        await eventually(lambda: bool(lost), timeout=2)
        assert task_a.done()
        assert metrics_a.registry.get_sample_value("hotswap_leader") == 0
        # The standby takes over only after the old lease expires (observed on its own clock).
        await eventually(b.is_leader, timeout=3)
    finally:
        for task in (task_a, task_b):
            task.cancel()
        await asyncio.gather(task_a, task_b, return_exceptions=True)


async def test_lease_written_with_micro_time_and_optimistic_concurrency(
    api: FakeApiServer, make_client: ClientFactory
) -> None:
    a = LeaderElector(await make_client("a"), settings("a"), Metrics())
    task = asyncio.create_task(a.run())
    try:
        await eventually(a.is_leader)
        await eventually(lambda: len(api.requests_for("update", LEASES)) >= 2)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    update = api.requests_for("update", LEASES)[0]
    assert update.method == "PUT"
    assert update.body["metadata"]["resourceVersion"]
    renew = update.body["spec"]["renewTime"]
    assert renew.endswith("Z") and len(renew.split(".")[1]) == 7  # six digits + "Z"


def test_invalid_timings_raise_instead_of_exiting() -> None:
    with pytest.raises(ValueError, match="leaseDuration > renewDeadline > retryPeriod"):
        LeaseSettings("l", "ns", "me", lease_duration=1, renew_deadline=2, retry_period=0.1)
