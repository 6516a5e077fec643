"""One real Pulumi operation on this package's program: the Automation API driving the locally built engine.

The e2e suite runs this in a virtualenv of its own (`.venv-e2e-pulumi`, made by `make e2e`), because the Python SDK
of pulumi-kubernetes must be the release of the provider the suite builds (4.25.0), while the package itself accepts
any 4.x from 4.25. The program is the repository's own `__main__.py`, run inline: the Automation API serves it to
the engine itself, so no language-host binary is needed (none is built from the Go module proxy).

    python -m e2e.pulumi_run {up,preview,destroy} --work DIR --stack NAME --config FILE.json
                             [--policy-pack] [--expect-no-changes] [--extra OBJECTS.json]

The caller sets the engine's environment (PATH with the CLI and the provider, PULUMI_HOME, PULUMI_BACKEND_URL,
PULUMI_CONFIG_PASSPHRASE, KUBECONFIG). The last line of stdout is one JSON object: operation, ok, seconds, the
engine's change counts, the policy violations it reported and, on failure, the end of the engine's error output.
Engine output streams to stderr as it comes, so a long `up` shows its progress.
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pulumi import automation as auto

ROOT = Path(__file__).resolve().parent.parent
PROJECT = "gke-tpu-priority"  # the config namespace of `gke-tpu-priority:platform`


def program_with(extra: Path | None) -> Callable[[], None]:
    """The package's program; with `extra`, also the Kubernetes objects of that JSON file, as a team's stack that
    adds its own workloads beside the platform would (used to show the policy pack refusing a bad one)."""

    def program() -> None:
        runpy.run_path(str(ROOT / "__main__.py"), run_name="__main__")
        if extra is not None:
            import pulumi_kubernetes as k8s

            k8s.yaml.v2.ConfigGroup("e2e-extra", objs=json.loads(extra.read_text()))

    return program


def policy_pack_shim(directory: Path) -> Path:
    """An executable the engine starts as a binary analyzer plugin (`--policy-pack <file>`), serving the
    repository's policy pack. A Python pack is otherwise started through the Python language host, which the Go
    module proxy does not serve; the pack and its rules are the same either way."""
    shim = directory / "gke-tpu-priority-policy-pack"
    policies = ROOT / "policies"
    shim.write_text(
        f"#!{sys.executable}\n"
        "import runpy, sys\n"
        f"sys.path[:0] = [{str(policies)!r}, {str(ROOT)!r}]\n"
        f"runpy.run_path({str(policies / '__main__.py')!r}, run_name='__main__')\n"
    )
    shim.chmod(0o755)
    return shim


def stack_for(work: Path, name: str, config: dict[str, Any], extra: Path | None = None) -> auto.Stack:
    work.mkdir(parents=True, exist_ok=True)
    settings = auto.ProjectSettings(name=PROJECT, runtime="python")
    options = auto.LocalWorkspaceOptions(
        work_dir=str(work),
        project_settings=settings,
        stack_settings={name: auto.StackSettings(config=config)},
    )
    return auto.create_or_select_stack(stack_name=name, project_name=PROJECT, program=program_with(extra), opts=options)


class Recorder:
    """Collects the engine events a report needs: policy violations, and the failing resources' diagnostics."""

    def __init__(self) -> None:
        self.violations: list[dict[str, str]] = []
        self.diagnostics: list[str] = []

    def __call__(self, event: auto.EngineEvent) -> None:
        if event.policy_event is not None:
            policy = event.policy_event
            self.violations.append(
                {
                    "policy": policy.policy_name,
                    "pack": policy.policy_pack_name,
                    "enforcement": policy.enforcement_level,
                    "resource": policy.resource_urn or "",
                    "message": policy.message.strip(),
                }
            )
        if event.diagnostic_event is not None and event.diagnostic_event.severity == "error":
            self.diagnostics.append(event.diagnostic_event.message.strip())


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def run(operation: str, stack: auto.Stack, policy_packs: list[str], expect_no_changes: bool) -> dict[str, Any]:
    recorder = Recorder()
    started = time.monotonic()
    result: dict[str, Any] = {"operation": operation, "ok": True}
    # --diff only where a change is unexpected: then the log says exactly what differed.
    options: dict[str, Any] = dict(
        on_output=_progress,
        on_event=recorder,
        policy_packs=policy_packs,
        expect_no_changes=expect_no_changes,
        diff=expect_no_changes,
    )
    try:
        if operation == "up":
            result["changes"] = dict(stack.up(**options).summary.resource_changes or {})
        elif operation == "preview":
            result["changes"] = dict(stack.preview(**options).change_summary)
        elif operation == "destroy":
            destroy = stack.destroy(on_output=_progress, on_event=recorder)
            result["changes"] = dict(destroy.summary.resource_changes or {})
        else:
            raise ValueError(f"unknown operation {operation!r}")
    except auto.CommandError as error:
        result.update(ok=False, error=str(error)[-6000:])
    result["seconds"] = round(time.monotonic() - started, 1)
    result["policyViolations"] = recorder.violations
    result["errors"] = recorder.diagnostics[-20:]
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.pulumi_run", description=__doc__.splitlines()[0])
    parser.add_argument("operation", choices=["up", "preview", "destroy"])
    parser.add_argument("--work", type=Path, required=True, help="the workspace directory (Pulumi.yaml goes here)")
    parser.add_argument("--stack", required=True)
    parser.add_argument("--config", type=Path, required=True, help="JSON object of the stack's config keys")
    parser.add_argument("--policy-pack", action="store_true", help="run the repository's policy pack")
    parser.add_argument("--expect-no-changes", action="store_true")
    parser.add_argument("--extra", type=Path, help="JSON list of extra Kubernetes objects (preview only)")
    args = parser.parse_args(argv)
    for needed in ("PULUMI_BACKEND_URL", "PULUMI_CONFIG_PASSPHRASE", "KUBECONFIG"):
        if not os.environ.get(needed):
            parser.error(f"{needed} is not set; the e2e suite sets the engine's environment (see e2e/pulumi_engine.py)")
    config = json.loads(args.config.read_text())
    if args.extra is not None and args.operation != "preview":
        parser.error("--extra is for previews only")
    stack = stack_for(args.work, args.stack, config, args.extra)
    packs = [str(policy_pack_shim(args.work))] if args.policy_pack else []
    outcome = run(args.operation, stack, packs, args.expect_no_changes)
    print(json.dumps(outcome), flush=True)
    return 0 if outcome["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
