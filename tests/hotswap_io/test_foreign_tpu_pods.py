"""A slice used by TPU work that is not a JobSet's is not spare.

Scenario of test_end_to_end (`high` loses a host of p0, `low` runs on v0) plus a healthy slice s0. Free, s0 covers
`high`'s deficit and nobody is held. Used by a Kueue-admitted `batch/v1` Job's pods (no JobSet label, another
namespace), it is not free: the reconciler must hold `low` instead of waiting for a slice that never frees.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from testkit.apiserver import FakeApiServer

from .cluster import (
    HOSTS_PER_SLICE,
    NS,
    PODS,
    WORKLOADS,
    add_slices,
    base_cluster,
    evict_pods_on,
    fail_node,
    run_jobset,
)
from .conftest import ClientFactory
from .test_end_to_end import LOW, started

pytestmark = pytest.mark.timeout(30)


def batch_tpu_pod(name: str, node: str) -> dict[str, object]:
    return {
        "metadata": {
            "name": name,
            "namespace": "research",
            "labels": {"batch.kubernetes.io/job-name": "sweep", "kueue.x-k8s.io/queue-name": "research"},
        },
        "spec": {
            "nodeName": node,
            "containers": [{"name": "c", "image": "i", "resources": {"limits": {"google.com/tpu": "4"}}}],
        },
        "status": {"phase": "Running"},
    }


@pytest.fixture
async def cluster_with_spare(api: FakeApiServer) -> AsyncIterator[FakeApiServer]:
    base_cluster(api)
    add_slices(api, "p0", "p1", "v0", "s0")
    run_jobset(api, "high", ["p0", "p1"], 1000)
    run_jobset(api, "low", ["v0"], 10)
    fail_node(api, "p0-0", seconds_ago=60)
    evict_pods_on(api, "high", "p0")
    yield api


@pytest.mark.parametrize("spare_in_use", [False, True])
async def test_a_slice_used_by_a_tpu_job_of_no_jobset_is_not_spare(
    cluster_with_spare: FakeApiServer, make_client: ClientFactory, spare_in_use: bool
) -> None:
    api = cluster_with_spare
    if spare_in_use:
        for host in range(HOSTS_PER_SLICE):
            api.put(PODS, batch_tpu_pod(f"sweep-{host}", f"s0-{host}"))
    controller = await started(make_client, api)
    try:
        await controller.reconcile_once()
        low = api.get(WORKLOADS, LOW, NS)
        assert low is not None
        assert low["spec"]["active"] is (not spare_in_use)
    finally:
        await controller.stop_watches()
