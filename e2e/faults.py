"""Faults on the local cluster's fake TPU hosts, and their repair.

kwok plays every fake node's kubelet: it keeps the node Ready and its lease fresh, and runs the pods bound to it.
A node leaves kwok's hands when its `kwok.x-k8s.io/node` annotation stops matching kwok's selector, which is how a
host "fails" here: nothing reports for it any more, as for a host whose kubelet is gone. What GKE (or the node's
kubelet) then does to the pods is played by the harness, as each fault describes; what Kubernetes does by itself
(the node lifecycle controller's taints, the pod garbage collector) is left to kube-controller-manager.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

from e2e.hotswap_scenario import NODEPOOL_LABEL, Fault
from e2e.nodes import KWOK_ANNOTATION, fleet_nodes
from e2e.rest import RestClient

JsonObj = dict[str, Any]
STRATEGIC = "application/strategic-merge-patch+json"
MERGE = "application/merge-patch+json"
FAILED_VALUE = "failed"  # anything but kwok's selector value: kwok lets the node go

# The DisruptionTarget reasons Kubernetes itself writes (k8s.io/api core/v1 PodReason*): the taint-eviction
# controller for pods on a NoExecute-tainted NotReady node, the kubelet's graceful node shutdown for a reclaimed
# Spot VM. Either makes the template's pod failure policy (`onPodConditions: DisruptionTarget`) fail the Job with
# reason PodFailurePolicy, which the JobSet's infrastructure rule restarts without spending its restart budget.
TAINT_EVICTION_REASON = "DeletionByTaintManager"
NODE_SHUTDOWN_REASON = "TerminationByKubelet"


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _check(response: Any, what: str) -> None:
    if not response.ok:
        raise RuntimeError(f"{what}: {response.status}: {response.message}")


def pods_on(rest: RestClient, node: str) -> list[JsonObj]:
    response = rest.request("GET", "/api/v1/pods", query={"fieldSelector": f"spec.nodeName={node}"})
    _check(response, f"list the pods on {node}")
    items: list[JsonObj] = response.body.get("items", [])
    return items


def release_from_kwok(rest: RestClient, node: str) -> None:
    """kwok stops heartbeating the node: its kubelet is gone."""
    patch = {"metadata": {"annotations": {KWOK_ANNOTATION: FAILED_VALUE}}}
    _check(rest.request("PATCH", f"/api/v1/nodes/{node}", patch, content_type=MERGE), f"take {node} from kwok")


def mark_not_ready(rest: RestClient, node: str, reason: str, message: str, status: str = "False") -> None:
    """Ready=False now, rather than after node-monitor-grace-period (50 s) of silence: the node lifecycle controller
    then taints it `node.kubernetes.io/not-ready` (NoSchedule and NoExecute) at once; with `status` Unknown, as it
    marks a node whose kubelet stopped posting, `node.kubernetes.io/unreachable`."""
    now = _now()
    condition = {
        "type": "Ready",
        "status": status,
        "reason": reason,
        "message": message,
        "lastHeartbeatTime": now,
        "lastTransitionTime": now,
    }
    patch = {"status": {"conditions": [condition]}}
    _check(
        rest.request("PATCH", f"/api/v1/nodes/{node}/status", patch, content_type=STRATEGIC), f"mark {node} NotReady"
    )


def terminate_pods(rest: RestClient, node: str, reason: str, message: str) -> list[str]:
    """Every pod on `node` Failed with a DisruptionTarget condition, as the component named by `reason` leaves
    it; a terminal pod is then deleted at once (the API server skips the grace period of a terminal pod)."""
    now = _now()
    names = []
    for pod in pods_on(rest, node):
        meta = pod["metadata"]
        containers = [
            {
                "name": c["name"],
                "image": c["image"],
                "imageID": "",
                "ready": False,
                "restartCount": 0,
                "state": {"terminated": {"exitCode": 137, "reason": "Error", "finishedAt": now, "startedAt": now}},
            }
            for c in pod["spec"]["containers"]
        ]
        patch = {
            "status": {
                "phase": "Failed",
                "reason": reason,
                "message": message,
                "conditions": [
                    {"type": "DisruptionTarget", "status": "True", "reason": reason, "message": message,
                     "lastTransitionTime": now},
                    {"type": "Ready", "status": "False", "lastTransitionTime": now},
                    {"type": "ContainersReady", "status": "False", "lastTransitionTime": now},
                ],
                "containerStatuses": containers,
            }
        }  # fmt: skip
        path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/status"
        response = rest.request("PATCH", path, patch, content_type=STRATEGIC)
        if response.status != 404:
            _check(response, f"terminate pod {meta['namespace']}/{meta['name']}")
            names.append(meta["name"])
    return names


def inject(rest: RestClient, fault: Fault, node: str) -> None:
    """Fail `node` the way `fault` says."""
    if fault in (Fault.HOST_FAILURE, Fault.HOST_FAILURE_SLICE_REPAIR):
        release_from_kwok(rest, node)
        mark_not_ready(rest, node, "KubeletNotReady", "e2e: TPU host failure")
        terminate_pods(rest, node, TAINT_EVICTION_REASON, "e2e: TPU host failure; the pod was evicted")
        if fault is Fault.HOST_FAILURE_SLICE_REPAIR:
            for other in slice_nodes(rest, node):
                cordon(rest, other, True)
    elif fault is Fault.SPOT_PREEMPTION:
        # Graceful node shutdown first (the kubelet terminates its pods), then the VM stops.
        terminate_pods(rest, node, NODE_SHUTDOWN_REASON, "e2e: Spot VM reclaimed; node is shutting down")
        release_from_kwok(rest, node)
        mark_not_ready(rest, node, "KubeletNotReady", "e2e: Spot VM stopped")
    elif fault is Fault.UNREACHABLE:
        # The zombie path: nobody reports the pods dead, so they stay Running in the API until the taint manager
        # evicts them (300 s of default toleration) and then Terminating while the node stays unreachable.
        release_from_kwok(rest, node)
        mark_not_ready(rest, node, "NodeStatusUnknown", "Kubelet stopped posting node status.", status="Unknown")
    elif fault is Fault.NODE_DELETION:
        release_from_kwok(rest, node)
        response = rest.request("DELETE", f"/api/v1/nodes/{node}")
        _check(response, f"delete node {node}")
    else:  # pragma: no cover - the enum is closed
        raise ValueError(f"unknown fault {fault!r}")


def slice_nodes(rest: RestClient, node: str) -> list[str]:
    """Every host of `node`'s slice (its node pool), `node` included."""
    response = rest.request("GET", f"/api/v1/nodes/{node}")
    _check(response, f"get node {node}")
    pool = response.body["metadata"]["labels"][NODEPOOL_LABEL]
    listed = rest.request("GET", "/api/v1/nodes", query={"labelSelector": f"{NODEPOOL_LABEL}={pool}"})
    _check(listed, f"list the nodes of pool {pool}")
    return sorted(n["metadata"]["name"] for n in listed.body.get("items", []))


def cordon(rest: RestClient, node: str, unschedulable: bool) -> None:
    patch = {"spec": {"unschedulable": unschedulable or None}}
    _check(rest.request("PATCH", f"/api/v1/nodes/{node}", patch, content_type=MERGE), f"cordon {node}")


def repair(rest: RestClient, fault: Fault, node: str, node_factory: Callable[[], list[JsonObj]] = fleet_nodes) -> None:
    """The node back as GKE's repair leaves it: kwok's again (it reports Ready and renews the lease; the node
    lifecycle controller lifts its taints), or created again after a deletion; a repaired slice uncordoned."""
    if fault is Fault.HOST_FAILURE_SLICE_REPAIR:
        for other in slice_nodes(rest, node):
            cordon(rest, other, False)
    if fault is Fault.NODE_DELETION:
        (obj,) = [n for n in node_factory() if n["metadata"]["name"] == node]
        _check(rest.request("POST", "/api/v1/nodes", obj), f"create node {node} again")
        return
    patch = {"metadata": {"annotations": {KWOK_ANNOTATION: "fake"}}}
    _check(rest.request("PATCH", f"/api/v1/nodes/{node}", patch, content_type=MERGE), f"give {node} back to kwok")


def node_ready(rest: RestClient, node: str) -> bool:
    response = rest.request("GET", f"/api/v1/nodes/{node}")
    if not response.ok:
        return False
    taints = [t for t in response.body.get("spec", {}).get("taints", []) if t["key"].startswith("node.kubernetes.io/")]
    conditions = response.body.get("status", {}).get("conditions", [])
    ready = any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
    return ready and not taints and not response.body.get("spec", {}).get("unschedulable")
