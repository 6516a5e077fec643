"""`kubectl hotswap status -o yaml -A` on the local control plane, as an operator runs it: through kubectl's plugin
mechanism (`kubectl-hotswap` on PATH), with `$KUBECONFIG`, while the reconciler holds real Kueue Workloads.

The hotswap scenario's host failure runs with the reconciler; while a victim is held (from the eviction until the
repair, a minute or more), the command runs and its YAML must name the held victim, the JobSet it is held for, the
reason from the HotswapVictimHeld Event and the quarantined slice. The preemptor's operation is open only for the
seconds until it runs again; when an answer caught it, it must list that victim.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from e2e.conftest import Target
from e2e.hotswap_run import Scenario
from e2e.hotswap_scenario import HP_NAME, NAMESPACE, Fault, Mode
from e2e.test_hotswap import scenario
from gke_tpu_priority.components.workloads.jobset import HOTSWAP_DOMAIN

__all__ = ["scenario"]  # the hotswap scenario's fixture: the dev stack's objects applied

JsonObj = dict[str, Any]
HELD_BY = f"{HOTSWAP_DOMAIN}/held-by"
HOLD_TIMEOUT = 150.0


@dataclass
class Seen:
    """The first `status` answer that showed a complete hold, the last one tried, and every operation seen."""

    code: int | None = None
    stdout: str = ""
    stderr: str = ""
    document: JsonObj = field(default_factory=dict)
    operations: list[JsonObj] = field(default_factory=list)
    done: bool = False


def _plugin(target: Target, *args: str) -> subprocess.CompletedProcess[str]:
    """`kubectl hotswap ...`: kubectl finds `kubectl-hotswap` beside this Python (the package's console script)."""
    local = target.need_local()
    env = {
        **os.environ,
        "KUBECONFIG": str(local.kubeconfig),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    return subprocess.run(
        [str(target.kubectl.binary), "hotswap", *args], capture_output=True, text=True, timeout=60, env=env
    )


def _held_for_the_preemptor(document: JsonObj) -> list[JsonObj]:
    return [h for h in document.get("held", []) if h.get("preemptor") == f"{NAMESPACE}/{HP_NAME}"]


def _complete(document: JsonObj) -> bool:
    """A victim held for the preemptor, with the Event's reason, and the failed slice quarantined."""
    held = _held_for_the_preemptor(document)
    return any("no Event left" not in h.get("why", "") for h in held) and bool(document.get("quarantined"))


def _a_victim_is_held(target: Target) -> bool:
    listed = target.rest.request("GET", "/apis/kueue.x-k8s.io/v1beta2/workloads")
    items = listed.body.get("items", []) if listed.ok else []
    return any((w.get("metadata", {}).get("annotations") or {}).get(HELD_BY) for w in items)


def _watch(target: Target, seen: Seen, stop: threading.Event) -> None:
    while not stop.is_set() and not seen.done:
        if _a_victim_is_held(target):
            done = _plugin(target, "status", "-o", "yaml", "-A")
            document = yaml.safe_load(done.stdout) if done.returncode == 0 else None
            document = document if isinstance(document, dict) else {}
            seen.operations += document.get("operations", [])
            seen.done = _complete(document)
            seen.code, seen.stdout, seen.stderr, seen.document = done.returncode, done.stdout, done.stderr, document
        stop.wait(0.5)


def test_status_as_yaml_names_the_held_victim_and_its_preemptor(target: Target, scenario: Scenario) -> None:
    seen, stop = Seen(), threading.Event()
    watcher = threading.Thread(target=_watch, args=(target, seen, stop), name="status-watch", daemon=True)
    watcher.start()
    try:
        result = scenario.run(Mode.RECONCILER, Fault.HOST_FAILURE).as_report()
    finally:
        stop.set()
        watcher.join(timeout=HOLD_TIMEOUT)
    assert result["victimsEvicted"] >= 1, result
    assert seen.done, (seen.code, seen.stdout, seen.stderr)
    document = seen.document
    assert (seen.code, seen.stderr) == (0, "")
    assert (document["partial"], document["warnings"]) == (False, [])
    held = next(h for h in _held_for_the_preemptor(document) if "no Event left" not in h["why"])
    assert held["workload"].startswith(f"{NAMESPACE}/") and held["jobset"] in result["victims"], held
    assert held["why"] == f"held (spec.active=false) to free slices for {NAMESPACE}/{HP_NAME}", held
    assert held["op_id"] and held["since"] and held["holds"] >= 1, held
    failed_pool = result["failedNode"].rsplit("-", 1)[0]
    assert [q["slice"] for q in document["quarantined"]] == [failed_pool], document["quarantined"]
    for operation in (op for op in seen.operations if op["op_id"] == held["op_id"]):
        assert held["workload"] in operation["victims"] and operation["slices"], operation


def test_status_in_a_namespace_without_holds_is_a_whole_empty_answer(target: Target, scenario: Scenario) -> None:
    done = _plugin(target, "status", "-o", "json", "-n", "kube-system")
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    document = yaml.safe_load(done.stdout)
    assert (document["held"], document["operations"], document["partial"]) == ([], [], False)
    version = _plugin(target, "--version")
    assert version.returncode == 0 and version.stdout.startswith("kubectl-hotswap "), version.stderr
