"""The real Pulumi engine and Kubernetes provider, run against the local cluster with nothing downloaded.

The CLI and the provider come from tools.toolchain (built from the Go module proxy); the provider is found as an
ambient plugin on PATH; plugin acquisition is off; state goes to a file backend in the run's directory. Each
operation runs `python -m e2e.pulumi_run` in `.venv-e2e-pulumi` (the SDK pinned to the provider's release) and comes
back as one JSON object; the engine's own output is kept in a log per operation.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tools import toolchain

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv-e2e-pulumi"
STACK_CONFIG_KEY = "gke-tpu-priority:platform"


def venv_python() -> Path:
    python = VENV / "bin" / "python"
    if not python.is_file():
        raise SystemExit(
            f"e2e: {VENV.name} is missing; `make e2e` makes it (the package with pulumi-kubernetes pinned to the "
            f"provider's release {toolchain.PULUMI_KUBERNETES_VERSION})"
        )
    return python


@dataclass
class Outcome:
    operation: str
    ok: bool
    seconds: float
    changes: dict[str, int]
    violations: list[dict[str, str]]
    errors: list[str]
    error: str
    log: Path

    @property
    def changed(self) -> int:
        return sum(n for op, n in self.changes.items() if op != "same")

    def as_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "seconds": self.seconds, "changes": self.changes, "resourcesChanged": self.changed}


class Engine:
    """One Pulumi project and stack on one cluster, driven operation by operation."""

    def __init__(self, directory: Path, kubeconfig: Path, stack: str = "e2e") -> None:
        self.directory = directory
        self.stack = stack
        self.work = directory / "workspace"
        self.logs = directory / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        (directory / "state").mkdir(parents=True, exist_ok=True)
        (directory / "home").mkdir(parents=True, exist_ok=True)
        path = [
            str(toolchain.binary("pulumi").parent),
            str(toolchain.binary("pulumi-resource-kubernetes").parent),
            os.environ.get("PATH", ""),
        ]
        self.env = {
            **os.environ,
            "PATH": os.pathsep.join(path),
            "PULUMI_HOME": str(directory / "home"),
            "PULUMI_BACKEND_URL": (directory / "state").resolve().as_uri(),
            "PULUMI_CONFIG_PASSPHRASE": "e2e-local-only",
            "PULUMI_SKIP_UPDATE_CHECK": "true",
            "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
            "PULUMI_SKIP_CONFIRMATIONS": "true",
            # A driver that crashes in native code (the SDK's gRPC) leaves every thread's Python stack in its log.
            "PYTHONFAULTHANDLER": "1",
            "KUBECONFIG": str(kubeconfig),
            "PYTHONPATH": str(ROOT),
        }
        self.count = 0
        self.crashes: list[dict[str, Any]] = []  # previews run again after the driver died of a signal

    def run(
        self,
        operation: str,
        platform: dict[str, Any],
        *,
        policy_pack: bool = False,
        expect_no_changes: bool = False,
        label: str = "",
        extra: list[dict[str, Any]] | None = None,
        timeout: float = 900,
    ) -> Outcome:
        self.count += 1
        name = f"{self.count:02d}-{operation}{'-' + label if label else ''}"
        config_path = self.directory / f"{name}.config.json"
        config_path.write_text(json.dumps({STACK_CONFIG_KEY: platform}))
        argv = [
            str(venv_python()), "-m", "e2e.pulumi_run", operation, f"--work={self.work}", f"--stack={self.stack}",
            f"--config={config_path}",
        ]  # fmt: skip
        argv += ["--policy-pack"] if policy_pack else []
        argv += ["--expect-no-changes"] if expect_no_changes else []
        if extra is not None:
            extra_path = self.directory / f"{name}.extra.json"
            extra_path.write_text(json.dumps(extra))
            argv.append(f"--extra={extra_path}")
        log = self.logs / f"{name}.log"
        started = time.monotonic()
        print(f"e2e: pulumi {operation} {label}".rstrip(), file=sys.stderr, flush=True)
        done = self._drive(argv, log, timeout)
        if done.returncode < 0 and operation == "preview":
            # Once in CI the driver died of SIGSEGV inside the Python SDK's in-process gRPC server while a preview the
            # API server had refused was shutting down (25 + 12 repeats here did not reproduce it). A preview
            # changes nothing, so it runs once more; the crashed run's log is kept and the report lists the crash.
            crashed = log.with_name(f"{name}.crashed.log")
            log.replace(crashed)
            self.crashes.append({"operation": name, "signal": -done.returncode, "log": str(crashed)})
            print(f"e2e: pulumi {operation} {label}: driver died of signal {-done.returncode}; running it again",
                  file=sys.stderr, flush=True)  # fmt: skip
            done = self._drive(argv, log, timeout)
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        if not lines:
            tail = log.read_text()[-4000:]
            raise RuntimeError(f"pulumi {operation} ended without a result (exit {done.returncode}); log ends:\n{tail}")
        result = json.loads(lines[-1])
        return Outcome(
            operation=operation,
            ok=bool(result["ok"]),
            seconds=round(time.monotonic() - started, 1),
            changes={k: int(v) for k, v in (result.get("changes") or {}).items()},
            violations=result.get("policyViolations") or [],
            errors=result.get("errors") or [],
            error=result.get("error", ""),
            log=log,
        )

    def _drive(self, argv: list[str], log: Path, timeout: float) -> subprocess.CompletedProcess[str]:
        with log.open("w") as sink:
            return subprocess.run(
                argv, cwd=ROOT, env=self.env, stdout=subprocess.PIPE, stderr=sink, text=True, timeout=timeout
            )
