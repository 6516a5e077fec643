"""Watch cache against the fake API server: list+watch, selectors, bookmarks, 410 relist, outages."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from gke_tpu_priority.hotswap.kube.backoff import Backoff
from gke_tpu_priority.hotswap.kube.client import new_api_client
from gke_tpu_priority.hotswap.kube.informer import Informer
from gke_tpu_priority.hotswap.kube.resources import NODES, PODS, PRIORITY_CLASSES, TOPOLOGIES, WORKLOADS
from gke_tpu_priority.hotswap.kube.snapshot import SnapshotBuilder
from gke_tpu_priority.hotswap.metrics import Metrics
from gke_tpu_priority.hotswap.model import Pod
from testkit.apiserver import DEFAULT_RESOURCES, FakeApiServer, Fault

from .conftest import ClientFactory, write_kubeconfig
from .helpers import eventually, node, pod

pytestmark = pytest.mark.timeout(20)


def fast_backoff() -> Backoff:
    return Backoff(base=0.01, cap=0.05, rng=random.Random(1))


@asynccontextmanager
async def running(informer: Informer) -> AsyncIterator[Informer]:
    task = asyncio.create_task(informer.run())
    try:
        async with asyncio.timeout(5):
            await informer.wait_synced()
        yield informer
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_list_then_watch_tracks_adds_updates_and_deletes(api: FakeApiServer, make_client: ClientFactory) -> None:
    api.put("nodes", node("n1"))
    informer = Informer(await make_client("a"), NODES, backoff=fast_backoff())
    async with running(informer):
        assert set(informer.cache) == {"n1"}
        api.put("nodes", node("n2"))
        api.patch("nodes", "n1", {"spec": {"unschedulable": True}})
        await eventually(lambda: "n2" in informer.cache and informer.cache["n1"]["spec"].get("unschedulable"))
        api.delete("nodes", "n2")
        await eventually(lambda: "n2" not in informer.cache)
        assert informer.relists == 1
    watches = api.requests_for("watch", "nodes")
    assert watches and watches[0].query["allowWatchBookmarks"].lower() == "true"
    assert watches[0].query["resourceVersion"] != ""


def tpu_job_pod(name: str, namespace: str = "other-team") -> dict[str, Any]:
    """A Kueue-admitted `batch/v1` Job's pod on a TPU node: no JobSet label, but it uses the slice's chips."""
    obj = pod(name, None, namespace, node_name="p0-0")
    obj["metadata"]["labels"] = {"batch.kubernetes.io/job-name": "tpu-job"}
    obj["spec"]["containers"][0]["resources"] = {"limits": {"google.com/tpu": "4"}}
    return obj


async def test_the_pod_cache_keeps_jobset_pods_and_every_tpu_pod_typed(
    api: FakeApiServer, make_client: ClientFactory
) -> None:
    """Every pod is watched (no server-side selector can say 'uses TPU chips'); the cache keeps the typed pods of
    JobSets and of anything else using TPU chips, in any namespace, and drops the rest."""
    builder = SnapshotBuilder(attribution_window=timedelta(minutes=10), clock=lambda: datetime.now(UTC))
    api.put("pods", pod("p1", "train"))
    api.put("pods", pod("other", None))
    api.put("pods", tpu_job_pod("job-0"))
    informer = Informer(await make_client("a"), PODS, backoff=fast_backoff(), transform=builder.pod_value)
    async with running(informer):
        api.put("pods", pod("p2", "train"))
        api.put("pods", pod("other-2", None))
        api.put("pods", tpu_job_pod("job-1"))
        await eventually(lambda: "team-a/p2" in informer.cache and "other-team/job-1" in informer.cache)
        await asyncio.sleep(0.1)
        assert set(informer.cache) == {"team-a/p1", "team-a/p2", "other-team/job-0", "other-team/job-1"}
        job_pod = informer.cache["other-team/job-0"]
        assert isinstance(job_pod, Pod) and (job_pod.jobset_name, job_pod.node_name) == ("", "p0-0")
    assert "labelSelector" not in api.requests_for("list", "pods")[0].query


async def test_list_is_paged(api: FakeApiServer, make_client: ClientFactory) -> None:
    for i in range(7):
        api.put("nodes", node(f"n{i}"))
    informer = Informer(await make_client("a"), NODES, backoff=fast_backoff(), page_size=3)
    async with running(informer):
        assert len(informer.cache) == 7
    assert len(api.requests_for("list", "nodes")) == 3


async def test_bookmarks_advance_resource_version_without_changing_cache(
    api: FakeApiServer, make_client: ClientFactory
) -> None:
    api.put("nodes", node("n1"))
    informer = Informer(await make_client("a"), NODES, backoff=fast_backoff())
    async with running(informer):
        start = int(informer.resource_version or 0)
        api.put("workloads.kueue.x-k8s.io", {"metadata": {"name": "w", "namespace": "ns"}, "spec": {}})
        await eventually(lambda: int(informer.resource_version or 0) > start)
        assert set(informer.cache) == {"n1"}


async def test_watch_410_relists_and_misses_nothing(api: FakeApiServer, make_client: ClientFactory) -> None:
    api.put("nodes", node("n1"))
    informer = Informer(await make_client("a"), NODES, backoff=fast_backoff(), watch_timeout_seconds=1)
    async with running(informer):
        # Drop the connection and compact history: the resumed watch's version is gone -> 410 -> relist.
        api.kill_watches()
        api.put("nodes", node("n2", ready="False"))
        api.compact()
        await eventually(lambda: informer.relists >= 2)
        await eventually(lambda: "n2" in informer.cache)
        assert informer.cache["n2"]["status"]["conditions"][0]["status"] == "False"


async def test_injected_410_error_event_triggers_relist(api: FakeApiServer, make_client: ClientFactory) -> None:
    api.put("nodes", node("n1"))
    api.inject(Fault(verb="watch", resource="nodes", gone=True, times=1))
    informer = Informer(await make_client("a"), NODES, backoff=fast_backoff())
    async with running(informer):
        await eventually(lambda: informer.relists >= 2)
        api.put("nodes", node("n3"))
        await eventually(lambda: "n3" in informer.cache)


async def test_outage_with_5xx_backs_off_then_recovers(api: FakeApiServer, make_client: ClientFactory) -> None:
    api.put("nodes", node("n1"))
    api.inject(Fault(verb="list", resource="nodes", status=503, times=3))
    metrics = Metrics()
    informer = Informer(await make_client("a"), NODES, backoff=fast_backoff(), metrics=metrics)
    async with running(informer):
        assert informer.healthy and set(informer.cache) == {"n1"}
    assert [r.status for r in api.requests_for("list", "nodes")] == [503, 503, 503, 200]
    assert metrics.registry.get_sample_value("hotswap_api_errors_total", {"verb": "list", "code": "503"}) == 3


async def test_watch_5xx_marks_unhealthy_until_resumed(api: FakeApiServer, make_client: ClientFactory) -> None:
    api.put("nodes", node("n1"))
    informer = Informer(await make_client("a"), NODES, backoff=Backoff(base=0.3, cap=0.3))
    async with running(informer):
        api.inject(Fault(verb="watch", resource="nodes", status=500, times=2))
        api.kill_watches()
        await eventually(lambda: not informer.healthy)
        api.put("nodes", node("n2"))
        await eventually(lambda: informer.healthy and "n2" in informer.cache)
        # Resumed from the last resourceVersion rather than re-listing.
        assert informer.relists == 1


async def test_slow_api_times_out_and_retries(api: FakeApiServer, make_client: ClientFactory) -> None:
    api.put("nodes", node("n1"))
    api.inject(Fault(verb="list", resource="nodes", delay=2.0, times=1))
    metrics = Metrics()
    informer = Informer(await make_client("a"), NODES, backoff=fast_backoff(), list_timeout=0.3, metrics=metrics)
    async with running(informer):
        assert set(informer.cache) == {"n1"}
    # The first list timed out client-side (no HTTP status: code 0), the retry succeeded.
    assert metrics.registry.get_sample_value("hotswap_api_errors_total", {"verb": "list", "code": "0"}) == 1
    assert informer.relists == 1


async def test_forbidden_keeps_retrying_with_backoff(api: FakeApiServer, make_client: ClientFactory) -> None:
    api.inject(Fault(verb="list", resource="workloads.kueue.x-k8s.io", status=403, times=None))
    informer = Informer(await make_client("a"), WORKLOADS, backoff=Backoff(base=0.05, cap=0.1))
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.sleep(0.5)
        assert not informer.synced and not informer.healthy
        # Backoff floor (base/2) bounds the retry rate: no tight loop.
        assert 2 <= len(api.requests_for("list", "workloads.kueue.x-k8s.io")) <= 12
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_malformed_objects_are_ignored(api: FakeApiServer, make_client: ClientFactory) -> None:
    api.put("nodes", node("n1"))
    informer = Informer(await make_client("a"), NODES, backoff=fast_backoff())
    seen: list[tuple[str, str]] = []
    informer.listeners.append(lambda kind, obj: seen.append((kind, obj["metadata"]["name"])))
    async with running(informer):
        api.put("nodes", {"metadata": {"name": "weird"}, "spec": "not-a-dict", "status": 7})
        await eventually(lambda: "weird" in informer.cache)
        api.delete("nodes", "weird")
        await eventually(lambda: "weird" not in informer.cache)
    assert seen == [("ADDED", "n1"), ("ADDED", "weird"), ("DELETED", "weird")]


async def test_optional_kind_not_served_counts_as_synced_and_empty(tmp_path: Path) -> None:
    without_tas = tuple(r for r in DEFAULT_RESOURCES if r.plural != "topologies")
    async with FakeApiServer(resources=without_tas) as server:
        factory_client = await new_api_client(str(write_kubeconfig(tmp_path / "kc", server.url, "a")))
        try:
            informer = Informer(factory_client, TOPOLOGIES, backoff=fast_backoff())
            async with running(informer):
                assert informer.synced and informer.healthy and informer.cache == {}
        finally:
            await factory_client.close()


async def test_replayed_and_unknown_events_are_idempotent(api: FakeApiServer, make_client: ClientFactory) -> None:
    api.put("nodes", node("n1"))
    informer = Informer(await make_client("a"), NODES, backoff=fast_backoff())
    async with running(informer):
        replay_from = informer.resource_version
        api.put("nodes", node("n2"))
        api.patch("nodes", "n2", {"spec": {"unschedulable": True}})
        api.put("nodes", node("gone"))
        api.delete("nodes", "gone")
        await eventually(lambda: "n2" in informer.cache and informer.cache["n2"]["spec"].get("unschedulable"))
        expected = {k: v["metadata"]["resourceVersion"] for k, v in informer.cache.items()}
        # Resume from an older version: every event since is delivered a second time (F17), including a
        # DELETED for an object the cache no longer has.
        informer.resource_version = replay_from
        api.kill_watches()
        await eventually(lambda: len(api.requests_for("watch", "nodes")) >= 2)
        assert api.requests_for("watch", "nodes")[1].query["resourceVersion"] == replay_from
        await eventually(lambda: int(informer.resource_version or 0) >= api.rv)
        assert {k: v["metadata"]["resourceVersion"] for k, v in informer.cache.items()} == expected
        assert informer.relists == 1


async def test_optional_kind_forbidden_by_rbac_counts_as_synced_and_empty(
    api: FakeApiServer, make_client: ClientFactory
) -> None:
    api.put("priorityclasses.scheduling.k8s.io", {"metadata": {"name": "p"}, "value": 1})
    api.inject(Fault(resource="priorityclasses.scheduling.k8s.io", status=403, times=None))
    informer = Informer(await make_client("a"), PRIORITY_CLASSES, backoff=fast_backoff())
    async with running(informer):
        assert informer.synced and informer.healthy and informer.cache == {}
