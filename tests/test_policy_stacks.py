"""The policy pack over every stack's preview: the program satisfies its own conventions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gke_tpu_priority.policies.rules import evaluate_resources
from testkit.stacks import STACKS
from tools import preview


@pytest.mark.parametrize("stack", STACKS)
def test_every_stack_passes_the_policy_pack(stack: str, tmp_path: Path) -> None:
    assert preview.main(["--stack", stack, "--build-dir", str(tmp_path)]) == 0
    resources = json.loads((tmp_path / stack / "resources.json").read_text())["resources"]
    violations = evaluate_resources(resources, stack_tags={"environment": stack})
    blocking = [v for v in violations if v.blocking]
    assert not blocking, "\n".join(f"{v.policy}: {v.message}" for v in blocking)


def test_the_pack_catches_a_broken_stack(tmp_path: Path) -> None:
    assert preview.main(["--stack", "prod", "--build-dir", str(tmp_path)]) == 0
    resources = json.loads((tmp_path / "prod" / "resources.json").read_text())["resources"]
    for res in resources:
        if (
            res["type"] == "kubernetes:kueue.x-k8s.io/v1beta2:WorkloadPriorityClass"
            and res["inputs"]["metadata"]["name"] == "training-high"
        ):
            res["inputs"]["value"] = 1234.0
    violations = evaluate_resources(resources)
    assert any("training-high" in v.message and v.blocking for v in violations)
