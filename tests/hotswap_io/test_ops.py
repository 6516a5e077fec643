"""Operations surface: token bucket, backoff, JSON logs, /healthz /readyz /metrics, release-all, the CLI."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import signal
import socket
import sys
from pathlib import Path

import aiohttp
import pytest

from gke_tpu_priority.hotswap.annotations import AnnotationKeys
from gke_tpu_priority.hotswap.cli import build_parser
from gke_tpu_priority.hotswap.kube.backoff import Backoff
from gke_tpu_priority.hotswap.kube.ratelimit import TokenBucket
from gke_tpu_priority.hotswap.kube.release_all import release_all
from gke_tpu_priority.hotswap.logs import JsonFormatter, setup_logging
from gke_tpu_priority.hotswap.metrics import Metrics
from gke_tpu_priority.hotswap.server import OpsServer, make_app
from testkit.apiserver import FakeApiServer

from .cluster import NS, WORKLOADS
from .conftest import ClientFactory, write_kubeconfig
from .helpers import eventually

pytestmark = pytest.mark.timeout(30)

KEYS = AnnotationKeys("hotswap.gke-tpu-priority.io")


async def test_token_bucket_allows_burst_then_paces_at_rate() -> None:
    now = [0.0]
    slept: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    bucket = TokenBucket(rate=2.0, burst=3, clock=lambda: now[0], sleep=fake_sleep)
    for _ in range(3):
        await bucket.acquire()
    assert slept == []
    await bucket.acquire()
    await bucket.acquire()
    assert slept == [pytest.approx(0.5), pytest.approx(0.5)]


def test_token_bucket_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="rate must be > 0"):
        TokenBucket(rate=0, burst=1)


def test_backoff_grows_is_capped_and_jittered() -> None:
    backoff = Backoff(base=1.0, cap=8.0)
    delays = [backoff.next_delay() for _ in range(8)]
    ceilings = [1, 2, 4, 8, 8, 8, 8, 8]
    assert all(c / 2 <= d <= c for d, c in zip(delays, ceilings, strict=True))
    backoff.reset()
    assert backoff.next_delay() <= 1.0


def test_json_logs_carry_extra_fields() -> None:
    record = logging.LogRecord("hotswap.x", logging.WARNING, __file__, 1, "action %s", ("held",), None)
    record.op_id = "op-1"
    entry = json.loads(JsonFormatter().format(record))
    assert entry["msg"] == "action held" and entry["level"] == "warning" and entry["op_id"] == "op-1"
    stream = io.StringIO()
    setup_logging("INFO", stream)
    try:
        logging.getLogger("hotswap.test").info("hello", extra={"n": 3})
    finally:
        setup_logging("WARNING")
    assert json.loads(stream.getvalue().splitlines()[-1])["n"] == 3


async def test_ops_endpoints() -> None:
    metrics = Metrics()
    metrics.victims.inc()
    state = {"alive": True, "ready": False}
    server = OpsServer(make_app(metrics, alive=lambda: state["alive"], ready=lambda: state["ready"]), "127.0.0.1", (0,))
    await server.start()
    base = f"http://127.0.0.1:{server.bound[0]}"
    try:
        async with aiohttp.ClientSession() as session:

            async def status(path: str) -> int:
                async with session.get(base + path) as response:
                    return response.status

            assert await status("/healthz") == 200
            assert await status("/readyz") == 503
            state["ready"], state["alive"] = True, False
            assert await status("/readyz") == 200
            assert await status("/healthz") == 503
            async with session.get(base + "/metrics") as response:
                text = await response.text()
            assert "hotswap_victims_total 1.0" in text
            assert "hotswap_reconcile_duration_seconds_bucket" in text
    finally:
        await server.stop()


async def test_release_all_reactivates_every_held_workload_once(api: FakeApiServer, make_client: ClientFactory) -> None:
    held = {KEYS.held_by: "ml/high/u/0", KEYS.op_id: "op-1", KEYS.held_since: "t", KEYS.hold_count: "2"}
    for name in ("a", "b"):
        api.put(
            WORKLOADS, {"metadata": {"name": name, "namespace": NS, "annotations": held}, "spec": {"active": False}}
        )
    api.put(WORKLOADS, {"metadata": {"name": "free", "namespace": NS}, "spec": {"active": False}})
    api.put(
        WORKLOADS,
        {"metadata": {"name": "high", "namespace": NS, "annotations": {KEYS.op: "id=op-1;attempt=0"}}, "spec": {}},
    )
    report = await release_all(await make_client("ops"), KEYS)
    assert sorted(report.released) == [f"{NS}/a", f"{NS}/b"] and report.cleared_ops == [f"{NS}/high"]
    assert report.ok
    for name in ("a", "b"):
        obj = api.get(WORKLOADS, name, NS)
        assert obj is not None and obj["spec"]["active"] is True
        assert obj["metadata"]["annotations"] == {KEYS.hold_count: "2"}
    # Not the reconciler's: an inactive Workload without its annotation stays inactive.
    assert api.get(WORKLOADS, "free", NS)["spec"]["active"] is False  # type: ignore[index]
    assert len(api.writes("ops")) == 3
    # Running it again is a no-op.
    again = await release_all(await make_client("ops"), KEYS)
    assert again.released == [] and len(api.writes("ops")) == 3


async def test_release_all_removes_only_the_quarantine_taint(api: FakeApiServer, make_client: ClientFactory) -> None:
    gke = {"key": "google.com/tpu", "value": "present", "effect": "NoSchedule"}
    ours = {"key": KEYS.quarantine_taint, "effect": "NoSchedule"}
    api.put("nodes", {"metadata": {"name": "tainted"}, "spec": {"taints": [gke, ours]}})
    api.put("nodes", {"metadata": {"name": "clean"}, "spec": {"taints": [gke]}})
    report = await release_all(await make_client("ops"), KEYS)
    assert report.ok and report.untainted == ["tainted"]
    for name in ("tainted", "clean"):
        assert api.get("nodes", name)["spec"]["taints"] == [gke]  # type: ignore[index]
    writes = [w for w in api.writes("ops") if w.resource == "nodes"]
    assert [w.name for w in writes] == ["tainted"] and writes[0].body["metadata"]["resourceVersion"]
    dry = await release_all(await make_client("ops"), KEYS, dry_run=True)
    assert dry.untainted == []


def test_cli_help_explains_commands() -> None:
    parser = build_parser()
    text = parser.format_help()
    assert "release-all" in text and "run" in text and "spec.active=false" in text
    args = parser.parse_args(["run", "--dry-run", "--kubeconfig", "k", "--config", "c"])
    assert (args.command, args.dry_run, args.kubeconfig, args.config) == ("run", True, "k", "c")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.timeout(60)
async def test_cli_run_dry_run_process_serves_probes_writes_nothing_and_stops_on_sigterm(
    api: FakeApiServer, tmp_path: Path
) -> None:
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", api.url, "cli")
    metrics_port, health_port = free_port(), free_port()
    env = os.environ | {
        "HOTSWAP_METRICS_PORT": str(metrics_port),
        "HOTSWAP_HEALTH_PORT": str(health_port),
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
        env=env,
        stderr=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.DEVNULL,
    )
    try:
        async with aiohttp.ClientSession() as session:

            async def ready() -> bool:
                try:
                    async with session.get(f"http://127.0.0.1:{health_port}/readyz") as response:
                        return response.status == 200
                except aiohttp.ClientError:
                    return False

            async with asyncio.timeout(30):
                while not await ready():
                    await asyncio.sleep(0.1)
            async with session.get(f"http://127.0.0.1:{metrics_port}/metrics") as response:
                assert "hotswap_cache_synced" in await response.text()
        await eventually(lambda: len(api.requests_for("watch")) >= 8, timeout=10)
        process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(15):
            code = await process.wait()
        assert code == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.stderr is not None
    lines = (await process.stderr.read()).decode().splitlines()
    entries = [json.loads(line) for line in lines if line.startswith("{")]
    assert any(e["msg"] == "starting" and e["dry_run"] is True for e in entries)
    assert any(e["msg"] == "stopped" for e in entries)
    # Dry run: no writes at all, not even the Lease.
    assert api.writes("cli") == []
