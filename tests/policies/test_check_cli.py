"""``gke-tpu-priority-check``: the platform's rendered objects plus team workloads, exit codes, reports."""

from __future__ import annotations

import copy
import io
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from gke_tpu_priority.components.config import parse_platform_config
from gke_tpu_priority.components.config.resolved import effective_local_queues
from gke_tpu_priority.components.workloads import TpuJobSetSpec, tpu_jobset
from gke_tpu_priority.policies import check
from testkit.mock_runtime import PROJECT_ROOT, load_stack_config
from testkit.stacks import STACKS
from tools import preview

_RENDERED: dict[str, Path] = {}


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("build")


def manifests(stack: str, build_dir: Path) -> Path:
    """``build/<stack>/manifests.yaml`` as ``make preview`` writes it."""
    if stack not in _RENDERED:
        assert preview.main(["--stack", stack, "--build-dir", str(build_dir)]) == 0
        _RENDERED[stack] = build_dir / stack / "manifests.yaml"
    return _RENDERED[stack]


def team_jobset(stack: str, topology: str = "4x4") -> dict[str, Any]:
    config = parse_platform_config(load_stack_config(stack)["gke-tpu-priority:platform"])
    queue = effective_local_queues(config.queues)[0]
    top = max(config.priorities, key=lambda t: t.value)
    spec = {
        "name": "llm",
        "namespace": queue.namespace,
        "queue": queue.name,
        "priority": top.name,
        "allowSpot": top.spot,  # a tier the stack keeps off spot (ladder) needs JobSets that exclude it
        "topology": topology,
        "slices": 1,  # every stack queue holds one 4x4 slice; more would never run (tpu-workload-fits-its-queue)
        "image": "trainer:1",
        "command": ["python", "train.py"],
    }
    return tpu_jobset(TpuJobSetSpec.model_validate(spec))


def run(paths: list[str], *options: str, stdin: str = "") -> tuple[int, str]:
    out = io.StringIO()
    code = check.main([*options, *paths], stdin=io.StringIO(stdin), stdout=out)
    return code, out.getvalue()


def write(tmp_path: Path, obj: dict[str, Any], name: str = "jobset.yaml") -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(obj))
    return str(path)


@pytest.mark.parametrize("stack", STACKS)
def test_platform_objects_and_a_good_jobset_pass(stack: str, build_dir: Path, tmp_path: Path) -> None:
    code, out = run([str(manifests(stack, build_dir)), write(tmp_path, team_jobset(stack))])
    assert code == 0, out
    assert out.startswith("No violations;")


LOWEST_DEV_TIER = min(
    parse_platform_config(load_stack_config("dev")["gke-tpu-priority:platform"]).priorities, key=lambda t: t.value
).name


def _pod(obj: dict[str, Any]) -> dict[str, Any]:
    return obj["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]


BROKEN: list[tuple[str, Callable[[dict[str, Any]], Any], str]] = [
    ("no-queue", lambda o: o["metadata"]["labels"].pop("kueue.x-k8s.io/queue-name"), "tpu-workload-require-queue-name"),
    (
        "undeclared-queue",
        lambda o: o["metadata"]["labels"].update({"kueue.x-k8s.io/queue-name": "nope"}),
        "tpu-workload-queue-declared",
    ),
    (
        "undeclared-tier",
        lambda o: (
            o["metadata"]["labels"].update({"kueue.x-k8s.io/priority-class": "vip"}),
            _pod(o).update(priorityClassName="vip"),
        ),
        "tpu-workload-priority-tier-declared",
    ),
    (
        "label-disagrees",
        lambda o: _pod(o).update(priorityClassName=LOWEST_DEV_TIER),
        "tpu-workload-priority-label-matches-pods",
    ),
    (
        "no-exclusive-topology",
        lambda o: o["metadata"].pop("annotations"),
        "jobset-v1alpha2-tpu-multi-host-exclusive-topology",
    ),
    (
        "wrong-chip-count",
        lambda o: _pod(o)["containers"][0]["resources"].update(limits={"google.com/tpu": "8"}, requests={}),
        "tpu-workload-fits-v6e-shape",
    ),
    (
        "wrong-parallelism",
        lambda o: o["spec"]["replicatedJobs"][0]["template"]["spec"].update(parallelism=2),
        "tpu-workload-fits-v6e-shape",
    ),
]


@pytest.mark.parametrize(("change", "rule"), [pytest.param(c, r, id=i) for i, c, r in BROKEN])
def test_each_broken_convention_is_refused_by_name(
    change: Callable[[dict[str, Any]], Any], rule: str, build_dir: Path, tmp_path: Path
) -> None:
    jobset = copy.deepcopy(team_jobset("dev"))
    change(jobset)
    code, out = run([str(manifests("dev", build_dir)), write(tmp_path, jobset)])
    assert code == check.EXIT_VIOLATIONS
    header = f"JobSet {jobset['metadata']['namespace']}/llm ({tmp_path / 'jobset.yaml'}): {rule}"
    assert header in out.splitlines(), out
    # the unbroken rest of the platform raises nothing
    assert all(line.startswith(("JobSet ", "    ", "1 violation", "2 violation")) for line in out.splitlines()), out


def test_json_report_names_object_rule_and_fix(build_dir: Path, tmp_path: Path) -> None:
    jobset = team_jobset("dev")
    jobset["metadata"]["labels"].pop("kueue.x-k8s.io/queue-name")
    code, out = run([str(manifests("dev", build_dir)), write(tmp_path, jobset)], "-o", "json")
    report = json.loads(out)
    assert code == 1 and report["checked"] > 10
    (violation,) = report["violations"]
    assert violation["rule"] == "tpu-workload-require-queue-name" and violation["level"] == "mandatory"
    assert violation["object"] == {
        "kind": "JobSet",
        "namespace": jobset["metadata"]["namespace"],
        "name": "llm",
        "source": str(tmp_path / "jobset.yaml"),
    }
    assert "set it to a LocalQueue" in violation["message"]


def test_stdin_directories_and_default_namespace(build_dir: Path, tmp_path: Path) -> None:
    platform_dir = tmp_path / "platform" / "nested"
    platform_dir.mkdir(parents=True)
    (platform_dir / "objects.yml").write_text(manifests("dev", build_dir).read_text())
    (tmp_path / "platform" / "README.md").write_text("not yaml: [")  # only *.yaml / *.yml are read
    jobset = team_jobset("dev")
    namespace = jobset["metadata"].pop("namespace")
    code, out = run([str(tmp_path / "platform"), "-"], "--namespace", namespace, stdin=yaml.safe_dump(jobset))
    assert code == 0, out
    code, out = run([str(tmp_path / "platform"), "-"], stdin=yaml.safe_dump(jobset))
    assert code == 1 and "JobSet default/llm (<stdin>): tpu-workload-queue-declared" in out


def test_advisory_and_disabled_rules_from_a_pack_config(build_dir: Path, tmp_path: Path) -> None:
    """--config tunes the rules the cluster does not enforce; those it enforces it may not lower."""
    queue = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "LocalQueue",
        "metadata": {"name": "old", "namespace": "x"},
        "spec": {"clusterQueue": "tpu-training"},
    }
    paths = [str(manifests("dev", build_dir)), write(tmp_path, queue)]
    assert run(paths)[0] == 1
    config = tmp_path / "policy-config.json"
    config.write_text(json.dumps({"kueue-require-v1beta2": "advisory"}))
    code, out = run(paths, "--config", str(config))
    assert code == 0 and "[advisory]" in out and "0 blocking" in out
    config.write_text(json.dumps({"kueue-require-v1beta2": "disabled"}))
    assert run(paths, "--config", str(config))[0] == 0


@pytest.mark.parametrize(
    "lowering",
    [
        {"all": "disabled"},
        {"all": "advisory"},
        {"jobset-v1alpha2-tpu-multi-host-exclusive-topology": "advisory"},
        {"tpu-workload-tier-entitled": {"enforcementLevel": "disabled"}},
    ],
)
def test_a_config_cannot_lower_what_the_cluster_enforces(
    lowering: dict[str, Any], build_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    jobset = team_jobset("dev")
    jobset["metadata"].pop("annotations")
    config = tmp_path / "policy-config.json"
    config.write_text(json.dumps(lowering))
    assert run([str(manifests("dev", build_dir)), write(tmp_path, jobset)], "--config", str(config))[0] == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {config}: ") and "the cluster's admission policy enforces it" in err


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("kind: [", "not valid YAML"),
        ("- just\n- a list\n", "not a Kubernetes object"),
        ("apiVersion: v1\nmetadata: {name: x}\n", "not a Kubernetes object"),
        ("apiVersion: v1\nkind: List\nitems: [3]\n", "items[0]: not a Kubernetes object"),
    ],
)
def test_invalid_input_exits_2(content: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    assert run([str(path)]) == (check.EXIT_INVALID, "")
    assert message in capsys.readouterr().err


def test_missing_path_and_bad_config_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run([str(tmp_path / "absent.yaml")])[0] == 2
    assert "no such file or directory" in capsys.readouterr().err
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"no-such-rule": "advisory"}))
    assert run([str(tmp_path)], "--config", str(config))[0] == 2
    assert "unknown rule 'no-such-rule'" in capsys.readouterr().err


def test_module_runs_as_a_command(build_dir: Path, tmp_path: Path) -> None:
    jobset = team_jobset("dev")
    jobset["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "vip"
    proc = subprocess.run(
        [sys.executable, "-m", "gke_tpu_priority.policies.check", str(manifests("dev", build_dir)), "-"],
        input=yaml.safe_dump(jobset),
        capture_output=True,
        text=True,
        cwd=PROJECT_ROOT,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr
    assert (
        "tpu-workload-priority-tier-declared" in proc.stdout
        and "tpu-workload-priority-label-matches-pods" in proc.stdout
    )
