"""The repository's stacks and their whole-program runs under Pulumi mocks, cached per stack (the program is
deterministic): the offline tests judge these runs, and e2e applies the same objects to the real servers."""

from __future__ import annotations

from testkit.mock_runtime import PROJECT_ROOT, load_stack_config, run_program
from testkit.resources import ProgramRun

ALL_STACKS = sorted(
    p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in (PROJECT_ROOT / "stacks").glob("Pulumi.*.yaml")
)
FLEET_STACKS = [s for s in ALL_STACKS if "gke-tpu-priority:fleet" in load_stack_config(s)]
"""Stacks that hold several platforms (`gke-tpu-priority:fleet`); tests/test_fleet*.py cover them."""
STACKS = [s for s in ALL_STACKS if s not in FLEET_STACKS]
CREATED_CLUSTER_STACKS = [
    s for s in STACKS if load_stack_config(s)["gke-tpu-priority:platform"].get("cluster", {}).get("mode") != "existing"
]
"""Stacks whose cluster the package creates (the others use `cluster.mode: existing` and create no GCP resource)."""
_RUNS: dict[str, ProgramRun] = {}


def stack_run(stack: str) -> ProgramRun:
    """The stack's program run under mocks, once per process."""
    if stack not in _RUNS:
        _RUNS[stack] = run_program(stack)
    return _RUNS[stack]
