"""Leadership bounds writes, the Lease has its own client, releases do not wait for unrelated
caches, watches spread their reconnects and honour Retry-After, and the node -> pool memory stays bounded."""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, datetime, timedelta

import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from gke_tpu_priority.hotswap.config import LeaderElectionConfig
from gke_tpu_priority.hotswap.controller import Controller
from gke_tpu_priority.hotswap.kube.actuator import LeadershipLost, Result
from gke_tpu_priority.hotswap.kube.informer import Informer, api_exception, retry_after
from gke_tpu_priority.hotswap.kube.leader import LeaderElector, LeaseSettings
from gke_tpu_priority.hotswap.kube.resources import NODES
from gke_tpu_priority.hotswap.kube.snapshot import NODE_POOL_SLACK, SnapshotBuilder
from gke_tpu_priority.hotswap.metrics import Metrics
from gke_tpu_priority.hotswap.model import Node, Pod
from testkit.apiserver import FakeApiServer, Fault

from .cluster import JOBSETS, NS, WORKLOADS, add_slices, base_cluster, jobset, workload
from .conftest import ClientFactory
from .helpers import eventually
from .test_actuator import make_actuator, plan_of, release, seed_workload
from .test_end_to_end import CONFIG, KEYS

pytestmark = pytest.mark.timeout(30)


def lease_settings() -> LeaseSettings:
    return LeaseSettings("hotswap", "hotswap-system", "a", lease_duration=15, renew_deadline=10, retry_period=2)


def test_a_write_gets_at_most_the_time_left_on_the_lease() -> None:
    now = [100.0]
    elector = LeaderElector.__new__(LeaderElector)
    LeaderElector.__init__(elector, _NoApi(), lease_settings(), Metrics(), clock=lambda: now[0])  # type: ignore[arg-type]
    elector._become_leader()
    now[0] += 8.5  # renewals failing for 8.5 s: 1.5 s before the fence closes
    assert elector.is_leader() and elector.time_left() == pytest.approx(1.5)
    controller = Controller(CONFIG, _NoApi(), identity="a")  # type: ignore[arg-type]
    controller.elector = elector
    assert controller.write_timeout() == pytest.approx(1.5)  # not the 10 s request timeout
    now[0] += 5
    assert controller.write_timeout() == 0.0


async def test_a_write_that_could_not_finish_within_the_lease_is_not_sent(
    api: FakeApiServer, make_client: ClientFactory
) -> None:
    low = seed_workload(api, "low", {KEYS.held_by: "x", KEYS.op_id: "op-1"}, active=False)
    actuator = make_actuator(await make_client("r"))
    actuator._write_timeout = lambda: 0.2
    with pytest.raises(LeadershipLost):
        await actuator.execute(plan_of(release(low)))
    assert api.writes("r") == []
    # With time left, the write is bounded by it: a server slower than the lease's remainder is given up on.
    api.inject(Fault(verb="patch", resource=WORKLOADS, delay=3.0))
    actuator._write_timeout = lambda: 0.6
    (outcome,) = await actuator.execute(plan_of(release(low)))
    assert outcome.result is Result.FAILED and "Timeout" in outcome.detail


async def test_the_lease_has_a_client_of_its_own(make_client: ClientFactory) -> None:
    config = CONFIG.model_copy(update={"leader_election": LeaderElectionConfig(enabled=True)})
    api, lease_api = await make_client("r"), await make_client("r")
    controller = Controller(config, api, identity="r", lease_api=lease_api)
    assert controller.elector is not None and controller.elector._api.api_client is lease_api


async def test_watches_are_one_per_kind_whatever_the_namespaces(make_client: ClientFactory) -> None:
    """2N + 6 watches for N namespaces exhausted the 100-connection pool at N = 47; now it is 8 for any N."""
    config = CONFIG.model_copy(update={"namespaces": tuple(f"team-{i}" for i in range(60))})
    controller = Controller(config, await make_client("r"), identity="r")
    assert sum(len(group) for group in controller.informers.values()) == 8
    assert all(i.namespace is None for group in controller.informers.values() for i in group)


async def test_a_failing_pod_watch_does_not_stop_the_max_hold_backstop(
    api: FakeApiServer, make_client: ClientFactory
) -> None:
    base_cluster(api)
    add_slices(api, "v0")
    js = api.put(JOBSETS, jobset("low", 1, "p10"))
    held = workload(js, 10)
    held["spec"]["active"] = False
    long_ago = (datetime.now(UTC) - timedelta(days=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    held["metadata"]["annotations"] = {
        KEYS.held_by: f"{NS}/high/uid-high/0",
        KEYS.op_id: "op-1",
        KEYS.held_since: long_ago,
    }
    api.put(WORKLOADS, held)
    recent = workload(api.put(JOBSETS, jobset("mid", 1, "p10")), 10)
    recent["spec"]["active"] = False
    recent["metadata"]["annotations"] = {
        KEYS.held_by: f"{NS}/high/uid-high/0",
        KEYS.op_id: "op-1",
        KEYS.held_since: datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    api.put(WORKLOADS, recent)
    api.inject(Fault(resource="pods", status=403, times=None))  # RBAC or an outage: the pod cache never syncs
    controller = Controller(CONFIG, await make_client("r"), identity="r")
    task = asyncio.create_task(controller.run())
    try:
        await eventually(lambda: (api.get(WORKLOADS, "jobset-low", NS) or {})["spec"]["active"] is True, timeout=10)
        assert not controller.caches_ready()
        stored = api.get(WORKLOADS, "jobset-low", NS)
        assert stored is not None and KEYS.held_by not in stored["metadata"]["annotations"]
        still = api.get(WORKLOADS, "jobset-mid", NS)
        assert still is not None and still["spec"]["active"] is False  # within maxHold: waits for a full pass
    finally:
        controller.stop()
        await asyncio.gather(task, return_exceptions=True)


async def test_watch_timeouts_are_spread_between_t_and_2t(make_client: ClientFactory) -> None:
    informer = Informer(await make_client("r"), NODES, watch_timeout_seconds=300, rng=random.Random(3))
    draws = [informer.watch_timeout() for _ in range(200)]
    assert min(draws) >= 300 and max(draws) <= 600 and len(set(draws)) > 50


def test_retry_after_is_honoured_in_seconds_and_capped() -> None:
    assert retry_after(api_exception(429, "slow down", {"Retry-After": "7"})) == 7.0
    assert retry_after(api_exception(503, "", {"Retry-After": "86400"})) == 600.0
    assert retry_after(api_exception(503, "", {"Retry-After": "Wed, 21 Oct 2026 07:28:00 GMT"})) == 0.0
    assert retry_after(ApiException(status=500)) == 0.0


async def test_a_watch_waits_out_the_servers_retry_after(api: FakeApiServer, make_client: ClientFactory) -> None:
    api.put("nodes", {"metadata": {"name": "n1"}})
    api.inject(Fault(verb="list", resource="nodes", status=429, times=1, headers={"Retry-After": "1"}))
    informer = Informer(await make_client("r"), NODES)
    informer._backoff.base = informer._backoff.cap = 0.01
    task = asyncio.create_task(informer.run())
    try:
        loop = asyncio.get_running_loop()
        started = loop.time()
        await asyncio.wait_for(informer.wait_synced(), 5)
        assert loop.time() - started >= 1.0
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def test_the_node_pool_memory_is_bounded() -> None:
    builder = SnapshotBuilder(attribution_window=timedelta(minutes=10), clock=lambda: datetime.now(UTC))
    for i in range(NODE_POOL_SLACK + 500):  # spot and autoscaling churn: names come and go
        builder.on_node_event("ADDED", Node(name=f"gone-{i}", node_pool=f"pool-{i}"))
    live = Node(name="n0", node_pool="p0")
    builder.on_node_event("ADDED", live)
    on_deleted = Pod("ns", "p", "u", "train", node_name="gone-7")  # its node is gone: its pool is still needed
    snapshot = builder.assemble(nodes=[live], pods=[on_deleted], jobsets=[], workloads=[], cluster_queues=[])
    assert builder.node_pools == {"gone-7": "pool-7", "n0": "p0"}
    assert snapshot.pods[0].node_pool == "pool-7"


class _NoApi:
    """Stands in for an ApiClient where no request is made."""

    def __getattr__(self, name: str) -> object:
        raise AssertionError(f"unexpected API use: {name}")
