"""`make cluster STACK=dev`, reduced: the playground starts, Kueue, JobSet, the stack's objects and the reconciler are
up on its fake TPU v6e nodes, a JobSet made by `gke-tpu-jobset` is admitted and runs, and on stop no process it
started is left running. It has a cluster of its own, so it runs before the session's (e2e/conftest.py)."""

from __future__ import annotations

import io
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from e2e import report
from e2e.conftest import BUILD_DIR
from e2e.playground import choose_stack, stack_names
from e2e.playground_run import LOCK_TIMEOUT, Playground, run
from testkit.mock_runtime import PROJECT_ROOT, load_stack_config

JsonObj = dict[str, Any]
STACK = "dev"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped) is not running.
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.is_file() and stat.read_text().split(") ", 1)[1].startswith("Z"))


def _names(kubectl: Any, *args: str) -> set[str]:
    return {o["metadata"]["name"] for o in kubectl.json("get", *args)["items"]}


def _jobset() -> str:
    done = subprocess.run(
        [
            sys.executable, "-m", "gke_tpu_priority.components.workloads", "--name", "smoke", "--namespace",
            "tpu-training", "--queue", "training", "--priority", "training-high", "--topology", "2x2", "--image",
            "us-docker.pkg.dev/example/train:1",
        ],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return done.stdout


def test_the_playground_brings_up_the_platform_and_leaves_nothing_running() -> None:
    configs = {name: load_stack_config(name) for name in stack_names(PROJECT_ROOT)}
    checked: dict[str, Any] = {}
    pids: list[int] = []
    failures: list[str] = []

    def check(playground: Playground) -> bool:
        """Runs once the playground is up, in its own loop: look, then ask it to stop."""
        try:
            kubectl = playground.kubectl()
            checked["pods"] = {
                f"{p['metadata']['namespace']}/{p['metadata'].get('labels', {}).get('app.kubernetes.io/name', '')}"
                for p in kubectl.json("get", "pods", "-A")["items"]
                if any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions", []))
            }
            checked["crds"] = _names(kubectl, "crd")
            checked["clusterQueues"] = _names(kubectl, "clusterqueues")
            checked["localQueues"] = _names(kubectl, "localqueues", "-A")
            checked["workloadPriorityClasses"] = _names(kubectl, "workloadpriorityclasses")
            checked["policies"] = _names(kubectl, "validatingadmissionpolicies")
            checked["nodes"] = _names(kubectl, "nodes")
            kubectl.run("apply", "-f", "-", stdin=_jobset())
            deadline = time.monotonic() + 180
            while time.monotonic() < deadline:
                pods = kubectl.json("get", "pods", "-n", "tpu-training")["items"]
                if any(p["status"].get("phase") == "Running" and p["spec"].get("nodeName") for p in pods):
                    checked["smokeRunsOn"] = pods[0]["spec"]["nodeName"]
                    break
                time.sleep(1)
            workloads = kubectl.json("get", "workloads", "-n", "tpu-training")["items"]
            checked["admitted"] = [
                w["metadata"]["name"]
                for w in workloads
                if any(c["type"] == "Admitted" and c["status"] == "True" for c in w["status"].get("conditions", []))
            ]
            pids.extend(p.popen.pid for p in playground.processes() if p.popen is not None)
        except Exception as error:  # reported by the test below, after the playground stopped
            failures.append(repr(error))
        return True

    out = io.StringIO()
    started = time.monotonic()
    code = run(STACK, choose_stack(STACK, configs), BUILD_DIR / "playground", until=check, out=out)
    report.section("playground").update({"stack": STACK, "seconds": round(time.monotonic() - started, 1)})
    text = out.getvalue()
    assert code == 0, text
    assert not failures, failures
    assert re.search(r"playground: \[(\d)/\1\] hotswap reconciler", text) and "export KUBECONFIG=" in text, text
    assert {"jobset-system/jobset", "kueue-system/kueue", "hotswap-system/hotswap-reconciler"} <= checked["pods"]
    assert {"jobsets.jobset.x-k8s.io", "workloads.kueue.x-k8s.io"} <= checked["crds"]
    assert checked["clusterQueues"] == {"tpu-training"} and checked["localQueues"] == {"training"}
    assert {"training-high", "training-low", "best-effort"} <= checked["workloadPriorityClasses"]
    assert "gke-tpu-priority-tpu-workloads-jobsets" in checked["policies"]
    assert {"system-0", "dev-2x2-0", "dev-2x2-1", "dev-4x4-0-3"} <= checked["nodes"]
    assert checked.get("smokeRunsOn", "").startswith("dev-2x2-"), checked
    assert len(checked["admitted"]) == 1, checked
    assert len(pids) >= 8, pids  # etcd, 3 Kubernetes servers, kwok, 2 managers, 2 reconciler replicas
    assert [pid for pid in pids if _alive(pid)] == []
    assert "playground: stopped in" in text


CHARTS_STEP = "JobSet v0.12.0: chart and manager ..."


def test_sigterm_while_starting_stops_what_was_started() -> None:
    """SIGTERM half-way through the start (a CI timeout, a closed terminal): nothing started is left running."""
    log = BUILD_DIR / "playground-sigterm.log"
    with open(log, "w") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "e2e.cluster", "--stack", STACK, "--dir", str(BUILD_DIR / "playground-sigterm")],
            stdout=sink, stderr=subprocess.STDOUT, cwd=PROJECT_ROOT,
        )  # fmt: skip
    try:
        # Past the control plane and into the charts; another local cluster may hold JobSet's directory first.
        deadline = time.monotonic() + LOCK_TIMEOUT + 240
        while CHARTS_STEP not in log.read_text() and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.5)
        assert CHARTS_STEP in log.read_text(), log.read_text()
        children = _children(process.pid)
        assert children, "the playground had started no process yet"
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)
    text = log.read_text()
    assert "playground: stopped in" in text, text
    assert [pid for pid in children if _alive(pid)] == [], text


def _children(pid: int) -> list[int]:
    """Every process started by `pid`, across sessions: each server runs in a process group of its own."""
    found: list[int] = []
    frontier = [pid]
    while frontier:
        parent = frontier.pop()
        path = Path(f"/proc/{parent}/task/{parent}/children")
        kids = [int(k) for k in path.read_text().split()] if path.is_file() else []
        found += kids
        frontier += kids
    return found
