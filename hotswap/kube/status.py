"""List what `kubectl hotswap status` reads: the Workloads, the reconciler's own Events, and the nodes.

The Workloads are the answer: when they cannot be listed the command fails. Events (WHY) and Nodes (quarantined
slices) only add to it, so an account that may not list them still gets the holds, with a warning saying what is
missing: the caller reports the answer as partial.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from gke_tpu_priority.hotswap.kube.resources import WORKLOADS

JsonObj = dict[str, Any]
# The label every Event the reconciler emits carries (hotswap.kube.events.build_event).
EVENTS_SELECTOR = "app.kubernetes.io/managed-by=hotswap-reconciler"
TIMEOUT = 60


@dataclass(frozen=True, slots=True)
class StatusObjects:
    workloads: list[JsonObj]
    events: list[JsonObj]
    nodes: list[JsonObj]
    warnings: tuple[str, ...]
    """What could not be read, one sentence each; empty when the answer is whole."""


async def read_status_objects(
    api: client.ApiClient, namespace: str | None = None, selector: str | None = None
) -> StatusObjects:
    """Workloads (of ``namespace``, else every namespace; matching the label ``selector``), the reconciler's Events
    there, and every Node (nodes are cluster-wide: a quarantined slice concerns every namespace)."""
    workloads = await list_workloads(api, namespace, selector)
    events, events_warning = await list_events(api, namespace)
    nodes, nodes_warning = await list_nodes(api)
    warnings = tuple(w for w in (events_warning, nodes_warning) if w)
    return StatusObjects(workloads, events, nodes, warnings)


async def list_workloads(api: client.ApiClient, namespace: str | None, selector: str | None) -> list[JsonObj]:
    custom = client.CustomObjectsApi(api)
    options: dict[str, Any] = {"_request_timeout": TIMEOUT}
    if selector:
        options["label_selector"] = selector
    if namespace:
        listed = await custom.list_namespaced_custom_object(
            WORKLOADS.group, WORKLOADS.version, namespace, WORKLOADS.plural, **options
        )
    else:
        listed = await custom.list_cluster_custom_object(
            WORKLOADS.group, WORKLOADS.version, WORKLOADS.plural, **options
        )
    return [i for i in listed.get("items", []) if isinstance(i, dict)]


async def list_events(api: client.ApiClient, namespace: str | None) -> tuple[list[JsonObj], str | None]:
    # Raw JSON (_preload_content=False): the typed models would rename fields (event_time, regarding). The
    # generated stub is typed for the model list, hence Any.
    events_api: Any = client.EventsV1Api(api)
    options = {"label_selector": EVENTS_SELECTOR, "_preload_content": False, "_request_timeout": TIMEOUT}
    why = "Events unreadable (HTTP {}): WHY comes from the annotations only"
    try:
        if namespace:
            response = await events_api.list_namespaced_event(namespace, **options)
        else:
            response = await events_api.list_event_for_all_namespaces(**options)
    except ApiException as exc:
        return [], why.format(exc.status)
    return await _items(response, why)


async def list_nodes(api: client.ApiClient) -> tuple[list[JsonObj], str | None]:
    """Every Node as raw JSON (for the quarantine taint), or why they could not be listed."""
    core: Any = client.CoreV1Api(api)
    why = "nodes unreadable (HTTP {}): quarantined slices not shown"
    try:
        response = await core.list_node(_preload_content=False, _request_timeout=TIMEOUT)
    except ApiException as exc:
        return [], why.format(exc.status)
    return await _items(response, why)


async def _items(response: Any, why: str) -> tuple[list[JsonObj], str | None]:
    try:
        if response.status >= 300:
            return [], why.format(response.status)
        body = await response.json(content_type=None)
    finally:
        response.release()
    items = body.get("items", []) if isinstance(body, dict) else []
    return [i for i in items if isinstance(i, dict)], None
