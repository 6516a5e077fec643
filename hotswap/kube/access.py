"""Which credentials a CLI command uses to reach the cluster: pure decision, no Kubernetes client imported.

Operators run `kubectl hotswap release-all` and `kubectl hotswap status` from a laptop or a CI runner as often as the
reconciler runs in its pod, so the order is the one kubectl users expect: an explicit `--kubeconfig`, else the pod's
service account when running in a pod (and no `--context` asks for a kubeconfig context), else `$KUBECONFIG`, else
`~/.kube/config`. A missing kubeconfig is reported in one sentence that says how to get one.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

SERVICE_HOST_ENV = "KUBERNETES_SERVICE_HOST"
SERVICE_ACCOUNT_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")


class ClusterAccessError(Exception):
    """No usable credentials; the message says what was looked for and how to get some."""


@dataclass(frozen=True, slots=True)
class ClusterAccess:
    """In-cluster service account (`kubeconfig` None) or a kubeconfig (file list as `$KUBECONFIG` spells it)."""

    kubeconfig: str | None
    context: str | None

    @property
    def in_cluster(self) -> bool:
        return self.kubeconfig is None

    def describe(self) -> str:
        if self.in_cluster:
            return "the pod's service account"
        context = f", context {self.context}" if self.context else ", its current context"
        return f"kubeconfig {self.kubeconfig}{context}"


def choose_access(
    kubeconfig: str | None,
    context: str | None,
    env: Mapping[str, str] | None = None,
    token_file: Path | None = None,
    home: Path | None = None,
) -> ClusterAccess:
    """Pick the credentials; raise ClusterAccessError when none exist."""
    environ = os.environ if env is None else env
    token = SERVICE_ACCOUNT_TOKEN if token_file is None else token_file
    if kubeconfig:
        if not Path(kubeconfig).expanduser().is_file():
            raise ClusterAccessError(f"--kubeconfig {kubeconfig}: no such file")
        return ClusterAccess(str(Path(kubeconfig).expanduser()), context)
    if context is None and environ.get(SERVICE_HOST_ENV) and token.is_file():
        return ClusterAccess(None, None)
    listed = environ.get("KUBECONFIG", "")
    if listed:
        existing = [p for p in listed.split(os.pathsep) if p and Path(p).expanduser().is_file()]
        if not existing:
            raise ClusterAccessError(
                f"$KUBECONFIG is {listed!r}, but no such file exists; unset it to use ~/.kube/config, or point "
                "it at a kubeconfig (gcloud container clusters get-credentials CLUSTER --location REGION writes one)"
            )
        return ClusterAccess(os.pathsep.join(str(Path(p).expanduser()) for p in existing), context)
    default = (Path.home() if home is None else home) / ".kube" / "config"
    if not default.is_file():
        raise ClusterAccessError(
            f"no cluster credentials: not running in a pod, $KUBECONFIG is unset and {default} does not exist; "
            "run `gcloud container clusters get-credentials CLUSTER --location REGION` (or pass --kubeconfig FILE)"
        )
    return ClusterAccess(str(default), context)
