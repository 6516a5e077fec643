"""Shared fixtures: whole-program runs under Pulumi mocks, cached per stack (the program is deterministic)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.mock_runtime import PROJECT_ROOT, load_stack_config, run_program
from tools.resources import ProgramRun

ALL_STACKS = sorted(
    p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in (PROJECT_ROOT / "stacks").glob("Pulumi.*.yaml")
)
# Fleet stacks (`gke-tpu-priority:fleet`) hold several platforms; tests/test_fleet*.py cover them.
FLEET_STACKS = [s for s in ALL_STACKS if "gke-tpu-priority:fleet" in load_stack_config(s)]
STACKS = [s for s in ALL_STACKS if s not in FLEET_STACKS]
# Stacks whose cluster the package creates (the others use `cluster.mode: existing` and create no GCP resource).
CREATED_CLUSTER_STACKS = [
    s for s in STACKS if load_stack_config(s)["gke-tpu-priority:platform"].get("cluster", {}).get("mode") != "existing"
]
_RUNS: dict[str, ProgramRun] = {}


def stack_run(stack: str) -> ProgramRun:
    if stack not in _RUNS:
        _RUNS[stack] = run_program(stack)
    return _RUNS[stack]


@pytest.fixture(params=STACKS)
def any_stack_run(request: pytest.FixtureRequest) -> ProgramRun:
    return stack_run(request.param)


@pytest.fixture
def project_root() -> Path:
    return PROJECT_ROOT
