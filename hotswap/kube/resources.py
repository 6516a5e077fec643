"""The Kubernetes resource kinds the reconciler watches, and how to list/watch each with the client."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from kubernetes_asyncio import client

# The generated `patch_*` functions pick `application/json-patch+json` for any body: every patch says what it is.
MERGE_PATCH = "application/merge-patch+json"


@dataclass(frozen=True)
class ResourceKind:
    """A watched kind: API coordinates plus the server-side label selector applied to list/watch."""

    name: str
    group: str
    version: str
    plural: str
    namespaced: bool
    label_selector: str | None = None
    optional: bool = False
    """Enrichment only: when not served (404) or not granted (403) the cache is empty rather than unsynced,
    so a missing CRD or RBAC rule degrades the snapshot instead of stopping the reconciler."""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


NODES = ResourceKind("nodes", "", "v1", "nodes", namespaced=False)
# Every pod: JobSet pods (the jobset-name label) and any other pod using TPU chips occupy slices; no server-side
# selector can say "requests google.com/tpu", so the pod cache keeps only those (hotswap/kube/snapshot.py pod_from).
PODS = ResourceKind("pods", "", "v1", "pods", namespaced=True)
JOBSETS = ResourceKind("jobsets", "jobset.x-k8s.io", "v1alpha2", "jobsets", namespaced=True)
WORKLOADS = ResourceKind("workloads", "kueue.x-k8s.io", "v1beta2", "workloads", namespaced=True)
CLUSTER_QUEUES = ResourceKind("clusterqueues", "kueue.x-k8s.io", "v1beta2", "clusterqueues", namespaced=False)

# Small cluster-scoped kinds that resolve JobSet priority and Kueue TAS flavors.
PRIORITY_CLASSES = ResourceKind(
    "priorityclasses", "scheduling.k8s.io", "v1", "priorityclasses", namespaced=False, optional=True
)
RESOURCE_FLAVORS = ResourceKind(
    "resourceflavors", "kueue.x-k8s.io", "v1beta2", "resourceflavors", namespaced=False, optional=True
)
TOPOLOGIES = ResourceKind("topologies", "kueue.x-k8s.io", "v1beta2", "topologies", namespaced=False, optional=True)

WATCHED: tuple[ResourceKind, ...] = (
    NODES,
    PODS,
    JOBSETS,
    WORKLOADS,
    CLUSTER_QUEUES,
    PRIORITY_CLASSES,
    RESOURCE_FLAVORS,
    TOPOLOGIES,
)

ListFunction = Callable[..., Awaitable[Any]]


def list_function(api: client.ApiClient, kind: ResourceKind, namespace: str | None = None) -> ListFunction:
    """The generated client function that lists (and, with ``watch=True``, watches) ``kind``.

    ``namespace`` restricts a namespaced kind to one namespace; None means all namespaces.
    """
    core = client.CoreV1Api(api)
    custom = client.CustomObjectsApi(api)
    if kind.group == "" and kind.plural == "nodes":
        return core.list_node
    if kind.group == "" and kind.plural == "pods":
        return partial(core.list_namespaced_pod, namespace) if namespace else core.list_pod_for_all_namespaces
    if namespace and kind.namespaced:
        return partial(custom.list_namespaced_custom_object, kind.group, kind.version, namespace, kind.plural)
    return partial(custom.list_cluster_custom_object, kind.group, kind.version, kind.plural)


async def merge_patch(
    custom: client.CustomObjectsApi, kind: ResourceKind, namespace: str, name: str, body: dict[str, Any], timeout: float
) -> Any:
    """One JSON merge patch of a namespaced custom object (a `metadata.resourceVersion` in `body` makes it
    conditional)."""
    return await custom.patch_namespaced_custom_object(
        kind.group,
        kind.version,
        namespace,
        kind.plural,
        name,
        body,
        _content_type=MERGE_PATCH,  # type: ignore[call-arg]  # accepted at runtime, missing in .pyi
        _request_timeout=timeout,
    )
