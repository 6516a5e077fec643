"""Offline preview of a Pulumi program directory (each example): run it under Pulumi's mock runtime and print
what it would create. No Pulumi CLI, language host or cloud account is involved, and nothing is deployed.

Python programs run as they are (`__main__.py`); Pulumi YAML programs are evaluated by `tools.yaml_program`
(this package's components, stack references, config); Node.js (TypeScript) programs run under Node.js's mock
runtime with the SDK `pulumi package add` would generate, then their components under Python's
(`tools.node_program`; needs Node.js, npm and Go). Config comes from `Pulumi.<stack>.yaml` beside the
program, when there is one, and from `--config key=value` (a key without a namespace belongs to the project, as
with `pulumi config set`). Each example's README gives the command, run from the example's directory:

    venv/bin/python ../preview.py --config gcp:project=my-project
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pulumi
import yaml

from gke_tpu_priority.components.config import ConfigError
from testkit.mock_runtime import StackFileError, load_stack_config, run_program
from testkit.resources import SECRET_SIG, ProgramRun
from tools import node_program
from tools.manifests import kubernetes_objects
from tools.text_table import text_table
from tools.yaml_program import YamlProgramError, load_program, program_body

SECRET_WORDS = ("kubeconfig", "token", "secret", "password")


def runtime_of(project: dict[str, Any]) -> str:
    runtime = project.get("runtime")
    name = runtime.get("name") if isinstance(runtime, dict) else runtime
    return str(name)


def parse_config(pairs: Sequence[str], project: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"--config {pair!r}: expected key=value, e.g. gcp:project=my-project")
        out[key if ":" in key else f"{project}:{key}"] = value
    return out


def parse_outputs(pairs: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"--stack-output {pair!r}: expected name=value, e.g. clusterName=tpu-prod")
        out[key] = value
    return out


def run_directory(
    directory: Path, stack: str, config_pairs: Sequence[str], output_pairs: Sequence[str] = ()
) -> tuple[ProgramRun, str]:
    """(the run, the program's runtime). Raises ValueError, ConfigError or pulumi.RunError with the reason."""
    project = load_program(directory)
    name, runtime = str(project.get("name")), runtime_of(project)
    config: dict[str, Any] = {}
    if (directory / "stacks" / f"Pulumi.{stack}.yaml").exists():
        config.update(load_stack_config(stack, directory))
    elif (directory / f"Pulumi.{stack}.yaml").exists():
        config.update((yaml.safe_load((directory / f"Pulumi.{stack}.yaml").read_text()) or {}).get("config", {}))
    config.update(parse_config(config_pairs, name))
    if runtime == "python":
        return run_program(stack, config, directory, project=name), runtime
    if runtime == "yaml":
        values = {k.removeprefix(f"{name}:"): v for k, v in config.items()}
        body = program_body(project, values, parse_outputs(output_pairs))
        return run_program(stack, config, directory, project=name, body=body), runtime
    if runtime == "nodejs":
        run, _ = node_program.run_directory(directory, project, stack, config, output_pairs)
        return run, runtime
    raise ValueError(
        f"{directory / 'Pulumi.yaml'}: runtime {runtime!r} has no offline preview here (it needs the Pulumi CLI "
        "and its language host); see this example's README"
    )


def _shown(key: str, value: Any) -> str:
    text = json.dumps(value)
    if any(w in key.lower() for w in SECRET_WORDS) or SECRET_SIG in text:
        return "[secret]"
    return text if len(text) <= 100 else text[:97] + "..."


def render(run: ProgramRun, runtime: str) -> str:
    objects = kubernetes_objects(run.resources)
    counts = Counter(r.type for r in run.resources)
    out = [
        f"Program {run.project!r} ({runtime}), stack {run.stack!r}, offline under Pulumi's mock runtime: "
        f"{len(run.resources)} resources, {len(objects)} Kubernetes objects",
        "",
        text_table(["resource type", "count"], [[t, n] for t, n in sorted(counts.items())]),
    ]
    out += ["", "Outputs:", *(f"  {k}: {_shown(k, v)}" for k, v in sorted(run.outputs.items()))]
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python ../preview.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--dir", type=Path, default=Path.cwd(), help="program directory (default: here)")
    parser.add_argument("--stack", default="dev", help="stack name (default: dev)")
    parser.add_argument("--config", action="append", default=[], metavar="KEY=VALUE", help="a config value")
    parser.add_argument(
        "--stack-output", action="append", default=[], metavar="NAME=VALUE", help="a stack reference's output"
    )
    ns = parser.parse_args(argv)
    try:
        run, runtime = run_directory(ns.dir.resolve(), ns.stack, ns.config, ns.stack_output)
    except (ValueError, ConfigError, StackFileError, YamlProgramError, FileNotFoundError, pulumi.RunError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(render(run, runtime))
    return 0


if __name__ == "__main__":
    sys.exit(main())
