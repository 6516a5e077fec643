"""The controller runs a pass at the plan's `next_wakeup`, with no watch event and long before the resync."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from gke_tpu_priority.hotswap.config import HotswapConfig, LeaderElectionConfig
from gke_tpu_priority.hotswap.controller import Controller, ExitCode, wakeup_delay
from testkit.apiserver import FakeApiServer

from .cluster import NS, WORKLOADS, add_slices, base_cluster, evict_pods_on, fail_node, run_jobset
from .conftest import ClientFactory
from .helpers import eventually

pytestmark = pytest.mark.timeout(30)

GRACE = timedelta(seconds=2)
CONFIG = HotswapConfig(
    leader_election=LeaderElectionConfig(enabled=False),
    debounce=timedelta(milliseconds=20),
    resync_period=timedelta(hours=1),  # never reached in this test: only events and the wake-up run passes
    unhealthy_grace=GRACE,
    writes_per_second=100,
    write_burst=100,
)


def test_wakeup_delay_is_bounded_below_by_the_debounce() -> None:
    now = datetime(2026, 9, 1, tzinfo=UTC)
    debounce = timedelta(milliseconds=500)
    assert wakeup_delay(now + timedelta(seconds=12), now, debounce) == 12.0
    assert wakeup_delay(now + timedelta(milliseconds=10), now, debounce) == 0.5
    assert wakeup_delay(now - timedelta(seconds=3), now, debounce) == 0.5


async def test_suspect_slice_is_acted_on_when_its_grace_ends_without_any_event(
    api: FakeApiServer, make_client: ClientFactory
) -> None:
    base_cluster(api)
    add_slices(api, "p0", "p1", "v0")
    run_jobset(api, "high", ["p0", "p1"], 1000)
    run_jobset(api, "low", ["v0"], 10)
    fail_node(api, "p0-0", seconds_ago=0)  # NotReady now: Suspect for GRACE, then Unhealthy
    evict_pods_on(api, "high", "p0")
    controller = Controller(CONFIG, await make_client("reconciler"), identity="reconciler")
    task = asyncio.create_task(controller.run())
    try:
        # The first passes (cache sync events) see a Suspect slice: nothing to do yet, but a wake-up is due.
        await eventually(lambda: controller.passes >= 1 and controller.next_wakeup is not None)
        wakeup = controller.next_wakeup
        assert wakeup is not None and timedelta(0) < wakeup - datetime.now(UTC) <= GRACE
        low = api.get(WORKLOADS, "jobset-low", NS)
        assert low is not None and low["spec"].get("active", True) is True
        passes = controller.passes
        # No watch event arrives now; the resync is an hour away. Only the wake-up can run the next pass.
        await eventually(lambda: api.get(WORKLOADS, "jobset-low", NS)["spec"].get("active") is False, timeout=15)  # type: ignore[index]
        await eventually(lambda: controller.passes > passes)  # the pass counts itself once it has finished
    finally:
        controller.stop()
        assert await asyncio.wait_for(task, timeout=10) is ExitCode.OK
