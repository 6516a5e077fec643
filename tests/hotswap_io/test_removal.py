"""Removing the reconciler releases its holds; restarting it does not.

`hotswap.enabled: false` and `pulumi destroy` delete the Deployment (Pulumi deletes in the foreground, so it stays,
with a deletionTimestamp, until its pods are gone); `kubectl scale --replicas=0` empties it. Either way the replica
that receives SIGTERM must reactivate every Workload it held, or they would stay inactive forever.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gke_tpu_priority.hotswap.annotations import AnnotationKeys
from gke_tpu_priority.hotswap.kube.removal import being_removed, release_if_removed
from testkit.apiserver import DEFAULT_RESOURCES, FakeApiServer, Fault, Resource

from .cluster import NS, WORKLOADS
from .conftest import ClientFactory, write_kubeconfig
from .helpers import eventually
from .test_ops import free_port

pytestmark = pytest.mark.timeout(30)

KEYS = AnnotationKeys("hotswap.gke-tpu-priority.io")
DEPLOYMENTS = "deployments.apps"
HOME = "hotswap-system"
APP = "hotswap-reconciler"


@pytest.fixture
async def api() -> AsyncIterator[FakeApiServer]:
    resources = (*DEFAULT_RESOURCES, Resource("apps", "v1", "deployments", "Deployment", namespaced=True))
    async with FakeApiServer(resources=resources, bookmark_interval=0.1) as server:
        yield server


def deployment(replicas: int = 2, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": APP, "namespace": HOME}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-05T23:00:00Z"
        meta["finalizers"] = ["foregroundDeletion"]
    template = {"metadata": {"labels": {"app": APP}}, "spec": {"containers": [{"name": "reconciler", "image": "i"}]}}
    spec = {"replicas": replicas, "selector": {"matchLabels": {"app": APP}}, "template": template}
    return {"metadata": meta, "spec": spec}


def hold(api: FakeApiServer, name: str) -> None:
    held = {KEYS.held_by: "ml/high/u/0", KEYS.op_id: "op-1", KEYS.held_since: "t", KEYS.hold_count: "1"}
    api.put(WORKLOADS, {"metadata": {"name": name, "namespace": NS, "annotations": held}, "spec": {"active": False}})


def active(api: FakeApiServer, name: str) -> bool:
    obj = api.get(WORKLOADS, name, NS)
    assert obj is not None
    return bool(obj["spec"]["active"])


@pytest.mark.parametrize(
    ("obj", "removed"),
    [
        (None, True),  # already gone (background deletion, or a retry after the object went)
        (deployment(deleting=True), True),  # Pulumi's foreground delete: the pods end first
        (deployment(replicas=0), True),  # scaled to zero: nothing will come back to release
        (deployment(replicas=2), False),  # a rolling update, a drain, a crash: the next leader keeps the holds
        (deployment(replicas=1), False),
    ],
)
def test_only_removal_counts(obj: dict[str, Any] | None, removed: bool) -> None:
    assert being_removed(obj) is removed


@pytest.mark.parametrize("state", ["deleting", "scaled-to-zero", "gone"])
async def test_removal_reactivates_every_held_workload(
    api: FakeApiServer, make_client: ClientFactory, state: str
) -> None:
    if state == "deleting":
        api.put(DEPLOYMENTS, deployment(deleting=True))
    elif state == "scaled-to-zero":
        api.put(DEPLOYMENTS, deployment(replicas=0))
    hold(api, "a")
    hold(api, "b")
    report = await release_if_removed(await make_client("replica-a"), KEYS, HOME, APP)
    assert report is not None and report.ok
    assert sorted(report.released) == [f"{NS}/a", f"{NS}/b"]
    assert active(api, "a") and active(api, "b")


async def test_a_restart_keeps_the_holds(api: FakeApiServer, make_client: ClientFactory) -> None:
    api.put(DEPLOYMENTS, deployment(replicas=2))
    hold(api, "a")
    assert await release_if_removed(await make_client("replica-a"), KEYS, HOME, APP) is None
    assert not active(api, "a")
    assert api.writes("replica-a") == []


async def test_an_unreadable_deployment_is_never_taken_for_a_removal(
    api: FakeApiServer, make_client: ClientFactory
) -> None:
    api.put(DEPLOYMENTS, deployment(deleting=True))
    hold(api, "a")
    api.inject(Fault(verb="get", resource=DEPLOYMENTS, status=403))
    assert await release_if_removed(await make_client("replica-a"), KEYS, HOME, APP) is None
    assert not active(api, "a")
    assert api.writes("replica-a") == []


@pytest.mark.timeout(60)
async def test_the_running_reconciler_releases_on_sigterm_when_its_deployment_is_deleted(
    api: FakeApiServer, tmp_path: Path
) -> None:
    # Dry run: the loop writes nothing, so what the log reports was decided by the shutdown path alone.
    api.put(DEPLOYMENTS, deployment())
    hold(api, "a")
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", api.url, "cli")
    env = os.environ | {
        "HOTSWAP_METRICS_PORT": str(free_port()),
        "HOTSWAP_HEALTH_PORT": str(free_port()),
        "HOTSWAP_RESYNC_PERIOD": "1",
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "hotswap",
        "run",
        "--dry-run",
        "--kubeconfig",
        str(kubeconfig),
        "--bind-address",
        "127.0.0.1",
        "--release-on-removal",
        f"{HOME}/{APP}",
        env=env,
        stderr=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.DEVNULL,
    )
    try:
        await eventually(lambda: len(api.requests_for("watch")) >= 8, timeout=15)
        api.put(DEPLOYMENTS, deployment(deleting=True))  # `pulumi destroy` / `hotswap.enabled: false`
        process.terminate()
        async with asyncio.timeout(15):
            code = await process.wait()
        assert code == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.stderr is not None
    entries = [json.loads(line) for line in (await process.stderr.read()).decode().splitlines() if line[:1] == "{"]
    (released,) = [e for e in entries if e["msg"] == "released on removal"]
    assert released["released"] == [f"{NS}/a"]
    assert api.writes("cli") == []  # dry run end to end
