"""A real `pulumi up` of this package: the real engine and Kubernetes provider against the local control plane.

The existing-cluster stack is pointed at the local cluster's kubeconfig context, with both charts taken from a local
directory (the `kueue.chart`/`jobset.chart` settings, here the charts inside the very Go modules the controllers are
built from). The charts' controllers and the reconciler run as local processes standing in for their pods
(e2e.process_node), so every await of the engine waits for something real. Then the lifecycle a platform team goes
through: a no-op `up`, the changes users make, the policy pack in the engine, and `destroy` with nothing left behind.

This module starts a cluster of its own (the charts' cluster-scoped objects have fixed names, so it cannot share the
session's cluster) and runs first, before the session's cluster exists.
"""

from __future__ import annotations

import copy
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from e2e import report
from e2e.cluster import LocalCluster
from e2e.conftest import BUILD_DIR
from e2e.controllers import shared_directory_lock
from e2e.nodes import ZONE
from e2e.process_node import LABEL, ManagerBacker, ProcessBackedNode, ReconcilerBacker
from e2e.pulumi_engine import Engine, Outcome
from gke_tpu_priority.components.config.priorities import default_tiers as package_default_tiers
from gke_tpu_priority.components.tpu_shapes import ACCELERATOR, ACCELERATOR_LABEL, TOPOLOGY_LABEL
from tools import toolchain

JsonObj = dict[str, Any]
RECONCILER_NAMESPACE = "hotswap-system"
IMAGE = "registry.example.com/platform/hotswap-reconciler:v0.1.0@sha256:" + "0" * 64


def base_platform() -> JsonObj:
    """The existing-cluster stack for the local cluster: its fake TPU pools, its kubeconfig context, local charts."""
    charts = {
        tool: toolchain.module_source(tool, f"sigs.k8s.io/{tool}") / "charts" / tool for tool in ("kueue", "jobset")
    }
    region = ZONE.rsplit("-", 1)[0]
    return {
        "project": "e2e-local",
        "region": region,
        "cluster": {
            "mode": "existing",
            "name": "e2e-local",
            "location": region,
            "kubeconfigContext": "e2e",
            "systemNodeSelector": {LABEL: "true"},
        },
        "tpuPools": [
            {
                "name": "tpu-4x4",
                "topology": "4x4",
                "slices": 4,
                "zone": ZONE,
                "capacity": {"mode": "reservation", "reservation": {"name": "e2e-reservation"}},
            },
            {"name": "tpu-2x2", "topology": "2x2", "slices": 2, "zone": ZONE, "capacity": {"mode": "spot"}},
        ],
        "kueue": {"chart": str(charts["kueue"])},
        "jobset": {"chart": str(charts["jobset"])},
        "hotswap": {"image": IMAGE, "namespace": RECONCILER_NAMESPACE},
        "queues": {
            "cohorts": [{"name": "research"}],
            "clusterQueues": [
                {"name": "team-a", "cohort": "research", "namespaces": ["team-a", "shared"], "quotas": quotas(32, 4)},
                {"name": "team-b", "cohort": "research", "namespaces": ["team-b", "shared"], "quotas": quotas(32, 4)},
            ],
            "localQueues": [
                {"name": "training", "namespace": "team-a", "clusterQueue": "team-a"},
                {"name": "training", "namespace": "team-b", "clusterQueue": "team-b"},
                {"name": "pool", "namespace": "shared", "clusterQueue": "team-a"},
            ],
        },
        "teams": [
            {"name": "team-a", "namespaces": ["team-a", "shared"], "maxTier": "training-high", "groups": ["a@x.com"]},
            {"name": "team-b", "namespaces": ["team-b"], "maxTier": "training-low", "groups": ["b@x.com"]},
        ],
    }


def quotas(chips_4x4: int, chips_2x2: int) -> list[JsonObj]:
    return [{"flavor": "v6e-4x4", "chips": chips_4x4}, {"flavor": "v6e-2x2", "chips": chips_2x2}]


def default_tiers() -> list[JsonObj]:
    return [t.model_dump(by_alias=True, exclude_none=True) for t in package_default_tiers()]


@dataclass
class Lifecycle:
    cluster: LocalCluster
    node: ProcessBackedNode
    engine: Engine
    platform: JsonObj
    steps: dict[str, JsonObj] = field(default_factory=dict)

    def step(self, name: str, outcome: Outcome) -> Outcome:
        self.steps[name] = outcome.as_json()
        report.section("pulumi")["steps"] = self.steps
        return outcome


def _explain(outcome: Outcome) -> str:
    return f"pulumi {outcome.operation} failed ({outcome.log}):\n" + "\n".join(outcome.errors or [outcome.error])


@pytest.fixture(scope="module")
def lifecycle() -> Iterator[Lifecycle]:
    if os.environ.get("E2E_KUBECONFIG"):
        pytest.skip("needs the local control plane: it runs the charts' controllers as local processes")
    directory = (BUILD_DIR / "pulumi").resolve()
    # A new cluster each run, so the engine's state starts empty too (state of a cluster that is gone is a lie).
    shutil.rmtree(directory / "engine", ignore_errors=True)
    cluster = LocalCluster(directory / "cluster")
    backers: list[Any] = []
    node: ProcessBackedNode | None = None
    engine: Engine | None = None
    section = report.section("pulumi")
    section["versions"] = {
        "pulumi": toolchain.TOOLS["pulumi"].version,
        "pulumi-kubernetes": toolchain.PULUMI_KUBERNETES_VERSION,
    }
    # Where JobSet's certificate directory is one per machine, wait for it before anything starts, so no engine
    # await runs out while another local cluster holds it.
    lock = shared_directory_lock()
    if lock is not None:
        lock.acquire(timeout=3600)
    try:
        cluster.start()
        backers = [
            ManagerBacker(cluster, "jobset", "jobset-manager", "jobset-system"),
            ManagerBacker(cluster, "kueue", "kueue-manager", "kueue-system", cluster.directory / "kueue-certs"),
            ReconcilerBacker(cluster, RECONCILER_NAMESPACE),
        ]
        node = ProcessBackedNode(cluster, backers)
        node.start()
        engine = Engine(directory / "engine", cluster.kubeconfig)
        yield Lifecycle(cluster, node, engine, base_platform())
    finally:
        section["driverCrashes"] = engine.crashes if engine is not None else []
        if node is not None:
            section["podReadySeconds"] = node.ready_seconds
            node.stop()
        cluster.stop()
        if lock is not None:
            lock.release()


def test_up_creates_everything_and_its_awaits_complete(lifecycle: Lifecycle) -> None:
    outcome = lifecycle.step("up", lifecycle.engine.run("up", lifecycle.platform, label="create"))
    assert outcome.ok, _explain(outcome)
    assert outcome.changes.get("create", 0) > 40
    kubectl = lifecycle.cluster.kubectl()
    for namespace in ("kueue-system", "jobset-system", RECONCILER_NAMESPACE):
        deployments = kubectl.json("get", "deployments", "-n", namespace)["items"]
        assert deployments, f"no Deployment in {namespace}"
        for deployment in deployments:
            status = deployment["status"]
            assert status.get("readyReplicas", 0) == deployment["spec"]["replicas"], (namespace, status)
    assert lifecycle.node.failures() == []


def test_a_second_up_changes_nothing(lifecycle: Lifecycle) -> None:
    outcome = lifecycle.step(
        "noop-up", lifecycle.engine.run("up", lifecycle.platform, expect_no_changes=True, label="noop")
    )
    assert outcome.ok, _explain(outcome)
    assert outcome.changed == 0, outcome.changes


def _update(lifecycle: Lifecycle, name: str, platform: JsonObj) -> Outcome:
    outcome = lifecycle.step(name, lifecycle.engine.run("up", platform, label=name))
    assert outcome.ok, _explain(outcome)
    assert outcome.changed > 0, f"{name}: the engine saw no change"
    lifecycle.platform = platform
    return outcome


def _changed(lifecycle: Lifecycle, change: Any) -> JsonObj:
    platform = copy.deepcopy(lifecycle.platform)
    change(platform)
    return platform


def test_switching_hotswap_mode_replaces_what_kubernetes_will_not_change_in_place(lifecycle: Lifecycle) -> None:
    """The tiers' PriorityClasses flip `preemptionPolicy`, which the API server refuses to update."""
    _update(lifecycle, "hotswap-mode", _changed(lifecycle, lambda p: p["hotswap"].update(mode="scheduler-assisted")))
    classes = lifecycle.cluster.kubectl().json("get", "priorityclasses")["items"]
    policies = {c["metadata"]["name"]: c.get("preemptionPolicy") for c in classes}
    assert policies["training-high"] == "PreemptLowerPriority", policies


def test_changing_a_tiers_value_and_adding_a_tier_above_apply(lifecycle: Lifecycle) -> None:
    def raise_low(p: JsonObj) -> None:
        p["priorities"] = default_tiers()
        next(t for t in p["priorities"] if t["name"] == "training-low")["value"] = 1_500_000

    _update(lifecycle, "tier-value", _changed(lifecycle, raise_low))

    def add_top(p: JsonObj) -> None:
        p["priorities"] = [
            {"name": "training-urgent", "value": 3_000_000, "description": "Deadline work.", "preempts": True},
            *p["priorities"],
        ]

    _update(lifecycle, "tier-added", _changed(lifecycle, add_top))
    kubectl = lifecycle.cluster.kubectl()
    values = {c["metadata"]["name"]: c["value"] for c in kubectl.json("get", "priorityclasses")["items"]}
    assert values["training-low"] == 1_500_000 and values["training-urgent"] == 3_000_000
    wpcs = kubectl.json("get", "workloadpriorityclasses.kueue.x-k8s.io")["items"]
    assert {w["metadata"]["name"]: w["value"] for w in wpcs}["training-urgent"] == 3_000_000


def test_moving_a_local_queue_to_another_cluster_queue_applies(lifecycle: Lifecycle) -> None:
    """`spec.clusterQueue` is immutable: the LocalQueue is replaced."""

    def move(p: JsonObj) -> None:
        next(q for q in p["queues"]["localQueues"] if q["name"] == "pool")["clusterQueue"] = "team-b"

    _update(lifecycle, "localqueue-moved", _changed(lifecycle, move))
    queue = lifecycle.cluster.kubectl().json("get", "localqueue.kueue.x-k8s.io", "pool", "-n", "shared")
    assert queue["spec"]["clusterQueue"] == "team-b"


def test_adding_and_removing_a_team_and_changing_quotas_apply(lifecycle: Lifecycle) -> None:
    def add_team(p: JsonObj) -> None:
        p["queues"]["clusterQueues"].append(
            {"name": "team-c", "cohort": "research", "namespaces": ["team-c"], "quotas": quotas(0, 0)}
        )
        p["queues"]["localQueues"].append({"name": "training", "namespace": "team-c", "clusterQueue": "team-c"})
        p["teams"].append(
            {"name": "team-c", "namespaces": ["team-c"], "maxTier": "training-low", "users": ["c@example.com"]}
        )

    _update(lifecycle, "team-added", _changed(lifecycle, add_team))
    kubectl = lifecycle.cluster.kubectl()
    assert kubectl.json("get", "clusterqueue.kueue.x-k8s.io", "team-c")["metadata"]["name"] == "team-c"

    def requota(p: JsonObj) -> None:
        next(q for q in p["queues"]["clusterQueues"] if q["name"] == "team-a")["quotas"] = quotas(16, 4)

    _update(lifecycle, "quota-changed", _changed(lifecycle, requota))
    team_a = kubectl.json("get", "clusterqueue.kueue.x-k8s.io", "team-a")
    chips = {
        f["name"]: f["resources"][0]["nominalQuota"] for g in team_a["spec"]["resourceGroups"] for f in g["flavors"]
    }
    assert chips["v6e-4x4"] in (16, "16")

    def remove_team(p: JsonObj) -> None:
        p["queues"]["clusterQueues"] = [q for q in p["queues"]["clusterQueues"] if q["name"] != "team-c"]
        p["queues"]["localQueues"] = [q for q in p["queues"]["localQueues"] if q["namespace"] != "team-c"]
        p["teams"] = [t for t in p["teams"] if t["name"] != "team-c"]

    _update(lifecycle, "team-removed", _changed(lifecycle, remove_team))
    gone = kubectl.run("get", "clusterqueue.kueue.x-k8s.io", "team-c", check=False)
    assert gone.returncode != 0 and "NotFound" in gone.stderr


def test_a_policy_pack_runs_in_the_engine_and_refuses_a_broken_convention(lifecycle: Lifecycle) -> None:
    clean = lifecycle.step(
        "policy-preview", lifecycle.engine.run("preview", lifecycle.platform, policy_pack=True, label="policy")
    )
    assert clean.ok, _explain(clean)
    assert [v for v in clean.violations if v["enforcement"] == "mandatory"] == []
    # A team's TPU JobSet that names no LocalQueue: it would bypass Kueue (and every tier's quota).
    pod = {
        "restartPolicy": "Never",
        "nodeSelector": {ACCELERATOR_LABEL: ACCELERATOR, TOPOLOGY_LABEL: "4x4"},
        "containers": [{"name": "c", "image": "busybox", "resources": {"limits": {"google.com/tpu": "4"}}}],
    }
    job = {"parallelism": 4, "completions": 4, "template": {"spec": pod}}
    rogue = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "rogue", "namespace": "default"},
        "spec": {"replicatedJobs": [{"name": "w", "replicas": 1, "template": {"spec": job}}]},
    }
    refused = lifecycle.step(
        "policy-refuses",
        lifecycle.engine.run("preview", lifecycle.platform, policy_pack=True, label="policy-rogue", extra=[rogue]),
    )
    assert not refused.ok
    names = {v["policy"] for v in refused.violations}
    assert "tpu-workload-require-queue-name" in names, refused.violations


def test_destroy_removes_everything(lifecycle: Lifecycle) -> None:
    started = time.monotonic()
    outcome = lifecycle.step("destroy", lifecycle.engine.run("destroy", lifecycle.platform, label="all"))
    assert outcome.ok, _explain(outcome)
    kubectl = lifecycle.cluster.kubectl()
    left = {
        kind: [o["metadata"]["name"] for o in kubectl.json("get", kind, "--all-namespaces")["items"]]
        for kind in ("clusterqueues.kueue.x-k8s.io", "priorityclasses", "validatingadmissionpolicies")
    }
    left["priorityclasses"] = [n for n in left["priorityclasses"] if not n.startswith("system-")]
    report.section("pulumi")["destroySeconds"] = round(time.monotonic() - started, 1)
    assert left == {k: [] for k in left}
    namespaces = {o["metadata"]["name"] for o in kubectl.json("get", "namespaces")["items"]}
    assert not namespaces & {"kueue-system", "jobset-system", RECONCILER_NAMESPACE}
