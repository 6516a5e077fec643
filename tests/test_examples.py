"""Every example in examples/ runs or is checked: Python under the mock runtime, YAML/TypeScript against the schema."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from gke_tpu_priority.components.config import parse_platform_config
from testkit.examples import readme_command, typescript_settings
from testkit.mock_runtime import PROJECT_ROOT, run_program
from testkit.resources import SECRET_SIG, ProgramRun
from tests.support.multikueue_rules import multikueue_problems, object_problems
from tools import node_program, toolchain
from tools.fleet_preview import CLUSTER_ANNOTATION, fleet_objects
from tools.manifests import kubernetes_objects
from tools.node_program import STACK_REFERENCE, NodeProgramError, program_body
from tools.program_preview import main as preview_main
from tools.program_preview import run_directory
from tools.schema_check import check_component, is_output, load_schema

EXAMPLES = PROJECT_ROOT / "examples"
PLATFORM = "gke-tpu-priority:index:TpuPlatform"


def quotas(run: ProgramRun) -> dict[str, dict[str, int]]:
    return {
        o["metadata"]["name"]: {
            f["name"]: int(f["resources"][0]["nominalQuota"]) for g in o["spec"]["resourceGroups"] for f in g["flavors"]
        }
        for o in kubernetes_objects(run.resources)
        if o["kind"] == "ClusterQueue"
    }


def own_files(directory: Path) -> list[Path]:
    """The example's files, not the directories `npm ci` and the SDK generator write beside them (git ignores them)."""
    return [p for p in directory.iterdir() if p.is_file()]


def test_every_example_has_a_readme_and_a_check() -> None:
    examples = {p.name for p in EXAMPLES.iterdir() if p.is_dir()}
    assert examples == {"python", "existing-cluster", "yaml", "typescript", "fleet"}
    for name in examples:
        assert (EXAMPLES / name / "README.md").read_text().strip()
        assert (EXAMPLES / name / "Pulumi.yaml").exists()


def test_python_example_creates_the_platform_it_describes() -> None:
    run = run_program("dev", {"gcp:project": "my-tpu-example"}, root=EXAMPLES / "python")
    (cluster,) = [r for r in run.resources if r.type == "gcp:container/cluster:Cluster"]
    assert cluster.inputs["name"] == "tpu-training" and cluster.inputs["project"] == "my-tpu-example"
    pools = {r.inputs["name"] for r in run.resources if r.type == "gcp:container/nodePool:NodePool"}
    assert pools == {"system", "resv-4x4-0", "resv-4x4-1", "resv-4x4-2", "resv-4x4-3", "spot-2x2"}
    charts = {r.inputs["chart"].rsplit("/", 1)[-1] for r in run.resources if r.type.endswith("helm.sh/v4:Chart")}
    assert charts == {"kueue", "jobset"}
    assert quotas(run) == {"tpu-training": {"v6e-2x2": 16, "v6e-4x4": 64}}
    assert any(r.type == "docker-build:index:Image" for r in run.resources)  # the reconciler image is built
    assert run.outputs["clusterQueues"] == ["tpu-training"]
    assert run.outputs["localQueues"] == ["tpu-training/training"]


def test_existing_cluster_example_uses_the_given_provider_and_no_gcp() -> None:
    config = {"gcp:project": "my-tpu-example", "gke-tpu-priority:kubeContext": "gke_p_us-east5_xpk-v6e"}
    run = run_program("dev", config, root=EXAMPLES / "existing-cluster")
    assert not [r for r in run.resources if r.type.startswith(("gcp:", "docker-build:"))]
    (provider,) = [r for r in run.resources if r.type == "pulumi:providers:kubernetes"]
    assert provider.inputs["context"] == "gke_p_us-east5_xpk-v6e"
    in_cluster = [r for r in run.resources if r.custom and r.type.startswith("kubernetes:")]
    assert len(in_cluster) > 10
    for res in in_cluster:
        # A component's `provider` option reaches every child: nothing goes to the ambient default provider.
        assert res.provider is not None and res.provider.startswith(provider.urn), res.urn
    assert quotas(run) == {"research": {"v6e-4x8": 64}}
    assert run.outputs["priorityTiers"] == ["training-high", "training-low", "best-effort"]


def test_fleet_example_creates_a_manager_and_two_workers_that_multikueue_accepts() -> None:
    run = run_program("dev", {"gcp:project": "my-tpu-example"}, root=EXAMPLES / "fleet")
    clusters = {r.inputs["name"]: r.inputs for r in run.resources if r.type == "gcp:container/cluster:Cluster"}
    assert set(clusters) == {"tpu-fleet-manager", "tpu-east5", "tpu-west4"}
    assert clusters["tpu-fleet-manager"]["enableAutopilot"] is True
    assert {c["location"] for c in clusters.values()} == {"us-central1", "us-east5", "europe-west4"}
    assert run.outputs["dispatchOrder"] == ["east5", "west4"]
    assert run.outputs["workerClusters"] == {"east5": "tpu-east5", "west4": "tpu-west4"}
    by_cluster: dict[str, list[dict[str, Any]]] = {}
    for obj in fleet_objects(run, "fleet"):
        by_cluster.setdefault(obj["metadata"]["annotations"].pop(CLUSTER_ANNOTATION), []).append(obj)
    assert set(by_cluster) == {"manager", "east5", "west4"}
    manager = by_cluster["manager"]
    (config,) = [o for o in manager if o["kind"] == "MultiKueueConfig"]
    assert config["spec"]["clusters"] == ["east5", "west4"]
    (cq,) = [o for o in manager if o["kind"] == "ClusterQueue"]
    assert [f["resources"][0]["nominalQuota"] for f in cq["spec"]["resourceGroups"][0]["flavors"]] == ["96"]  # 6 x 16
    assert cq["spec"]["admissionChecksStrategy"] == {"admissionChecks": [{"name": "multikueue"}]}
    for objs in by_cluster.values():
        assert object_problems(objs) == []
    assert multikueue_problems(manager) == []
    secrets = [r for r in run.resources if r.type == "kubernetes:core/v1:Secret" and "-mk-kubeconfig-" in r.name]
    assert len(secrets) == 2 and all(SECRET_SIG in r.inputs["stringData"] for r in secrets)


def _sample(value: Any) -> Any:
    """Stand-ins for values only known at deployment (config and outputs), shaped as the real ones."""
    if isinstance(value, dict):
        return {k: _sample(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_sample(v) for v in value]
    if value == "${gcp:project}":
        return "my-tpu-example"
    if is_output(value):
        return "cluster-from-output"
    return value


def test_yaml_example_properties_match_the_schema_and_the_model() -> None:
    program = yaml.safe_load((EXAMPLES / "yaml" / "Pulumi.yaml").read_text())
    (props,) = [r["properties"] for r in program["resources"].values() if r["type"] == PLATFORM]
    assert check_component(load_schema(), PLATFORM, props) == []
    assert is_output(props["platform"]["cluster"]["name"])
    config = parse_platform_config(_sample(props["platform"]))
    assert config.cluster.is_existing()
    assert {f.name: f.chips for f in config.flavors} == {"v6e-8x8": 128}
    for output in program["outputs"].values():
        name = output.removeprefix("${platform.").removesuffix("}")
        assert name in load_schema()["resources"][PLATFORM]["properties"]


def test_typescript_example_settings_match_the_schema_and_the_model() -> None:
    source = (EXAMPLES / "typescript" / "index.ts").read_text()
    props = typescript_settings(source)
    assert check_component(load_schema(), PLATFORM, props) == []
    assert is_output(props["platform"]["project"])  # the project id is another resource's output
    config = parse_platform_config({**props["platform"], "project": "my-tpu-example"})
    assert [g.chips for g in config.tpu_pools] == [32, 64]
    for name in re.findall(r"platform\.(\w+);", source):
        assert name in load_schema()["resources"][PLATFORM]["properties"]


@pytest.mark.parametrize(
    ("platform", "problem"),
    [
        ({"region": "us-east5", "tpuPools": []}, "TpuPlatform.platform.project: required"),
        ({"project": "p", "region": "x", "tpuPools": [], "clusterr": {}}, "platform.clusterr: unknown property"),
        ({"project": "p", "region": "${net.region}", "tpuPools": []}, "platform.region: takes a plain value"),
        (
            {"project": "p", "region": "r", "tpuPools": [{"topology": "4x5"}]},
            "platform.tpuPools[0].topology: '4x5' is not one of 1x1",
        ),
        ({"project": "p", "region": "r", "tpuPools": [], "protect": "yes"}, "platform.protect: expected boolean"),
    ],
)
def test_schema_check_catches_what_a_consumer_gets_wrong(platform: dict[str, Any], problem: str) -> None:
    problems = check_component(load_schema(), PLATFORM, {"platform": platform})
    assert any(problem in p for p in problems), problems


def test_examples_readme_lists_every_example() -> None:
    text = (EXAMPLES / "README.md").read_text()
    for example in ("python/", "existing-cluster/", "yaml/", "typescript/", "fleet/"):
        assert f"]({example})" in text
    assert Path(EXAMPLES / "typescript" / "index.ts").exists()


# --- each example runs as its README says, from its own directory ------------------------------------------

OFFLINE = ("python", "existing-cluster", "fleet", "yaml")


@pytest.mark.parametrize("example", OFFLINE)
def test_the_readme_offline_preview_runs_from_the_example_directory(
    example: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = readme_command(example)
    # A Python example installs this checkout into its own venv (`-e ../..`); the test interpreter has the same.
    assert argv[0] == ("../../.venv/bin/python" if example == "yaml" else "venv/bin/python")
    monkeypatch.chdir(EXAMPLES / example)
    assert preview_main(argv[2:]) == 0
    out = capsys.readouterr().out
    name = yaml.safe_load((EXAMPLES / example / "Pulumi.yaml").read_text())["name"]
    assert out.startswith(f"Program {name!r} (")
    assert "offline under Pulumi's mock runtime" in out and "Outputs:" in out


def test_the_readme_command_runs_as_a_process_through_the_examples_launcher() -> None:
    argv = readme_command("existing-cluster")
    done = subprocess.run(
        [sys.executable, *argv[1:]],
        cwd=EXAMPLES / "existing-cluster",
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "PYTHONPATH": ""},  # only what the launcher adds: the checkout's root
    )
    assert done.returncode == 0, done.stderr
    assert "Program 'tpu-queues-existing-cluster' (python)" in done.stdout
    assert 'priorityTiers: ["training-high", "training-low", "best-effort"]' in done.stdout


def test_the_yaml_program_runs_offline_with_the_stack_output_it_names() -> None:
    argv = readme_command("yaml")
    config = [argv[i + 1] for i, a in enumerate(argv) if a == "--config"]
    outputs = [argv[i + 1] for i, a in enumerate(argv) if a == "--stack-output"]
    run, runtime = run_directory(EXAMPLES / "yaml", "dev", config, outputs)
    assert runtime == "yaml"
    assert not [r for r in run.resources if r.type.startswith(("gcp:", "docker-build:"))]  # existing cluster
    assert quotas(run) == {"tpu-training": {"v6e-8x8": 128}}
    assert run.outputs == {"clusterQueues": ["tpu-training"], "localQueues": ["tpu-training/training"]}
    (deployment,) = [o for o in kubernetes_objects(run.resources) if o["kind"] == "Deployment"]
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"].endswith("hotswap-reconciler:0.1.0")


def test_the_yaml_preview_says_which_stack_output_it_lacks(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(EXAMPLES / "yaml")
    assert preview_main(["--config", "gcp:project=my-project"]) == 2
    assert "pass --stack-output clusterName=<the value that stack exports>" in capsys.readouterr().err


def test_the_typescript_readme_gives_the_offline_preview_and_the_cli_path() -> None:
    readme = (EXAMPLES / "typescript" / "README.md").read_text()
    argv = readme_command("typescript")
    assert argv[0] == "../../.venv/bin/python"
    assert argv[2:] == ["--stack-output", "projectId=my-tpu-project"]
    for step in ("pulumi package add ../../components", "npm ci", "npx tsc --noEmit", "403 Forbidden"):
        assert step in readme, step
    assert "Not runnable offline" not in readme
    assert "make e2e" in readme  # where it is run as written (it needs npm and Go)


# What `npm run preview` reports for index.ts (mock-preview.ts): the component's outputs are references.
TS_REPORT: dict[str, Any] = {
    "project": "tpu-platform-typescript",
    "stack": "dev",
    "resources": [
        {"type": STACK_REFERENCE, "name": "my-org/gcp-projects/prod", "custom": True, "inputs": {}},
        {
            "type": PLATFORM,
            "name": "training",
            "custom": False,
            "inputs": {
                "platform": {
                    "project": "my-tpu-project",
                    "region": "us-east5",
                    "cluster": {"name": "tpu-ts"},
                    "tpuPools": [
                        {"name": "train-4x4", "topology": "4x4", "slices": 2, "zone": "us-east5-b",
                         "capacity": {"mode": "spot"}},
                    ],
                }
            },
        },
    ],
    "outputs": {"clusterName": "${training.clusterName}", "clusterQueues": "${training.clusterQueues}", "n": 3},
}  # fmt: skip


def test_a_node_programs_components_are_built_from_the_inputs_it_gave_them() -> None:
    run = run_program(
        "dev", {}, EXAMPLES / "typescript", project="tpu-platform-typescript", body=program_body(TS_REPORT)
    )
    (cluster,) = [r for r in run.resources if r.type == "gcp:container/cluster:Cluster"]
    assert cluster.inputs["name"] == "tpu-ts" and cluster.inputs["project"] == "my-tpu-project"
    assert quotas(run) == {"tpu-training": {"v6e-4x4": 32}}
    # An export naming a component's output gets the value the component computed; any other is kept.
    assert run.outputs == {"clusterName": "tpu-ts", "clusterQueues": ["tpu-training"], "n": 3}


def test_a_node_program_with_another_resource_type_is_refused_by_name() -> None:
    report = {**TS_REPORT, "resources": [{"type": "gcp:storage/bucket:Bucket", "name": "logs", "inputs": {}}]}
    body = program_body(report)
    with pytest.raises(NodeProgramError, match=r"gcp:storage/bucket:Bucket 'logs', which is not previewed offline"):
        run_program("dev", {}, EXAMPLES / "typescript", project="tpu-platform-typescript", body=body)


def test_the_typescript_preview_without_node_says_what_it_needs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(node_program.shutil, "which", lambda tool: None)
    monkeypatch.chdir(EXAMPLES / "typescript")
    assert preview_main(["--stack-output", "projectId=p"]) == 2
    assert capsys.readouterr().err == (
        "error: node and npm not found on PATH: this TypeScript example needs Node.js and npm (see its README)\n"
    )


def test_the_typescript_preview_without_go_says_so(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(node_program.shutil, "which", lambda tool: f"/usr/bin/{tool}")

    def no_go() -> str:
        raise SystemExit("e2e: Go is not installed; the local control plane is built from source and needs Go >= 1.26")

    monkeypatch.setattr(toolchain, "go_version", no_go)
    monkeypatch.chdir(EXAMPLES / "typescript")
    assert preview_main(["--stack-output", "projectId=p"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: cannot build the SDK generator (e2e/go/gen-sdk): Go is not installed")
    assert "Traceback" not in err


@pytest.mark.parametrize("example", ["yaml", "typescript"])
def test_component_package_examples_name_this_checkout_not_a_placeholder(example: str) -> None:
    project = yaml.safe_load((EXAMPLES / example / "Pulumi.yaml").read_text())
    assert project["packages"] == {"gke-tpu-priority": "../../components"}
    assert (EXAMPLES / example / "../../components/PulumiPlugin.yaml").resolve().is_file()
    for path in own_files(EXAMPLES / example):
        text = path.read_text()
        assert "<org>" not in text and "<tag>" not in text, path


def test_a_python_example_without_its_config_says_which_value_is_missing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(EXAMPLES / "python")
    assert preview_main([]) == 2
    assert "Missing required configuration variable 'gcp:project'" in capsys.readouterr().err
