"""The local control plane itself: the versions it reports, and fake TPU nodes that behave like GKE's."""

from __future__ import annotations

import json
import time
from typing import Any

from e2e import report
from e2e.conftest import Target
from e2e.nodes import default_fleet
from gke_tpu_priority.components.tpu_shapes import (
    ACCELERATOR_LABEL,
    NODEPOOL_LABEL,
    TOPOLOGY_LABEL,
    TPU_RESOURCE,
    TPU_TAINT_KEY,
)
from tools import toolchain


def _ready(node: dict[str, Any]) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in node["status"].get("conditions", []))


def test_servers_report_the_release_they_were_built_from(target: Target) -> None:
    target.need_local()
    version = target.kubectl.json("version")
    assert version["serverVersion"]["gitVersion"] == toolchain.TOOLS["kube"].version
    assert version["clientVersion"]["gitVersion"] == toolchain.TOOLS["kube"].version


def test_every_fake_tpu_host_is_ready_with_gke_labels_taint_and_chips(target: Target) -> None:
    target.need_local()
    nodes = {n["metadata"]["name"]: n for n in target.kubectl.json("get", "nodes")["items"]}
    for spec in default_fleet():
        for name in spec.node_names():
            node = nodes[name]
            assert _ready(node), name
            labels = node["metadata"]["labels"]
            assert labels[NODEPOOL_LABEL] == spec.pool
            assert labels[TOPOLOGY_LABEL] == spec.shape.topology
            assert labels[ACCELERATOR_LABEL] == "tpu-v6e-slice"
            assert node["status"]["allocatable"][TPU_RESOURCE] == str(spec.shape.chips_per_vm)
            assert {"key": TPU_TAINT_KEY, "value": "present", "effect": "NoSchedule"} in node["spec"]["taints"]
    leases = target.kubectl.json("get", "leases", "-n", "kube-node-lease")["items"]
    assert {lease["metadata"]["name"] for lease in leases} >= set(nodes)


def test_a_tpu_pod_is_scheduled_on_a_slice_and_runs(target: Target) -> None:
    """kube-scheduler binds a pod that tolerates the TPU taint and selects a topology; kwok runs it."""
    target.need_local()
    kubectl = target.kubectl
    kubectl.run("create", "namespace", "e2e-smoke")
    # The ServiceAccount controller gives a new namespace its `default` account a moment later; admission refuses
    # a pod before then.
    kubectl.run("wait", "--for=create", "--timeout=60s", "-n", "e2e-smoke", "serviceaccount/default")
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "tpu-smoke", "namespace": "e2e-smoke"},
        "spec": {
            "nodeSelector": {ACCELERATOR_LABEL: "tpu-v6e-slice", TOPOLOGY_LABEL: "2x2"},
            "tolerations": [{"key": TPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [
                {"name": "c", "image": "trainer:1", "resources": {"limits": {TPU_RESOURCE: "4"}}},
            ],
        },
    }
    started = time.monotonic()
    try:
        kubectl.run("create", "-f", "-", stdin=json.dumps(pod))
        kubectl.run(
            "wait", "--for=jsonpath={.status.phase}=Running", "--timeout=60s", "-n", "e2e-smoke", "pod/tpu-smoke"
        )
        running = kubectl.json("get", "-n", "e2e-smoke", "pod", "tpu-smoke")
        report.section("cluster")["podCreateToRunningSeconds"] = round(time.monotonic() - started, 2)
        assert running["spec"]["nodeName"].startswith("tpu-2x2-")
    finally:
        kubectl.run("delete", "namespace", "e2e-smoke", "--wait=true", "--timeout=60s", check=False)
