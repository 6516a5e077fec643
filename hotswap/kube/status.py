"""List what `hotswap status` reads: every Workload, and the reconciler's own Events (all namespaces)."""

from __future__ import annotations

from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from hotswap.kube.resources import WORKLOADS

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
