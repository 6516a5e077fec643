"""kubectl, built from the same Kubernetes release as the servers, as the harness's one client.

Using the real client keeps what the suite does identical to what an operator types (server-side apply, dry runs,
the same error text), and works against any kubeconfig, including a real GKE cluster's.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

JsonObj = dict[str, Any]


class KubectlError(RuntimeError):
    def __init__(self, args: list[str], stderr: str) -> None:
        super().__init__(f"kubectl {' '.join(args)}: {stderr.strip()}")
        self.stderr = stderr


@dataclass(frozen=True)
class Kubectl:
    binary: Path
    kubeconfig: Path
    context: str | None = None

    def run(
        self, *args: str, stdin: str | None = None, check: bool = True, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        argv = [str(self.binary), f"--kubeconfig={self.kubeconfig}"]
        if self.context:
            argv.append(f"--context={self.context}")
        done = subprocess.run([*argv, *args], input=stdin, capture_output=True, text=True, timeout=timeout)
        if check and done.returncode != 0:
            raise KubectlError(list(args), done.stderr)
        return done

    def json(self, *args: str) -> JsonObj:
        out: JsonObj = json.loads(self.run(*args, "-o", "json").stdout)
        return out
