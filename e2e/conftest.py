"""The e2e suite's cluster: a local control plane it starts and stops, or a cluster named by E2E_KUBECONFIG.

E2E_KUBECONFIG (not KUBECONFIG, so a shell pointed at production never becomes a test target by accident) turns
the suite into a post-deploy acceptance test of that cluster; the tests that need the local cluster's fake nodes
or restarts skip there, saying why.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from e2e import report
from e2e.apply import apply_all
from e2e.charts import chart_objects
from e2e.cluster import LocalCluster
from e2e.controllers import SERVING_CERTS, LocalManager, manager_spec
from e2e.kubectl import Kubectl, KubectlError
from e2e.rest import RestClient
from gke_tpu_priority.components.config import parse_platform_config
from gke_tpu_priority.components.kueue import CONTROLLERS_PRIORITY_CLASS
from testkit.mock_runtime import load_stack_config
from testkit.stacks import stack_run
from tools import toolchain, upstream
from tools.manifests import kubernetes_objects

JsonObj = dict[str, Any]
BUILD_DIR = Path("build/e2e")
BUILDS_RECORD = BUILD_DIR / "builds.json"


@dataclass
class Target:
    kubectl: Kubectl
    rest: RestClient
    local: LocalCluster | None

    def need_local(self) -> LocalCluster:
        if self.local is None:
            pytest.skip("needs the local control plane (E2E_KUBECONFIG names another cluster)")
        return self.local


def _record_versions(kubectl: Kubectl) -> None:
    versions = report.section("versions")
    server = kubectl.json("version")["serverVersion"]
    versions["kube-apiserver"] = server["gitVersion"]
    for tool in toolchain.TOOLS.values():
        versions[f"{tool.name} (built)"] = tool.version
    if BUILDS_RECORD.is_file():
        report.section("build").update(json.loads(BUILDS_RECORD.read_text()))


def _interrupt_on_sigterm() -> None:
    """`timeout`, CI and process supervisors stop with SIGTERM; as an interrupt, it still runs every fixture's
    teardown, so no process of the local cluster outlives the suite."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, interrupt)


FIRST_MODULES = ("test_pulumi_lifecycle.py", "test_playground.py", "test_scale.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Modules with a cluster of their own run first, before the session's cluster exists: where JobSet's
    certificate directory is one per machine (no private mounts, e2e.private_mount), two local clusters at once
    would wait on each other for it."""
    items.sort(key=lambda item: item.path.name not in FIRST_MODULES)


@pytest.fixture(scope="session")
def target() -> Iterator[Target]:
    _interrupt_on_sigterm()
    external = os.environ.get("E2E_KUBECONFIG")
    kubectl_binary = toolchain.binary("kubectl")
    if external:
        kubectl = Kubectl(kubectl_binary, Path(external))
        report.section("cluster").update({"kind": "external"})
        _record_versions(kubectl)
        yield Target(kubectl, RestClient(Path(external)), None)
        return
    cluster = LocalCluster(BUILD_DIR / "cluster")
    started = time.monotonic()
    try:
        cluster.start()
        report.section("cluster").update(
            {
                "kind": "local",
                "startSeconds": round(time.monotonic() - started, 1),
                "componentReadySeconds": cluster.started_seconds,
            }
        )
        _record_versions(cluster.kubectl())
        yield Target(cluster.kubectl(), RestClient(cluster.kubeconfig), cluster)
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def crds(target: Target) -> list[str]:
    """The pinned Kueue and JobSet CRDs, installed with server-side apply and Established."""
    root = upstream.data_dir()
    files = sorted((root / "crds" / "kueue").glob("*.yaml")) + sorted((root / "crds" / "jobset").glob("*.yaml"))
    if not files:
        raise RuntimeError(f"no CRDs under {root}/crds: {upstream.how_to_get()}")
    kubectl = target.kubectl
    for path in files:
        kubectl.run("apply", "--server-side", "--field-manager=gke-tpu-priority-e2e", "-f", str(path))
    _wait_established(kubectl)
    names = [kubectl.json("get", "-f", str(path))["metadata"]["name"] for path in files]
    report.section("crds").update({"installed": names})
    return names


def _wait_established(kubectl: Kubectl, timeout: float = 60) -> None:
    """`kubectl wait` refuses a CRD the server has not given any status condition yet (".status.conditions
    accessor error: <nil>"), which happens right after the apply on a busy machine: ask again until it waits."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            kubectl.run("wait", "--for=condition=Established", f"--timeout={timeout:.0f}s", "crd", "--all")
            return
        except KubectlError as err:
            if "accessor error" not in str(err) or time.monotonic() > deadline:
                raise
            time.sleep(1)


# Kinds whose CRDs GKE itself installs (Managed Service for Prometheus); the local cluster has no source for them
# (the Go module proxy refuses github.com/GoogleCloudPlatform/prometheus-engine). Applied on a real GKE cluster.
GKE_ONLY_GROUPS = ("monitoring.googleapis.com/",)


def served_locally(target: Target, obj: JsonObj) -> bool:
    return target.local is None or not str(obj["apiVersion"]).startswith(GKE_ONLY_GROUPS)


CONTROLLERS_STACK = "dev"


@dataclass
class Controllers:
    """The JobSet and Kueue charts (with a stack's values) and their managers, serving their webhooks."""

    jobset: LocalManager
    kueue: LocalManager
    installed: list[JsonObj]

    def owns(self, obj: JsonObj) -> bool:
        """Whether `obj` is part of the controllers' install (a test must not delete it)."""
        meta = obj.get("metadata", {})
        return any(
            o["kind"] == obj.get("kind") and o["metadata"]["name"] == meta.get("name")
            and o["metadata"].get("namespace") == meta.get("namespace")
            for o in self.installed
        )  # fmt: skip


@pytest.fixture(scope="session")
def controllers(target: Target, crds: list[str]) -> Iterator[Controllers]:
    """Install both charts as the dev stack renders them and run each manager behind its chart, JobSet first (Kueue's
    JobSet integration needs JobSet's CRD served and its webhook up), as KueueJobSet orders them."""
    cluster = target.need_local()
    config = parse_platform_config(load_stack_config(CONTROLLERS_STACK)["gke-tpu-priority:platform"])
    platform = [
        o
        for o in kubernetes_objects(stack_run(CONTROLLERS_STACK).resources)
        if (o["kind"] == "Namespace" and o["metadata"]["name"] in (config.kueue.namespace, config.jobset.namespace))
        or (o["kind"] == "PriorityClass" and o["metadata"]["name"] == CONTROLLERS_PRIORITY_CLASS)
    ]
    version = target.kubectl.json("version")["serverVersion"]["gitVersion"]
    charts = chart_objects(config, version)
    installed = list(platform)
    managers: list[LocalManager] = []
    section = report.section("controllers")
    try:
        _install(target, platform, None)
        for name, namespace, binary, cert_dir in (
            ("jobset", config.jobset.namespace, "jobset-manager", SERVING_CERTS),
            ("kueue", config.kueue.namespace, "kueue-manager", cluster.directory / "kueue-certs"),
        ):
            chart = charts[namespace]
            _install(target, chart, namespace)
            installed += [{**o, "metadata": {"namespace": namespace, **o["metadata"]}} for o in chart]
            manager = LocalManager(cluster, manager_spec(name, binary, namespace, chart), cert_dir)
            managers.append(manager)
            manager.start()
            section[name] = {"version": toolchain.TOOLS[name].version, "readySeconds": manager.ready_seconds}
        yield Controllers(managers[0], managers[1], installed)
    finally:
        for manager in reversed(managers):
            section.setdefault(manager.spec.name, {})["restarts"] = manager.restarts
            manager.stop()


def _install(target: Target, objects: list[JsonObj], namespace: str | None) -> None:
    outcomes = apply_all(target.rest, objects, namespace=namespace)
    refused = [o.as_json() for o in outcomes if not o.accepted]
    if refused:
        raise RuntimeError(f"the server refused part of the controllers' install: {refused}")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if report.section("cluster"):
        path = report.write(BUILD_DIR / "report.json")
        print(f"\ne2e: wrote {path}")
