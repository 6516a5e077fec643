"""Bring a stack's platform up on the local control plane, keep it running, stop every process it started.

    python -m e2e.cluster --stack dev     (`make cluster STACK=dev`)

Steps, each timed on the terminal: the binaries (built once, then cached), the control plane (e2e/cluster.py), the
nodes (a system node whose kubelet is this process, e2e/process_node.py, and kwok's fake TPU v6e hosts of the stack's
pools), JobSet and Kueue (their pinned charts with the stack's values, e2e/charts.py; each chart's Deployment gets a
pod on the system node, backed by the manager binary of the same release), the stack's own objects as `make preview`
renders them, and the hotswap reconciler's Deployment, whose pods are `hotswap run` processes with the stack's
configuration and ServiceAccount. A failure at any step, Ctrl-C or SIGTERM stops everything started so far.
"""

from __future__ import annotations

import contextlib
import io
import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any, TextIO

from e2e.apply import apply_all
from e2e.charts import chart_objects
from e2e.cluster import LocalCluster
from e2e.controllers import shared_directory_lock
from e2e.kubectl import Kubectl, KubectlError
from e2e.playground import (
    REPAIR_AFTER_SECONDS,
    FakePool,
    PlaygroundError,
    Ready,
    due_repairs,
    fake_pools,
    fleet_summary,
    ready_message,
    served_locally,
    skipped_pools,
    step_done,
    step_line,
    system_node_labels,
    tpu_node_objects,
)
from e2e.process_node import ManagerBacker, ProcessBackedNode, ReconcilerBacker
from e2e.processes import Process, wait_for
from e2e.rest import RestClient
from gke_tpu_priority.components.config import PlatformConfig, parse_platform_config
from testkit.mock_runtime import run_program
from tools import toolchain
from tools.manifests import kubernetes_objects

JsonObj = dict[str, Any]
TOOLS = ("etcd", "kube", "kwok", "helm", "jobset", "kueue")
STEPS = 8  # and one more where the machine allows no private mounts: waiting for JobSet's shared directory
RECONCILER = "hotswap-reconciler"
START_TIMEOUT = 300.0
LOCK_TIMEOUT = 600.0


class Interrupted(Exception):
    """SIGTERM or SIGHUP: unwinds like Ctrl-C, so every `finally` stops what it started."""


class Progress:
    """Numbered, timed steps on the terminal."""

    def __init__(self, total: int, out: TextIO = sys.stdout) -> None:
        self.total, self.out, self.index = total, out, 0
        self.detail = ""

    @contextlib.contextmanager
    def step(self, what: str) -> Iterator[Progress]:
        self.index += 1
        self.detail = ""
        self.out.write(step_line(self.index, self.total, what))
        self.out.flush()
        started = time.monotonic()
        try:
            yield self
        except BaseException as error:
            ended = "interrupted" if isinstance(error, KeyboardInterrupt | Interrupted) else "failed"
            self.out.write(f" {ended} after {time.monotonic() - started:.1f} s\n")
            self.out.flush()
            raise
        self.out.write(step_done(time.monotonic() - started, self.detail) + "\n")
        self.out.flush()


class Playground:
    """One stack's platform on a local cluster; `start` then `stop` (always, even after a failed start)."""

    def __init__(self, stack: str, platform: JsonObj, directory: Path, stack_config: JsonObj | None = None) -> None:
        """`stack_config`: the whole stack file's content to render instead of stacks/Pulumi.<stack>.yaml's (a
        resized fleet, say); `platform` is its platform section."""
        self.stack = stack
        self.stack_config = stack_config
        self.config: PlatformConfig = parse_platform_config(platform)
        self.cluster = LocalCluster(directory)
        self.lock = shared_directory_lock()
        self.node: ProcessBackedNode | None = None
        self.pools: list[FakePool] = fake_pools(self.config)
        self.objects: list[JsonObj] = []
        self._locked = False

    # ---- lifecycle -------------------------------------------------------------------------------------------
    def start(self, progress: Progress) -> None:
        with progress.step(f"binaries ({', '.join(TOOLS)}), built once into the cache") as step:
            goversion = toolchain.go_version()
            built = [toolchain.build(toolchain.TOOLS[name], goversion) for name in TOOLS]
            step.detail = "cached" if all(b.cached for b in built) else "built"
        with progress.step("render the stack's objects as `make preview` does"):
            self.objects = _render(self.stack, self.stack_config)
        if self.lock is not None:
            with progress.step("JobSet's webhook certificate directory (one local cluster at a time here)"):
                self.lock.acquire(LOCK_TIMEOUT)
                self._locked = True
        with progress.step("control plane: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok"):
            self.cluster.start(with_nodes=False)
        with progress.step("nodes: a system node and the stack's TPU v6e hosts") as step:
            self._start_nodes()
            skipped = skipped_pools(self.config)
            step.detail = fleet_summary(self.pools) + (
                f"; no nodes for queued-provisioning pools {', '.join(skipped)}" if skipped else ""
            )
        rest = RestClient(self.cluster.kubeconfig)
        version = self.kubectl().json("version")["serverVersion"]["gitVersion"]
        charts = chart_objects(self.config, version)
        self._apply(rest, [o for o in self.objects if o["kind"] in ("Namespace", "PriorityClass")])
        for name, namespace in (("jobset", self.config.jobset.namespace), ("kueue", self.config.kueue.namespace)):
            tool = toolchain.TOOLS[name]
            with progress.step(f"{'JobSet' if name == 'jobset' else 'Kueue'} {tool.version}: chart and manager"):
                self._install_chart(rest, charts[namespace], namespace)
        with progress.step("the stack's objects (tiers, queues, admission policies, reconciler)") as step:
            self._apply(rest, self.objects)
            step.detail = f"{len(self.objects)} applied"
        with progress.step("hotswap reconciler (its Deployment's pods run `hotswap run`)") as step:
            namespace = self._reconciler_namespace()
            self._wait_available(namespace, RECONCILER)
            step.detail = f"leader {self._wait_leader(namespace)}"

    def stop(self) -> None:
        # The reconciler first, while the API server answers: on SIGTERM it finishes its write and gives up its Lease.
        if self.node is not None:
            self.node.stop()
            self.node = None
        self.cluster.stop()
        if self._locked and self.lock is not None:
            self.lock.release()
            self._locked = False

    def processes(self) -> list[Process]:
        """Every process started and not yet stopped: the control plane's, the managers', the reconciler's."""
        found = list(self.cluster.processes)
        if self.node is not None:
            for backer in self.node.backers:
                if isinstance(backer, ManagerBacker) and backer.manager is not None and backer.manager.process:
                    found.append(backer.manager.process)
                if isinstance(backer, ReconcilerBacker):
                    found += [process for process, _ in backer.processes.values()]
        return found

    def repair_deleted_nodes(self, missing_since: dict[str, float], after: float, out: TextIO) -> None:
        """Create again the fake TPU hosts deleted at least `after` seconds ago."""
        nodes = {n["metadata"]["name"]: n for n in tpu_node_objects(self.pools)}
        present = {n["metadata"]["name"] for n in self.kubectl().json("get", "nodes")["items"]}
        for name in due_repairs(list(nodes), present, missing_since, time.monotonic(), after):
            done = self.kubectl().run("create", "-f", "-", stdin=json.dumps(nodes[name]), check=False)
            said = "created again" if done.returncode == 0 else f"not created again: {done.stderr.strip()}"
            print(f"playground: node {name} {said} ({after:.0f} s after it was deleted)", file=out, flush=True)

    def dead_core_process(self) -> Process | None:
        """A control-plane process that exited (the managers and the reconciler are restarted by their backers)."""
        return next((p for p in self.cluster.processes if not p.running and p.name in CORE), None)

    # ---- steps -----------------------------------------------------------------------------------------------
    def kubectl(self) -> Kubectl:
        return self.cluster.kubectl()

    def _start_nodes(self) -> None:
        cluster = self.cluster
        # Stopped in this order: a Workload write the reconciler finishes on SIGTERM passes Kueue's webhook.
        backers: list[Any] = [
            ReconcilerBacker(cluster, self._reconciler_namespace()),
            ManagerBacker(
                cluster, "kueue", "kueue-manager", self.config.kueue.namespace, cluster.directory / "kueue-certs"
            ),
            ManagerBacker(cluster, "jobset", "jobset-manager", self.config.jobset.namespace),
        ]
        self.node = ProcessBackedNode(cluster, backers, name="system-0", labels=system_node_labels(self.config))
        self.node.start()
        nodes = tpu_node_objects(self.pools)
        if nodes:
            kubectl = self.kubectl()
            kubectl.run("create", "-f", "-", stdin=_as_list(nodes))
            names = {n["metadata"]["name"] for n in nodes}
            wait_for(f"{len(names)} fake TPU nodes to be Ready", lambda: names <= self._ready_nodes(), START_TIMEOUT)

    def _ready_nodes(self) -> set[str]:
        return {
            n["metadata"]["name"]
            for n in self.kubectl().json("get", "nodes")["items"]
            if any(
                c["type"] == "Ready" and c["status"] == "True" for c in (n.get("status") or {}).get("conditions") or []
            )
        }

    def _install_chart(self, rest: RestClient, chart: list[JsonObj], namespace: str) -> None:
        """CRDs first, Established before anything of their kinds; then the rest, and wait for the manager."""
        crds = [o for o in chart if o["kind"] == "CustomResourceDefinition"]
        self._apply(rest, crds, namespace)
        names = {crd["metadata"]["name"] for crd in crds}
        wait_for(f"{len(names)} CRDs to be Established", lambda: names <= self._established(), START_TIMEOUT)
        self._apply(rest, [o for o in chart if o["kind"] != "CustomResourceDefinition"], namespace)
        for deployment in (o for o in chart if o["kind"] == "Deployment"):
            self._wait_available(namespace, deployment["metadata"]["name"])

    def _established(self) -> set[str]:
        return {
            crd["metadata"]["name"]
            for crd in self.kubectl().json("get", "crd")["items"]
            if any(
                c["type"] == "Established" and c["status"] == "True"
                for c in (crd.get("status") or {}).get("conditions") or []
            )
        }

    def _apply(self, rest: RestClient, objects: list[JsonObj], namespace: str | None = None) -> None:
        refused = [o for o in apply_all(rest, objects, namespace=namespace) if not o.accepted]
        if refused:
            raise PlaygroundError(
                "the API server refused " + "; ".join(f"{o.object}: {o.error}" for o in refused[:5])
                + (f" (and {len(refused) - 5} more)" if len(refused) > 5 else "")
            )  # fmt: skip

    def _reconciler_namespace(self) -> str:
        found = [o for o in self.objects if o["kind"] == "Deployment" and o["metadata"]["name"] == RECONCILER]
        if not found:
            raise PlaygroundError(f"stack {self.stack} deploys no {RECONCILER} Deployment (is `hotswap.mode` off?)")
        return str(found[0]["metadata"]["namespace"])

    def _wait_available(self, namespace: str, name: str) -> None:
        def available() -> bool:
            failures = self.node.failures() if self.node is not None else []
            if failures:
                raise PlaygroundError(f"a process behind a pod keeps failing: {'; '.join(failures)}")
            done = self.kubectl().run("get", "deployment", name, "-n", namespace, "-o", "json", check=False)
            if done.returncode != 0:
                return False
            status = _json(done.stdout).get("status", {})
            return bool(status.get("availableReplicas")) and status.get("availableReplicas") == status.get("replicas")

        wait_for(f"Deployment {namespace}/{name} to be available", available, START_TIMEOUT)

    def _wait_leader(self, namespace: str) -> str:
        holder: list[str] = []

        def held() -> bool:
            done = self.kubectl().run("get", "lease", RECONCILER, "-n", namespace, "-o", "json", check=False)
            name = _json(done.stdout).get("spec", {}).get("holderIdentity") if done.returncode == 0 else None
            holder[:] = [str(name)] if name else []
            return bool(holder)

        wait_for(f"a {RECONCILER} replica to take its Lease", held, START_TIMEOUT)
        return holder[0]

    # ---- what the user reads ---------------------------------------------------------------------------------
    def ready(self, seconds: float) -> Ready:
        queues = tuple(
            f"{o['metadata']['namespace']}/{o['metadata']['name']}" for o in self.objects if o["kind"] == "LocalQueue"
        )
        tool_dirs = tuple(dict.fromkeys((toolchain.binary("kubectl").parent, Path(sys.executable).parent)))
        return Ready(
            stack=self.stack,
            seconds=seconds,
            kubeconfig=self.cluster.kubeconfig,
            tool_dirs=tool_dirs,
            local_queues=queues,
            tiers=tuple(t.name for t in self.config.priorities),
            logs=self.cluster.directory / "logs",
        )


CORE = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")


def _render(stack: str, stack_config: JsonObj | None = None) -> list[JsonObj]:
    """The stack's Kubernetes objects under Pulumi mocks; the program's warnings (about a real deployment's image
    build, say) are shown only if rendering fails."""
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said), contextlib.redirect_stdout(said):
            resources = run_program(stack, stack_config).resources
    except Exception as error:
        raise PlaygroundError(f"stack {stack} does not render: {error}\n{said.getvalue()}") from None
    return [o for o in kubernetes_objects(resources) if served_locally(o)]


def _as_list(objects: list[JsonObj]) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})


def _json(text: str) -> JsonObj:
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _raise_interrupted(signum: int, frame: FrameType | None) -> None:
    raise Interrupted(signal.Signals(signum).name)


@contextlib.contextmanager
def _signals_ignored() -> Iterator[None]:
    """While stopping, a second Ctrl-C must not cut the clean-up short."""
    previous = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run(
    stack: str,
    platform: JsonObj,
    directory: Path,
    until: Callable[[Playground], bool] | None = None,
    out: TextIO = sys.stdout,
) -> int:
    """Start the playground, print how to use it, run until Ctrl-C/SIGTERM (or `until` holds), stop it all."""
    previous = {sig: signal.signal(sig, _raise_interrupted) for sig in (signal.SIGTERM, signal.SIGHUP)}
    started = time.monotonic()
    playground: Playground | None = None
    code = 0
    try:
        playground = Playground(stack, platform, directory)
        playground.start(Progress(STEPS + (playground.lock is not None), out))
        print(ready_message(playground.ready(time.monotonic() - started)), file=out, flush=True)
        missing_since: dict[str, float] = {}
        while until is None or not until(playground):
            dead = playground.dead_core_process()
            if dead is not None:
                print(f"playground: {dead.name} exited; its log ends:\n{dead.tail()}", file=out, flush=True)
                code = 1
                break
            with contextlib.suppress(KubectlError, OSError, subprocess.TimeoutExpired):
                playground.repair_deleted_nodes(missing_since, REPAIR_AFTER_SECONDS, out)
            time.sleep(2)
    except (KeyboardInterrupt, Interrupted):
        pass
    except Exception as error:  # every failure ends the same way: what went wrong, where the logs are, clean-up
        print(f"playground: {error}", file=out)
        if playground is not None:
            print(f"playground: logs of every process in {playground.cluster.directory / 'logs'}", file=out)
        code = 1
    finally:
        with _signals_ignored():
            if playground is not None:
                print("playground: stopping every process it started ...", file=out, flush=True)
                stopping = time.monotonic()
                playground.stop()
                print(f"playground: stopped in {time.monotonic() - stopping:.1f} s", file=out, flush=True)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return code
