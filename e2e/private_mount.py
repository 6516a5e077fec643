"""A directory of a cluster's own, seen by one manager process at a path every manager on the machine hard-codes.

JobSet v0.12.0's cert rotator writes to /tmp/k8s-webhook-server/serving-certs whatever its configuration says, so
two local clusters' JobSet managers would overwrite each other's webhook certificate. Each manager instead runs in
a mount namespace of its own, in which its cluster's directory is bind-mounted over that path: as in a pod, where
the kubelet mounts the webhook Secret there. Where mount namespaces are not allowed (no root and no unprivileged
user namespaces), the caller falls back to one machine-wide lock on the shared directory.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

# Mounts the first argument over the second, then becomes the program that follows.
_BIND_THEN_EXEC = 'mkdir -p "$2" && mount --bind "$1" "$2" && shift 2 && exec "$@"'


@functools.cache
def unshare_prefix() -> tuple[str, ...] | None:
    """The `unshare` invocation that gives a process a private mount namespace here, or None if none works."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return None
    candidates: list[tuple[str, ...]] = [(unshare, "--mount", "--propagation", "private")]
    if os.geteuid() != 0:
        candidates.insert(0, (unshare, "--user", "--map-root-user", "--mount", "--propagation", "private"))
    for prefix in candidates:
        try:
            done = subprocess.run([*prefix, "true"], capture_output=True, timeout=10, check=False)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if done.returncode == 0:
            return prefix
    return None


def available() -> bool:
    return unshare_prefix() is not None


def wrap(argv: Sequence[str], source: Path, target: Path) -> list[str]:
    """`argv` run with `source` mounted over `target` in a mount namespace of its own; nothing outside it sees the
    mount, and it ends with the process. Callers check `available()` first."""
    prefix = unshare_prefix()
    if prefix is None:
        raise RuntimeError("no private mount namespace on this machine: `unshare --mount` is refused")
    return [*prefix, "sh", "-c", _BIND_THEN_EXEC, "private-mount", str(source), str(target), *argv]
