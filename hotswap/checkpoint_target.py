"""Which JobSet `kubectl-hotswap mark-checkpoint` annotates: flags, else the pod's environment (no Kubernetes client
imported, so the CLI can describe itself on an install without the `hotswap` extra)."""

from __future__ import annotations

import os
from pathlib import Path

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
