"""The offline evaluator of Pulumi YAML programs (tools/yaml_program.py) previews what it understands and refuses,
naming the place in the program, what it would preview wrongly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tools.program_preview import parse_config, run_directory
from tools.yaml_program import YamlProgramError

PLATFORM = {
    "project": "${gcp:project}",
    "region": "us-east5",
    "cluster": {"mode": "existing", "name": "tpu-prod"},
    "tpuPools": [
        {"name": "p", "topology": "2x2", "slices": 1, "zone": "us-east5-b", "capacity": {"mode": "spot"}},
    ],
    "hotswap": {"image": "r/hotswap-reconciler:0.1.0"},
}


def program(tmp_path: Path, resources: dict[str, Any], outputs: dict[str, Any] | None = None) -> Path:
    doc = {
        "name": "t",
        "runtime": "yaml",
        "config": {"gcp:project": {"type": "string"}},
        "resources": resources,
        "outputs": outputs or {},
    }
    (tmp_path / "Pulumi.yaml").write_text(yaml.safe_dump(doc))
    return tmp_path


def platform(props: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"type": "gke-tpu-priority:index:TpuPlatform", "properties": {"platform": props or PLATFORM}}


def test_config_component_and_outputs_are_evaluated(tmp_path: Path) -> None:
    root = program(tmp_path, {"p": platform()}, {"tiers": "${p.priorityTiers}"})
    run, runtime = run_directory(root, "dev", ["gcp:project=my-project"])
    assert runtime == "yaml" and run.project == "t"
    assert run.outputs == {"tiers": ["training-high", "training-low", "best-effort"]}


@pytest.mark.parametrize(
    ("resources", "message"),
    [
        ({"b": {"type": "gcp:storage:Bucket"}}, "resources.b: type 'gcp:storage:Bucket' is not previewed offline"),
        (
            {"p": platform({**PLATFORM, "region": "us-${zone}"})},
            "resources.p.properties.platform.region: 'us-${zone}' interpolates inside a string",
        ),
        (
            {"p": platform({**PLATFORM, "project": {"fn::invoke": {"function": "gcp:organizations:getProject"}}})},
            "resources.p.properties.platform.project: functions (fn::invoke) are not previewed offline",
        ),
        (
            {"p": platform({**PLATFORM, "project": "${other.projectId}"})},
            "resources.p.properties.platform.project: ${other.projectId} refers to nothing this program declares",
        ),
    ],
)
def test_what_it_cannot_preview_is_refused_with_its_place(
    tmp_path: Path, resources: dict[str, Any], message: str
) -> None:
    with pytest.raises(YamlProgramError) as caught:
        run_directory(program(tmp_path, resources), "dev", ["gcp:project=my-project"])
    assert message in str(caught.value)


def test_config_without_a_value_says_how_to_give_it(tmp_path: Path) -> None:
    with pytest.raises(YamlProgramError) as caught:
        run_directory(program(tmp_path, {"p": platform()}), "dev", [])
    assert "config 'gcp:project' has no value; pass --config gcp:project=<value>" in str(caught.value)


def test_config_keys_without_a_namespace_belong_to_the_project() -> None:
    assert parse_config(["kubeContext=c", "gcp:project=p"], "proj") == {"proj:kubeContext": "c", "gcp:project": "p"}
    with pytest.raises(ValueError, match="expected key=value"):
        parse_config(["nothing"], "proj")
    assert issubclass(YamlProgramError, ValueError)
