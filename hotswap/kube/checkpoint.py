"""`kubectl-hotswap mark-checkpoint`: training code tells the reconciler it has just checkpointed.

The planner prefers victims that would lose the least training (chips x progress since their last checkpoint),
and only the workload knows when that was. One merge patch of the JobSet's `last-checkpoint` annotation after each
completed checkpoint is all it takes; the pod's service account needs `patch` on `jobsets.jobset.x-k8s.io` in its
namespace. Failing to publish must never fail training, so callers get a result, not an exception, for API errors.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from gke_tpu_priority.hotswap.annotations import AnnotationKeys, format_time
from gke_tpu_priority.hotswap.checkpoint_target import (
    JOBSET_ENV,
    NAMESPACE_ENV,
    SERVICE_ACCOUNT_NAMESPACE,
    CheckpointTargetError,
    resolve_target,
)
from gke_tpu_priority.hotswap.kube.client import REQUEST_TIMEOUT
from gke_tpu_priority.hotswap.kube.resources import JOBSETS, merge_patch

log = logging.getLogger("hotswap.checkpoint")

__all__ = [
    "JOBSET_ENV",
    "NAMESPACE_ENV",
    "SERVICE_ACCOUNT_NAMESPACE",
    "CheckpointTargetError",
    "mark_checkpoint",
    "resolve_target",
]


async def mark_checkpoint(
    api: client.ApiClient, keys: AnnotationKeys, namespace: str, jobset: str, at: datetime | None = None
) -> bool:
    """Set the JobSet's `last-checkpoint` annotation to `at` (default: now). True when written."""
    moment = at if at is not None else datetime.now(UTC)
    patch = {"metadata": {"annotations": {keys.last_checkpoint: format_time(moment)}}}
    try:
        await merge_patch(client.CustomObjectsApi(api), JOBSETS, namespace, jobset, patch, REQUEST_TIMEOUT)
    except ApiException as exc:
        log.warning(
            "checkpoint not published",
            extra={"jobset": f"{namespace}/{jobset}", "status": exc.status, "reason": exc.reason},
        )
        return False
    log.info("checkpoint published", extra={"jobset": f"{namespace}/{jobset}", "at": format_time(moment)})
    return True
