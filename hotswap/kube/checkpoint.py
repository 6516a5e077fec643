"""`hotswap mark-checkpoint`: training code tells the reconciler it has just checkpointed.

The planner prefers victims that would lose the least training (chips x progress since their last checkpoint),
and only the workload knows when that was. One merge patch of the JobSet's `last-checkpoint` annotation after each
completed checkpoint is all it takes; the pod's service account needs `patch` on `jobsets.jobset.x-k8s.io` in its
namespace. Failing to publish must never fail training, so callers get a result, not an exception, for API errors.
"""

from __future__ import annotations

import logging
import os
from datetime import UTC, datetime
from pathlib import Path

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from hotswap.annotations import AnnotationKeys, format_time
from hotswap.kube.client import REQUEST_TIMEOUT
from hotswap.kube.resources import JOBSETS, merge_patch

log = logging.getLogger("hotswap.checkpoint")

SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
JOBSET_ENV = "JOBSET_NAME"
"""Set it from the downward API: `fieldRef: {fieldPath: "metadata.labels['jobset.sigs.k8s.io/jobset-name']"}`."""
NAMESPACE_ENV = "POD_NAMESPACE"


class CheckpointTargetError(ValueError):
    """The JobSet to annotate cannot be determined; the message says which flag or variable to set."""


def resolve_target(
    jobset: str | None, namespace: str | None, env: dict[str, str] | None = None, sa_namespace: Path | None = None
) -> tuple[str, str]:
    """(namespace, JobSet name) from the flags, else `$POD_NAMESPACE` / the service account's namespace and
    `$JOBSET_NAME`."""
    environ = os.environ if env is None else env
    name = jobset or environ.get(JOBSET_ENV, "")
    if not name:
        raise CheckpointTargetError(
            f"no JobSet name: pass --jobset or set ${JOBSET_ENV} in the pod from the label "
            "jobset.sigs.k8s.io/jobset-name (downward API)"
        )
    ns = namespace or environ.get(NAMESPACE_ENV, "")
    path = sa_namespace if sa_namespace is not None else SERVICE_ACCOUNT_NAMESPACE
    if not ns and path.is_file():
        ns = path.read_text(encoding="utf-8").strip()
    if not ns:
        raise CheckpointTargetError(
            f"no namespace: pass --namespace or set ${NAMESPACE_ENV} (fieldRef metadata.namespace); "
            f"{path} does not exist outside a pod"
        )
    return ns, name


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
