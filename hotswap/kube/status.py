"""List what `kubectl hotswap status` reads: every Workload, the reconciler's own Events (all namespaces), and the
nodes."""

from __future__ import annotations

from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from gke_tpu_priority.hotswap.kube.resources import WORKLOADS

JsonObj = dict[str, Any]
# The label every Event the reconciler emits carries (hotswap.kube.events.build_event).
EVENTS_SELECTOR = "app.kubernetes.io/managed-by=hotswap-reconciler"


async def list_status_objects(api: client.ApiClient) -> tuple[list[JsonObj], list[JsonObj], str | None]:
    """(Workloads, the reconciler's Events, why the Events could not be read or None): one cluster-wide list each.
    Workloads are the answer; Events only explain it, so an account that may not list them still gets the table."""
    custom = client.CustomObjectsApi(api)
    listed = await custom.list_cluster_custom_object(
        WORKLOADS.group, WORKLOADS.version, WORKLOADS.plural, _request_timeout=60
    )
    workloads = [i for i in listed.get("items", []) if isinstance(i, dict)]
    # Raw JSON (_preload_content=False): the typed models would rename fields (event_time, regarding). The
    # generated stub is typed for the model list, hence Any.
    events_api: Any = client.EventsV1Api(api)
    try:
        response = await events_api.list_event_for_all_namespaces(
            label_selector=EVENTS_SELECTOR, _preload_content=False, _request_timeout=60
        )
    except ApiException as exc:
        return workloads, [], _unreadable(exc.status)
    try:
        if response.status >= 300:
            return workloads, [], _unreadable(response.status)
        body = await response.json(content_type=None)
    finally:
        response.release()
    events = body.get("items", []) if isinstance(body, dict) else []
    return workloads, [e for e in events if isinstance(e, dict)], None


def _unreadable(status: object) -> str:
    return f"Events unreadable (HTTP {status}): WHY comes from the annotations only"


async def list_nodes(api: client.ApiClient) -> tuple[list[JsonObj], str | None]:
    """Every Node as raw JSON (for the quarantine taint), or why they could not be listed: like the Events, they
    add to the answer, so an account that may not list nodes still gets the holds."""
    core: Any = client.CoreV1Api(api)
    try:
        response = await core.list_node(_preload_content=False, _request_timeout=60)
    except ApiException as exc:
        return [], f"nodes unreadable (HTTP {exc.status}): quarantined slices not shown"
    try:
        if response.status >= 300:
            return [], f"nodes unreadable (HTTP {response.status}): quarantined slices not shown"
        body = await response.json(content_type=None)
    finally:
        response.release()
    items = body.get("items", []) if isinstance(body, dict) else []
    return [i for i in items if isinstance(i, dict)], None
