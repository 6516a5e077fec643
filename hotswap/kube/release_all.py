"""``kubectl hotswap release-all``: reactivate every Workload the reconciler holds (uninstall path, invariant I10).

Each held Workload (one carrying the ``held-by`` annotation) gets ONE conditional merge patch that
removes the hold annotations and sets ``spec.active=true``; preemptors' open-operation annotations are
removed too, and so is the quarantine taint from every node that carries it (nothing the reconciler wrote
outlives it). Run it after the reconciler Deployment is gone (or scaled to zero), otherwise a running
leader may hold victims again.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from gke_tpu_priority.hotswap.annotations import AnnotationKeys
from gke_tpu_priority.hotswap.kube.actuator import read_taint_patch
from gke_tpu_priority.hotswap.kube.client import REQUEST_TIMEOUT
from gke_tpu_priority.hotswap.kube.resources import MERGE_PATCH, WORKLOADS, merge_patch

JsonObj = dict[str, Any]

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 5


@dataclass
class ReleaseReport:
    released: list[str] = field(default_factory=list)
    cleared_ops: list[str] = field(default_factory=list)
    untainted: list[str] = field(default_factory=list)
    """Nodes the quarantine taint was removed from."""
    failed: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failed


def _annotations(obj: JsonObj) -> dict[str, Any]:
    annotations = (obj.get("metadata") or {}).get("annotations")
    return annotations if isinstance(annotations, dict) else {}


def release_patch(obj: JsonObj, keys: AnnotationKeys) -> JsonObj | None:
    """The one write that undoes the reconciler's state on ``obj``; None if it carries none."""
    annotations = _annotations(obj)
    if annotations.get(keys.held_by):
        removals = dict.fromkeys(k for k in (*keys.victim_hold_keys(), keys.op) if k in annotations)
        return {"metadata": {"annotations": removals}, "spec": {"active": True}}
    if annotations.get(keys.rung_switch):
        # Held for a rung switch (not yet pinned and recreated): give it back as it was.
        return {"metadata": {"annotations": dict.fromkeys(keys.rung_switch_keys())}, "spec": {"active": True}}
    if keys.op in annotations:
        return {"metadata": {"annotations": {keys.op: None}}}
    return None


async def release_all(
    api: client.ApiClient, keys: AnnotationKeys, namespaces: tuple[str, ...] = (), dry_run: bool = False
) -> ReleaseReport:
    custom = client.CustomObjectsApi(api)
    report = ReleaseReport()
    items: list[JsonObj] = []
    for namespace in namespaces or (None,):
        if namespace is None:
            listed = await custom.list_cluster_custom_object(
                WORKLOADS.group, WORKLOADS.version, WORKLOADS.plural, _request_timeout=60
            )
        else:
            listed = await custom.list_namespaced_custom_object(
                WORKLOADS.group, WORKLOADS.version, namespace, WORKLOADS.plural, _request_timeout=60
            )
        items.extend(i for i in listed.get("items", []) if isinstance(i, dict))
    for item in items:
        if release_patch(item, keys) is None:
            continue
        meta = item["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        held = bool(_annotations(item).get(keys.held_by) or _annotations(item).get(keys.rung_switch))
        if dry_run:
            log.info("dry-run: would release", extra={"workload": key, "held": held})
            (report.released if held else report.cleared_ops).append(key)
            continue
        if await _release_one(custom, item, keys):
            (report.released if held else report.cleared_ops).append(key)
        else:
            report.failed.append(key)
    await _untaint_nodes(client.CoreV1Api(api), api, keys.quarantine_taint, report, dry_run)
    return report


async def _untaint_nodes(
    core: client.CoreV1Api, api: client.ApiClient, key: str, report: ReleaseReport, dry_run: bool
) -> None:
    nodes = await core.list_node(_request_timeout=60)
    for node in nodes.items:
        name = node.metadata.name
        if not any(t.key == key for t in node.spec.taints or []):
            continue
        if dry_run:
            log.info("dry-run: would remove the quarantine taint", extra={"node": name})
            report.untainted.append(name)
            continue
        if await _untaint_one(core, api, name, key):
            report.untainted.append(name)
        else:
            report.failed.append(f"node/{name}")


async def _untaint_one(core: client.CoreV1Api, api: client.ApiClient, name: str, key: str) -> bool:
    for _ in range(MAX_ATTEMPTS):
        try:
            patch = await read_taint_patch(core, api, name, key, present=False)
            if patch is None:
                return True
            await core.patch_node(name, patch, _content_type=MERGE_PATCH, _request_timeout=REQUEST_TIMEOUT)  # type: ignore[call-arg]
            log.info("removed the quarantine taint", extra={"node": name})
            return True
        except ApiException as exc:
            if exc.status == 404:
                return True
            if exc.status != 409:
                log.error("untaint failed", extra={"node": name, "status": exc.status})
                return False
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            log.error("untaint failed", extra={"node": name, "error": str(exc)[:300]})
            await asyncio.sleep(0.5)
    return False


async def _release_one(custom: client.CustomObjectsApi, obj: JsonObj, keys: AnnotationKeys) -> bool:
    meta = obj["metadata"]
    namespace, name = meta["namespace"], meta["name"]
    for _ in range(MAX_ATTEMPTS):
        patch = release_patch(obj, keys)
        if patch is None:
            return True
        patch["metadata"]["resourceVersion"] = obj["metadata"]["resourceVersion"]
        try:
            await merge_patch(custom, WORKLOADS, namespace, name, patch, REQUEST_TIMEOUT)
            log.info("released", extra={"workload": f"{namespace}/{name}"})
            return True
        except ApiException as exc:
            if exc.status == 404:
                return True
            if exc.status != 409:
                log.error("release failed", extra={"workload": f"{namespace}/{name}", "status": exc.status})
                return False
            obj = await custom.get_namespaced_custom_object(
                WORKLOADS.group, WORKLOADS.version, namespace, WORKLOADS.plural, name, _request_timeout=REQUEST_TIMEOUT
            )
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            log.error("release failed", extra={"workload": f"{namespace}/{name}", "error": str(exc)[:300]})
            await asyncio.sleep(0.5)
    return False
