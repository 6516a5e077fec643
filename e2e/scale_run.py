"""The reconciler at fleet size against the local API server (decisions in e2e/scale.py).

    python -m e2e.scale_run --slices 256,1024 [--out build/e2e/scale.json]

For each size: the dev stack on the playground with N fake 4x4 slices, the stack's own reconciler Deployment scaled
to zero while the fleet fills, the top-tier JobSets submitted and running first, then the rest (four per slice in
all); then one `hotswap run` as the stack's ServiceAccount with the stack's configuration, started on the full fleet.
Measured: its start to /readyz (every informer listed), its resident high-water mark, the `seconds` of its passes
over a window, and the time from a host failure under a top-tier JobSet to a victim's Workload held. Every process is
stopped at the end of each size, also on failure or Ctrl-C.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from e2e import faults
from e2e.hotswap_run import QUARANTINE_TAINT, Reconciler
from e2e.hotswap_scenario import Fault
from e2e.playground_run import RECONCILER, Playground, Progress
from e2e.playground_run import STEPS as PLAYGROUND_STEPS
from e2e.processes import http_ok, wait_for
from e2e.rest import RestClient
from e2e.scale import (
    HIGH,
    NAMESPACE,
    PLATFORM_KEY,
    JsonObj,
    ScalePoint,
    beside_synthetic,
    pass_seconds,
    peak_rss_mib,
    point,
    scale_jobsets,
    scale_stack_config,
)
from testkit.mock_runtime import PROJECT_ROOT, load_stack_config

STACK = "dev"
WINDOW_SECONDS = 60.0
FILL_TIMEOUT_PER_SLICE = 2.0
"""Seconds per slice the fleet may take to fill (Kueue admits, JobSet and the Job controller create, kwok runs)."""
FILL_TIMEOUT_MIN = 300.0
HOLD_TIMEOUT = 120.0
CREATE_CHUNK = 200
WORKLOADS = f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{NAMESPACE}/workloads"
PODS = f"/api/v1/namespaces/{NAMESPACE}/pods"
BENCH_RESULT = PROJECT_ROOT / "docs" / "results" / "bench.json"


def _say(out: TextIO, text: str) -> None:
    print(f"scale: {text}", file=out, flush=True)


def _list(rest: RestClient, path: str, query: dict[str, str] | None = None) -> list[JsonObj]:
    response = rest.request("GET", path, query=query)
    if not response.ok:
        raise RuntimeError(f"list {path}: {response.status}: {response.message}")
    items: list[JsonObj] = response.body.get("items", [])
    return items


def _running_pods(rest: RestClient) -> list[JsonObj]:
    return [p for p in _list(rest, PODS) if p.get("status", {}).get("phase") == "Running" and p["spec"].get("nodeName")]


def _jobset_of(pod: JsonObj) -> str:
    return str(pod["metadata"].get("labels", {}).get("jobset.sigs.k8s.io/jobset-name", ""))


def _running_jobsets(rest: RestClient, expected_pods: int) -> set[str]:
    """JobSets with all `expected_pods` pods Running on nodes."""
    counts: dict[str, int] = {}
    for pod in _running_pods(rest):
        counts[_jobset_of(pod)] = counts.get(_jobset_of(pod), 0) + 1
    return {name for name, count in counts.items() if count >= expected_pods}


def _create_all(rest: RestClient, objects: Sequence[JsonObj], out: TextIO, what: str) -> None:
    started = time.monotonic()
    for index, obj in enumerate(objects, 1):
        response = rest.create(obj)
        if not response.ok:
            raise RuntimeError(f"create {obj['kind']} {obj['metadata']['name']}: {response.status}: {response.message}")
        if index % CREATE_CHUNK == 0 or index == len(objects):
            _say(out, f"{what}: {index}/{len(objects)} created, {time.monotonic() - started:.0f} s")


def _lift_quarantine(rest: RestClient) -> int:
    """The Deployment's reconciler, stopped right after its first passes, may have quarantined fresh nodes (the
    lifecycle controller's not-ready taint outlives Ready=True on a thousand new nodes): start the fill on
    schedulable nodes."""
    lifted = 0
    for node in _list(rest, "/api/v1/nodes"):
        taints = node.get("spec", {}).get("taints", [])
        if any(t.get("key") == QUARANTINE_TAINT for t in taints):
            kept = [t for t in taints if t.get("key") != QUARANTINE_TAINT]
            patch = {"metadata": {"resourceVersion": node["metadata"]["resourceVersion"]}, "spec": {"taints": kept}}
            rest.request("PATCH", f"/api/v1/nodes/{node['metadata']['name']}", patch, content_type=faults.MERGE)
            lifted += 1
    return lifted


def _wait(what: str, probe: Callable[[], bool], timeout: float) -> float:
    started = time.monotonic()
    wait_for(what, probe, timeout)
    return time.monotonic() - started


def measure(slices: int, directory: Path, out: TextIO = sys.stdout, window: float = WINDOW_SECONDS) -> ScalePoint:
    """One fleet size, start to stop; every process it started is stopped before it returns or raises."""
    stack_config = scale_stack_config(load_stack_config(STACK), slices)
    playground = Playground(STACK, stack_config[PLATFORM_KEY], directory, stack_config=stack_config)
    reconciler: Reconciler | None = None
    try:
        playground.start(Progress(PLAYGROUND_STEPS + (playground.lock is not None), out))
        kubectl, rest = playground.kubectl(), RestClient(playground.cluster.kubeconfig)
        namespace = playground._reconciler_namespace()
        kubectl.run("scale", "deployment", RECONCILER, "-n", namespace, "--replicas=0")
        _wait(
            "the stack's reconciler pods to be gone",
            lambda: not _list(rest, f"/api/v1/namespaces/{namespace}/pods"),
            120,
        )
        _say(out, f"reconciler Deployment scaled to 0; quarantine taints lifted from {_lift_quarantine(rest)} nodes")

        workloads = scale_jobsets(slices)
        per_jobset = 4  # a 4x4 slice: four hosts, one pod each
        fill_timeout = max(FILL_TIMEOUT_MIN, FILL_TIMEOUT_PER_SLICE * slices)
        _create_all(rest, workloads.high, out, "top-tier JobSets")
        high_names = {j["metadata"]["name"] for j in workloads.high}
        seconds = _wait(
            f"{len(high_names)} top-tier JobSets running",
            lambda: high_names <= _running_jobsets(rest, per_jobset),
            fill_timeout,
        )
        _say(out, f"{len(high_names)} top-tier JobSets running, {seconds:.0f} s")
        _create_all(rest, workloads.low, out, "lower-tier JobSets")
        seconds = _wait(
            f"{slices} JobSets running (one per slice)",
            lambda: len(_running_jobsets(rest, per_jobset)) >= slices,
            fill_timeout,
        )
        pods = len(_list(rest, PODS))
        _say(out, f"fleet full: {slices} JobSets running, {len(workloads.all)} submitted, {pods} pods, {seconds:.0f} s")

        reconciler = Reconciler(playground.cluster, kubectl, playground.objects, "scale")
        started = time.monotonic()
        reconciler.process.start()
        wait_for(
            "the reconciler's /readyz", lambda: http_ok(reconciler.health_port, "/readyz"), 600, reconciler.process
        )
        list_s = time.monotonic() - started
        _say(out, f"reconciler ready (every informer listed) {list_s:.2f} s after its start; passes for {window:.0f} s")
        time.sleep(window)
        passes = pass_seconds(reconciler.process.log.read_text(errors="replace").splitlines())

        fault_to_hold = _fault_to_hold(rest, out)
        assert reconciler.process.popen is not None
        peak = peak_rss_mib(Path(f"/proc/{reconciler.process.popen.pid}/status").read_text())
        result = point(slices, len(workloads.all), pods, list_s, peak, passes, fault_to_hold)
        _say(out, json.dumps(result.as_report()))
        return result
    finally:
        if reconciler is not None:
            reconciler.stop()
        playground.stop()


def _fault_to_hold(rest: RestClient, out: TextIO) -> float:
    """A host failure under a running top-tier JobSet; the time until a victim's Workload is held."""
    running = [p for p in _running_pods(rest) if _jobset_of(p).startswith("high-")]
    if not running:
        raise RuntimeError(f"no {HIGH} pod is running to fail a host under")
    node = running[0]["spec"]["nodeName"]
    held_before = {w["metadata"]["name"] for w in _list(rest, WORKLOADS) if w["spec"].get("active") is False}
    started = time.monotonic()
    faults.inject(rest, Fault.HOST_FAILURE, node)

    def held() -> bool:
        return any(
            w["spec"].get("active") is False and w["metadata"]["name"] not in held_before
            for w in _list(rest, WORKLOADS)
        )

    wait_for(f"a victim held after the failure of {node}", held, HOLD_TIMEOUT)
    seconds = time.monotonic() - started
    _say(out, f"host {node} failed under {_jobset_of(running[0])}: a victim held {seconds:.2f} s later")
    return seconds


def main(argv: list[str] | None = None, out: TextIO = sys.stdout) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.scale_run", description=__doc__.split("\n\n")[0])
    parser.add_argument("--slices", default="256,1024", help="fleet sizes in 4x4 slices, comma-separated")
    parser.add_argument("--window", type=float, default=WINDOW_SECONDS, help="seconds of passes measured per size")
    parser.add_argument("--dir", type=Path, default=Path("build/e2e/scale"), help="the clusters' working directory")
    parser.add_argument("--out", type=Path, default=Path("build/e2e/scale.json"), help="where the figures go")
    args = parser.parse_args(argv)
    try:
        sizes = [int(s) for s in str(args.slices).split(",") if s.strip()]
    except ValueError:
        parser.error(f"--slices: {args.slices!r} is not a comma-separated list of whole numbers, e.g. 256,1024")
    if not sizes or min(sizes) < 1:
        parser.error(f"--slices: {args.slices!r}: give at least one size of at least 1 slice")
    points: list[ScalePoint] = []
    try:
        for slices in sizes:
            _say(out, f"{slices} slices ({slices * 4} fake TPU v6e hosts)")
            points.append(measure(slices, args.dir / str(slices), out, args.window))
    except KeyboardInterrupt:
        _say(out, "interrupted; every process it started is stopped")
        return 130
    finally:
        if points:
            write(points, args.out)
            _say(out, f"figures of {len(points)} size(s) written to {args.out}")
    return 0


def write(points: Sequence[ScalePoint], path: Path) -> dict[str, Any]:
    document = {"points": beside_synthetic(points, BENCH_RESULT)}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2) + "\n")
    return document


if __name__ == "__main__":
    with contextlib.suppress(BrokenPipeError):
        sys.exit(main())
