"""Release every hold when the reconciler is removed, not when it merely restarts.

A hold (``spec.active=false`` on a lower-priority Workload) is undone only by the reconciler. When the reconciler
itself goes away (``hotswap.enabled: false``, ``pulumi destroy``, ``kubectl scale --replicas=0``), nothing would
ever reactivate those Workloads. So on SIGTERM, once its loop has stopped writing, each replica asks what is
happening to its own Deployment:

- gone (404), being deleted (``deletionTimestamp``; Pulumi deletes in the foreground, so the Deployment stays
  until its pods are gone) or scaled to zero replicas: the reconciler is being removed, and the replica runs
  ``release-all`` before it exits;
- anything else (a rolling update, a node drain, a crash restart): the next leader keeps the holds, as before.

Every replica does this after its own loop has stopped, so a hold a standby takes over in the meantime is undone
by that standby's own release when it receives its SIGTERM. When the Deployment cannot be read (RBAC, API
trouble), nothing is released: removal is never assumed.
"""

from __future__ import annotations

import logging
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from gke_tpu_priority.hotswap.annotations import AnnotationKeys
from gke_tpu_priority.hotswap.kube.client import REQUEST_TIMEOUT
from gke_tpu_priority.hotswap.kube.release_all import ReleaseReport, release_all

JsonObj = dict[str, Any]

log = logging.getLogger(__name__)


def being_removed(deployment: JsonObj | None) -> bool:
    """Whether the reconciler's Deployment (None: not found) says the reconciler is going away."""
    if deployment is None:
        return True
    metadata = deployment.get("metadata") or {}
    if metadata.get("deletionTimestamp"):
        return True
    spec = deployment.get("spec") or {}
    return spec.get("replicas") == 0


async def read_deployment(api: client.ApiClient, namespace: str, name: str) -> tuple[bool, JsonObj | None]:
    """(known, deployment): known is False when the API did not say (anything but 200 or 404)."""
    apps = client.AppsV1Api(api)
    try:
        deployment = await apps.read_namespaced_deployment(name, namespace, _request_timeout=REQUEST_TIMEOUT)
        body: JsonObj = api.sanitize_for_serialization(deployment)
        return True, body
    except ApiException as exc:
        if exc.status == 404:
            return True, None
        log.warning(
            "cannot read own Deployment; keeping holds",
            extra={"deployment": f"{namespace}/{name}", "status": exc.status},
        )
        return False, None
    except (TimeoutError, OSError) as exc:
        log.warning(
            "cannot read own Deployment; keeping holds",
            extra={"deployment": f"{namespace}/{name}", "error": str(exc)[:300]},
        )
        return False, None


async def release_if_removed(
    api: client.ApiClient, keys: AnnotationKeys, namespace: str, name: str, dry_run: bool = False
) -> ReleaseReport | None:
    """Run release-all if the Deployment ``namespace/name`` is being removed; None when it is not (or unknown)."""
    known, deployment = await read_deployment(api, namespace, name)
    if not known or not being_removed(deployment):
        return None
    log.info("reconciler is being removed; releasing every hold", extra={"deployment": f"{namespace}/{name}"})
    # Every namespace, as `kubectl hotswap release-all` does: a hold from before `namespaces` shrank counts too.
    report = await release_all(api, keys, (), dry_run=dry_run)
    log.info(
        "released on removal",
        extra={"released": report.released, "cleared_ops": report.cleared_ops, "failed": report.failed},
    )
    return report
