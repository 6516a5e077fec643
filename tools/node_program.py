"""A Node.js (TypeScript) Pulumi program that uses this package's components, run offline (examples/typescript).

The steps `pulumi package add` and `pulumi preview` would take, without the Pulumi CLI, its Node.js language host
(which the Go module proxy refuses, docs/e2e.md) or a cloud account:

1. the typed SDK: `gen-sdk` (`e2e/go/gen-sdk`, built and cached by `tools.toolchain`, the generator the Node.js
   language host runs, at the Pulumi CLI's release) writes it from the component package's schema into
   `sdks/<package>`, where `pulumi package add` puts it;
2. `npm ci`: the program's pinned dependencies (`package-lock.json`), the SDK among them (its postinstall
   compiles it);
3. `npm run preview`: `tsc` type-checks and compiles the program, which then runs under Pulumi's Node.js mock
   runtime (the example's `mock-preview.ts`) and reports every resource it registered with its inputs;
4. the component resources it registered are then constructed from those inputs by the components themselves,
   under Python's mock runtime (as the component provider would on `pulumi preview`), and the program's exports
   that name a component's output (`${name.output}`) get the value the component computed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pulumi
from pulumi.resource import ComponentResource

from gke_tpu_priority.components.provider import PACKAGE_NAME, hosted_components
from testkit.mock_runtime import run_program
from testkit.resources import ProgramRun

STACK_REFERENCE = "pulumi:pulumi:StackReference"
_REFERENCE = re.compile(r"^\$\{(?P<res>[^.}]+)\.(?P<prop>\w+)\}$")


class NodeProgramError(ValueError):
    """The program cannot be run offline here; the message says why in one sentence."""


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def require_node() -> None:
    missing = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
    if missing:
        raise NodeProgramError(
            f"{' and '.join(missing)} not found on PATH: this TypeScript example needs Node.js and npm (see its README)"
        )


def sdk_generator() -> Path:
    """The `gen-sdk` binary, built into the e2e tool cache on first use (a few minutes cold; Go >= 1.26)."""
    from tools import toolchain

    tool = toolchain.TOOLS["gen-sdk"]
    try:
        goversion = toolchain.go_version()
        binary = toolchain.tool_dir(tool, goversion) / "gen-sdk"
        if not binary.is_file():
            binary = toolchain.build(tool, goversion).directory / "gen-sdk"
    except SystemExit as err:  # the toolchain states its failures as one sentence in SystemExit
        reason = str(err).removeprefix("e2e: ")
        raise NodeProgramError(f"cannot build the SDK generator (e2e/go/gen-sdk): {reason}") from None
    return binary


def package_schema(directory: Path, project: Mapping[str, Any]) -> tuple[str, Path]:
    """(package name, its schema file), from the project's `packages:` entry for this package."""
    source = (project.get("packages") or {}).get(PACKAGE_NAME)
    if not isinstance(source, str):
        raise NodeProgramError(
            f"{directory / 'Pulumi.yaml'}: no `packages: {PACKAGE_NAME}: <path>` entry (`pulumi package add` writes it)"
        )
    schema = (directory / source / "schema.json").resolve()
    if not schema.is_file():
        raise NodeProgramError(
            f"{directory / 'Pulumi.yaml'}: package {PACKAGE_NAME!r} at {source!r} has no schema.json"
        )
    return PACKAGE_NAME, schema


def _run(argv: Sequence[str], directory: Path, what: str, env: Mapping[str, str] | None = None) -> str:
    done = subprocess.run(list(argv), cwd=directory, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        # The example's runner states its failures as one `error: …` line; anything else is shown as it came.
        errors = [ln.removeprefix("error:").strip() for ln in done.stderr.splitlines() if ln.startswith("error:")]
        if errors:
            raise NodeProgramError(f"{what}: {errors[-1]}")
        output = (done.stderr or done.stdout).strip()[-2000:]
        raise NodeProgramError(f"{what} failed (`{' '.join(argv)}` in {directory}):\n{output}")
    return done.stdout


def prepare(directory: Path, project: Mapping[str, Any]) -> None:
    """Steps 1 and 2: the SDK where `pulumi package add` writes it, then the pinned dependencies."""
    require_node()
    name, schema = package_schema(directory, project)
    _run([str(sdk_generator()), str(schema), str(directory / "sdks" / name)], directory, "generating the SDK")
    _run(["npm", "ci", "--no-audit", "--no-fund"], directory, "npm ci")


def run_node(directory: Path, stack: str, config: Mapping[str, Any], stack_outputs: Sequence[str]) -> dict[str, Any]:
    """Step 3: the program under the Node.js mock runtime; its report (resources with inputs, exports)."""
    with tempfile.TemporaryDirectory(prefix="node-program-") as tmp:
        report = Path(tmp) / "run.json"
        argv = ["npm", "run", "--silent", "preview", "--", "--stack", stack, "--report", str(report)]
        for pair in stack_outputs:
            argv += ["--stack-output", pair]
        # The Node.js SDK reads the stack's config from PULUMI_CONFIG, as the language host passes it.
        env = {**os.environ, "PULUMI_CONFIG": json.dumps(dict(config))}
        _run(argv, directory, "index.ts", env)
        run: dict[str, Any] = json.loads(report.read_text())
    return run


def _components() -> dict[str, type[ComponentResource]]:
    return {f"{PACKAGE_NAME}:index:{cls.__name__}": cls for cls in hosted_components()}


def program_body(run: Mapping[str, Any]) -> Callable[[], None]:
    """Step 4, as a program the Python mock runtime runs: the recorded components, built from their inputs."""
    components = _components()

    def body() -> None:
        made: dict[str, ComponentResource] = {}
        for res in run["resources"]:
            typ, name = res["type"], res["name"]
            if typ in components:
                made[name] = components[typ](name, res["inputs"])
            elif typ != STACK_REFERENCE:  # read from --stack-output; nothing to create
                raise NodeProgramError(
                    f"the program registers {typ} {name!r}, which is not previewed offline (only {PACKAGE_NAME} "
                    f"components and {STACK_REFERENCE}); run `pulumi preview` for it"
                )
        for key, value in run["outputs"].items():
            ref = _REFERENCE.match(value) if isinstance(value, str) else None
            if ref is not None and ref.group("res") in made:
                value = getattr(made[ref.group("res")], _snake(ref.group("prop")))
            pulumi.export(key, value)

    return body


def run_directory(
    directory: Path,
    project: Mapping[str, Any],
    stack: str,
    config: Mapping[str, Any],
    stack_outputs: Sequence[str],
) -> tuple[ProgramRun, dict[str, Any]]:
    """(the components' run under Python's mock runtime, the Node.js program's own report)."""
    prepare(directory, project)
    report = run_node(directory, stack, config, stack_outputs)
    name = str(project.get("name"))
    return run_program(stack, dict(config), directory, project=name, body=program_body(report)), report
