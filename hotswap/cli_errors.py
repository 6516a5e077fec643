"""Turn what can go wrong when a CLI command talks to a cluster into one sentence and an exit code.

An operator runs `kubectl hotswap release-all` in the worst hour of an incident or an uninstall; a traceback there
hides the one fact that matters (no credentials, wrong context, API unreachable, RBAC, Kueue not installed).
The Kubernetes client libraries are optional (the `hotswap` extra), so their exception types are matched
without importing them.
"""

from __future__ import annotations

from dataclasses import dataclass

from gke_tpu_priority.hotswap.kube.access import ClusterAccessError

EXTRA_HINT = "pip install 'gke-tpu-priority[hotswap]'"
# Modules only the `hotswap` extra installs.
EXTRA_MODULES = frozenset({"kubernetes_asyncio", "aiohttp", "prometheus_client"})

USAGE = 2
"""Exit code when the command cannot start: missing extra, no credentials, a bad kubeconfig."""
FAILED = 1
"""Exit code when the command started but the cluster refused or could not be reached."""


@dataclass(frozen=True, slots=True)
class Failure:
    message: str
    exit_code: int


def _from(exc: BaseException, module: str) -> bool:
    return any(cls.__module__.split(".")[0] == module for cls in type(exc).__mro__)


def _named(exc: BaseException, name: str) -> bool:
    return any(cls.__name__ == name for cls in type(exc).__mro__)


def explain(exc: BaseException, command: str) -> Failure:
    """What to tell the operator about ``exc``, raised while running ``hotswap <command>``."""
    if isinstance(exc, ModuleNotFoundError) and (exc.name or "").split(".")[0] in EXTRA_MODULES:
        return Failure(
            f"`kubectl hotswap {command}` needs the reconciler's Kubernetes client, which this install "
            f"lacks (no module {exc.name!r}): {EXTRA_HINT}",
            USAGE,
        )
    if isinstance(exc, ClusterAccessError):
        return Failure(str(exc), USAGE)
    if _from(exc, "kubernetes_asyncio") and _named(exc, "ConfigException"):
        return Failure(f"the kubeconfig cannot be used: {exc}", USAGE)
    if _from(exc, "kubernetes_asyncio") and _named(exc, "ApiException"):
        return Failure(_api_refusal(exc), FAILED)
    if _from(exc, "aiohttp") or isinstance(exc, (OSError, TimeoutError)):
        return Failure(
            f"cannot reach the Kubernetes API server ({type(exc).__name__}: {str(exc)[:300] or 'timed out'}); "
            "check the kubeconfig context, that your network may reach the control plane (authorized networks, "
            "a private or DNS endpoint) and that gke-gcloud-auth-plugin is installed",
            FAILED,
        )
    return Failure(
        f"failed: {type(exc).__name__}: {str(exc)[:300]} (rerun with --log-level DEBUG for the traceback)",
        FAILED,
    )


def _api_refusal(exc: BaseException) -> str:
    status = getattr(exc, "status", None)
    reason = getattr(exc, "reason", "") or ""
    if status == 401:
        return (
            "the API server refused the credentials (401 Unauthorized); refresh them "
            "(gcloud auth application-default login, or gcloud auth login with cluster.kubernetesAuth: gcloud)"
        )
    if status == 403:
        return (
            "the API server forbade the request (403 Forbidden); the account needs list on "
            "workloads.kueue.x-k8s.io in every namespace (and patch, for release-all), as the reconciler's "
            "ClusterRole grants"
        )
    if status == 404:
        return (
            "the API server does not serve workloads.kueue.x-k8s.io/v1beta2 (404 Not Found); is Kueue installed "
            "on this cluster, and is this the right context?"
        )
    return f"the API server answered {status} {reason}".rstrip()
