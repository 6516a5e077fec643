"""The caches keep only what the reconciler reads, and a pass converts nothing it converted before."""

from __future__ import annotations

import asyncio
import copy
from datetime import UTC, datetime, timedelta

import pytest

from gke_tpu_priority.hotswap.kube import snapshot as snapshot_module
from gke_tpu_priority.hotswap.kube.snapshot import CachedJobSet, SnapshotBuilder
from gke_tpu_priority.hotswap.model import Node, Pod, Workload
from testkit.apiserver import FakeApiServer

from .cluster import CLUSTER_QUEUES, JOBSETS, NS, jobset, tpu_node
from .conftest import ClientFactory
from .test_end_to_end import failed_cluster, started  # noqa: F401  (fixture)
from .test_snapshot import with_uid

pytestmark = pytest.mark.timeout(30)

MANAGED_FIELDS = [{"manager": "kubectl", "operation": "Apply", "fieldsV1": {"f:spec": {}}}]


async def test_caches_hold_typed_values_and_no_managed_fields(
    failed_cluster: FakeApiServer,  # noqa: F811
    make_client: ClientFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = failed_cluster
    cq = api.get(CLUSTER_QUEUES, "cq")
    assert cq is not None
    api.patch(CLUSTER_QUEUES, "cq", {"metadata": {"managedFields": MANAGED_FIELDS}})
    js = api.get(JOBSETS, "high", NS)
    assert js is not None
    bulky = {"kubectl.kubernetes.io/last-applied-configuration": "x" * 10_000}
    api.patch(JOBSETS, "high", {"metadata": {"annotations": bulky, "managedFields": MANAGED_FIELDS}}, NS)
    controller = await started(make_client, api)
    try:
        kinds = {name: [v for i in group for v in i.cache.values()] for name, group in controller.informers.items()}
        assert kinds["nodes"] and all(isinstance(v, Node) for v in kinds["nodes"])
        assert kinds["pods"] and all(isinstance(v, Pod) for v in kinds["pods"])
        assert kinds["workloads"] and all(isinstance(v, Workload) for v in kinds["workloads"])
        assert kinds["jobsets"] and all(isinstance(v, CachedJobSet) for v in kinds["jobsets"])
        high = next(v.jobset for v in kinds["jobsets"] if v.jobset.name == "high")
        assert "kubectl.kubernetes.io/last-applied-configuration" not in high.annotations
        (queue,) = kinds["clusterqueues"]
        assert "managedFields" not in queue["metadata"] and queue["spec"]["cohortName"] == "tpu"

        # A pass converts no cached object again: it assembles the values the watches converted.
        calls: list[str] = []
        for name in ("node_from", "pod_from", "jobset_from", "workload_from"):
            real = getattr(snapshot_module, name)
            monkeypatch.setattr(
                snapshot_module, name, lambda *a, _n=name, _r=real, **k: calls.append(_n) or _r(*a, **k)
            )
        snap = controller.snapshot()
        assert calls == [] and len(snap.pods) == len(kinds["pods"]) and len(snap.jobsets) == 2
    finally:
        await controller.stop_watches()


def test_a_priority_class_seen_after_its_jobsets_resolves_them_when_the_snapshot_is_assembled() -> None:
    builder = SnapshotBuilder(attribution_window=timedelta(minutes=10), clock=lambda: datetime.now(UTC))
    entry = builder.jobset_value(with_uid(jobset("train", 1, "p1000"), "js-1"))
    assert entry is not None and entry.jobset.pod_priority is None  # the class is not known yet
    builder.on_priority_classes([{"metadata": {"name": "p1000"}, "value": 1000}])
    (resolved,) = builder.assemble(nodes=[], pods=[], jobsets=[entry], workloads=[], cluster_queues=[]).jobsets
    assert resolved.pod_priority == 1000
    builder.on_priority_classes([{"metadata": {"name": "p1000"}, "value": 5}])
    (resolved,) = builder.assemble(nodes=[], pods=[], jobsets=[entry], workloads=[], cluster_queues=[]).jobsets
    assert resolved.pod_priority == 5


def test_jobsets_outside_the_namespaces_are_not_cached() -> None:
    builder = SnapshotBuilder(
        attribution_window=timedelta(minutes=10), clock=lambda: datetime.now(UTC), namespaces=frozenset({NS})
    )
    outside = with_uid(jobset("train", 1, "p10"), "js-2")
    outside["metadata"]["namespace"] = "elsewhere"
    assert builder.jobset_value(outside) is None
    assert builder.jobset_value(with_uid(jobset("train", 1, "p10"), "js-3")) is not None


async def test_the_event_loop_keeps_running_while_a_pass_plans(
    failed_cluster: FakeApiServer,  # noqa: F811
    make_client: ClientFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Planning a large fleet takes long enough that, on the loop, no watch would be drained and no Lease renewed:
    the plan must run while the loop serves others. The spy plan waits for the loop to answer it."""
    import threading

    import gke_tpu_priority.hotswap.controller as controller_module

    answered = threading.Event()
    waited: list[bool] = []
    real_plan = controller_module.make_plan

    def plan_waiting_for_the_loop(*args: object, **kwargs: object) -> object:
        loop.call_soon_threadsafe(answered.set)
        waited.append(answered.wait(timeout=5))
        return real_plan(*args, **kwargs)  # type: ignore[arg-type]

    loop = asyncio.get_running_loop()
    monkeypatch.setattr(controller_module, "make_plan", plan_waiting_for_the_loop)
    controller = await started(make_client, failed_cluster)
    try:
        await controller.reconcile_once()
        assert waited == [True]
    finally:
        await controller.stop_watches()


def test_pods_listed_before_their_nodes_are_not_copied_on_every_pass() -> None:
    """Pods and Nodes are listed concurrently; a pod converted before its node's pool was known must not cost a copy
    per pass (16,000 copies at 4,096 slices): the planner reads a live node's pool from the node."""
    builder = SnapshotBuilder(attribution_window=timedelta(minutes=10), clock=lambda: datetime.now(UTC))
    early = Pod("ns", "p0", "u0", "train", node_name="n0")
    orphan = Pod("ns", "p1", "u1", "train", node_name="n1")
    builder.on_node_event("ADDED", Node(name="n0", node_pool="pool-0"))
    builder.on_node_event("ADDED", Node(name="n1", node_pool="pool-1"))  # n1 is deleted since
    snap = builder.assemble(
        nodes=[Node(name="n0", node_pool="pool-0")], pods=[early, orphan], jobsets=[], workloads=[], cluster_queues=[]
    )
    assert snap.pods[0] is early
    assert snap.pods[1].node_pool == "pool-1"  # its node is gone: the remembered pool is all there is


def test_equal_small_values_of_different_objects_are_one_object() -> None:
    """Thousands of hosts carry the same taints, thousands of JobSets the same shape, a slice's hosts the same times:
    the caches keep one copy of each (smaller, and faster for the planner to walk)."""
    builder = SnapshotBuilder(attribution_window=timedelta(minutes=10), clock=lambda: datetime.now(UTC))
    first = tpu_node("p0-0", "p0")
    second = copy.deepcopy(first)
    second["metadata"]["name"] = "p0-1"
    a, b = builder.node_value(first), builder.node_value(second)
    assert a is not None and b is not None
    assert a.taints is b.taints and a.ready_transition_time is b.ready_transition_time
    x = builder.jobset_value(with_uid(jobset("x", 2, "p10"), "js-x"))
    y = builder.jobset_value(with_uid(jobset("y", 2, "p10"), "js-y"))
    assert x is not None and y is not None and x.jobset.replicated_jobs is y.jobset.replicated_jobs
