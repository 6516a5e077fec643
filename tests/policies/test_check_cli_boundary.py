"""``gke-tpu-priority-check`` as a boundary: only the platform's files decide tiers, queues and
entitlements; malformed input of any kind exits 2 naming the file and what is wrong, never with a traceback."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from gke_tpu_priority.policies import check, inputs
from testkit.mock_runtime import PROJECT_ROOT
from tests.policies.test_check_cli import manifests, run, team_jobset, write


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("build")


def prod_jobset(namespace: str, tier: str) -> dict[str, Any]:
    jobset = team_jobset("prod")
    jobset["metadata"]["namespace"] = namespace
    jobset["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = tier
    for job in jobset["spec"]["replicatedJobs"]:
        job["template"]["spec"]["template"]["spec"]["priorityClassName"] = tier
    return jobset


def refused(capsys: pytest.CaptureFixture[str], *args: Any, **kwargs: Any) -> str:
    """Run the CLI, require exit 2 with nothing on stdout, and return stderr."""
    assert run(*args, **kwargs) == (check.EXIT_INVALID, "")
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err
    return err


# --------------------------------------------------------------------------------------------------------
# Only the platform's files decide


def test_prod_team_b_cannot_use_the_top_tier(build_dir: Path, tmp_path: Path) -> None:
    platform = str(manifests("prod", build_dir))
    assert run([write(tmp_path, prod_jobset("team-a", "training-high"))], "--platform", platform)[0] == 0
    assert run([write(tmp_path, prod_jobset("team-b", "training-low"))], "--platform", platform)[0] == 0
    code, out = run([write(tmp_path, prod_jobset("team-b", "training-high"))], "--platform", platform)
    assert code == 1 and "tpu-workload-tier-entitled" in out and "allowed there: best-effort, training-low" in out


def test_without_platform_the_cli_says_that_any_file_decides(
    build_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    jobset = write(tmp_path, prod_jobset("team-a", "training-high"))
    assert run([str(manifests("prod", build_dir)), jobset])[0] == 0
    assert "note: without --platform every file may declare tiers" in capsys.readouterr().err
    assert run([jobset], "--platform", str(manifests("prod", build_dir)))[0] == 0
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    "declared",
    [
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": "mine", "namespace": "team-b"},
            "spec": {"clusterQueue": "team-a"},
        },
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "vip"}, "value": 9},
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": "vip"},
            "value": 9,
        },
    ],
    ids=["local-queue", "priority-class", "workload-priority-class"],
)
def test_a_team_file_cannot_declare_platform_objects(
    declared: dict[str, Any], build_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    team = tmp_path / "team.yaml"
    team.write_text(yaml.safe_dump_all([prod_jobset("team-b", "training-low"), declared]))
    err = refused(capsys, [str(team)], "--platform", str(manifests("prod", build_dir)))
    assert f"the team's files declare {declared['kind']} " in err and "only from the platform's files" in err


def test_a_team_config_cannot_add_tiers_or_queues(
    build_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"tpu-workload-queue-declared": {"externalLocalQueues": ["team-b/mine"]}}))
    jobset = write(tmp_path, prod_jobset("team-b", "training-low"))
    err = refused(capsys, [jobset], "--platform", str(manifests("prod", build_dir)), "--config", str(config))
    assert "tpu-workload-queue-declared.externalLocalQueues: declares tiers or LocalQueues" in err


# --------------------------------------------------------------------------------------------------------
# Malformed input


BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
    f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
    for i in range(8)
)
MALFORMED = [
    ("deep-nesting", "[" * 5000 + "]" * 5000, "nest"),  # libyaml: "maximum nesting depth"; PyYAML: "nested too deeply"
    ("deep-mapping", "apiVersion: v1\nkind: Pod\nspec: " + "{a: " * 80 + "1" + "}" * 80 + "\n", "nested more than"),
    (
        "alias-bomb",
        "apiVersion: v1\nkind: ConfigMap\ndata:\n" + "".join("  " + line + "\n" for line in BOMB.splitlines()),
        "expands to more than",
    ),
    (
        "metadata-not-a-mapping",
        "apiVersion: v1\nkind: Pod\nmetadata: [1, 2]\n",
        "metadata is a list; it must be a mapping",
    ),
    ("metadata-a-string", "apiVersion: v1\nkind: Pod\nmetadata: x\n", "metadata is a string"),
    ("kind-not-a-string", "apiVersion: v1\nkind: 5\n", "kind is 5 (a int); it must be a string"),
    ("kind-a-list", "apiVersion: v1\nkind: [Pod]\n", "kind is ['Pod'] (a list)"),
    ("api-version-a-mapping", "apiVersion: {v: 1}\nkind: Pod\n", "apiVersion is {'v': 1} (a mapping)"),
    ("name-not-a-string", "apiVersion: v1\nkind: Pod\nmetadata: {name: 7}\n", "metadata.name is 7"),
    ("namespace-a-list", "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: [a]}\n", "metadata.namespace is"),
    (
        "label-value-a-number",
        "apiVersion: jobset.x-k8s.io/v1alpha2\nkind: JobSet\n"
        "metadata: {name: j, labels: {kueue.x-k8s.io/queue-name: 5}}\n",
        "metadata.labels['kueue.x-k8s.io/queue-name'] is 5 (a int)",
    ),
    ("labels-a-list", "apiVersion: v1\nkind: Pod\nmetadata: {name: p, labels: [a]}\n", "metadata.labels is a list"),
    (
        "annotation-value-null",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, annotations: {a: null}}\n",
        "is None (null)",
    ),
    (
        "owner-references-a-mapping",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, ownerReferences: {a: 1}}\n",
        "ownerReferences",
    ),
    ("list-item-not-an-object", "apiVersion: v1\nkind: List\nitems: [3]\n", "items[0]: not a Kubernetes object"),
    (
        "list-item-bad-metadata",
        "apiVersion: v1\nkind: List\nitems: [{apiVersion: v1, kind: Pod, metadata: 3}]\n",
        "items[0]: metadata",
    ),
    ("a-scalar", "just text\n", "not a Kubernetes object"),
    ("a-python-tag", "!!python/object/apply:os.system [echo hi]\n", "not valid YAML"),
    (
        "replicated-jobs-a-string",
        "apiVersion: jobset.x-k8s.io/v1alpha2\nkind: JobSet\nmetadata: {name: j}\nspec: {replicatedJobs: x}\n",
        None,
    ),
    (
        "containers-a-mapping",
        "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec: {template: {spec: {containers: {a: 1}}}}\n",
        None,
    ),
    (
        "node-selector-a-list",
        "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\n"
        "spec: {template: {spec: {nodeSelector: [a], containers: []}}}\n",
        None,
    ),
    (
        "resources-limits-a-list",
        "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\n"
        "spec: {template: {spec: {containers: [{name: c, resources: {limits: [1]}}]}}}\n",
        None,
    ),
    ("empty-file", "", "no Kubernetes object to check"),
    ("only-comments", "# nothing\n---\n", "no Kubernetes object to check"),
]


@pytest.mark.parametrize(("content", "message"), [pytest.param(c, m, id=i) for i, c, m in MALFORMED])
def test_malformed_input_exits_2_naming_the_file(
    content: str, message: str | None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    code, out = run([str(path)])
    err = capsys.readouterr().err
    if message is None:  # shapes the rules read defensively: checked, or refused with the file named
        assert code in (0, 1, 2) and "Traceback" not in err
        assert code != 2 or str(path) in err
        return
    assert (code, out) == (check.EXIT_INVALID, ""), out
    assert err.startswith(f"error: {path}") and message in err, err


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"all": 5}, "all: level 5 is not one of mandatory, advisory, disabled"),
        ({"kueue-require-v1beta2": 5}, "kueue-require-v1beta2: 5 is neither a level"),
        ({"kueue-require-v1beta2": ["advisory"]}, "is neither a level"),
        ({"kueue-require-v1beta2": {"enforcementLevel": []}}, "enforcementLevel: level [] is not one of"),
        (
            {"tpu-workload-queue-declared": {"externalLocalQueues": "team-a/x"}},
            "externalLocalQueues: is 'team-a/x', expected array",
        ),
        (
            {"tpu-workload-queue-declared": {"externalLocalQueues": [1]}},
            "externalLocalQueues: [0] is 1, expected string",
        ),
        ({"tpu-workload-queue-declared": {"nope": 1}}, "nope: unknown setting"),
        ([1, 2], "must be a JSON object, not list"),
    ],
)
def test_wrongly_typed_config_exits_2(
    config: Any, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "c.json"
    path.write_text(json.dumps(config))
    good = write(tmp_path, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}})
    err = refused(capsys, [good], "--config", str(path))
    assert str(path) in err and message in err, err


def test_nothing_to_check_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "README.md").write_text("# not a manifest")
    assert "a directory with no .json, .yaml or .yml file: nothing to check" in refused(capsys, [str(tmp_path)])
    assert "no Kubernetes object to check" in refused(capsys, ["-"], stdin="")


def test_a_directory_is_read_as_kubectl_reads_it(tmp_path: Path) -> None:
    """JSON files too, and the extension in any case."""
    bad = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue", "metadata": {"name": "q", "namespace": "n"}}
    (tmp_path / "queue.JSON").write_text(json.dumps(bad))
    (tmp_path / "other.YAML").write_text(yaml.safe_dump({**bad, "metadata": {"name": "r", "namespace": "n"}}))
    code, out = run([str(tmp_path)])
    assert code == 1
    assert "queue.JSON): kueue-require-v1beta2" in out and "other.YAML): kueue-require-v1beta2" in out


def test_a_file_above_the_size_bound_is_refused_unread(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(inputs, "MAX_BYTES", 1024)
    path = tmp_path / "big.yaml"
    path.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata:\n" + "  k: v\n" * 1000)
    assert "larger than" in refused(capsys, [str(path)])
    assert "larger than" in refused(capsys, ["-"], stdin=path.read_text())


def test_binary_stdin_under_a_strict_utf8_locale_exits_2() -> None:
    env = {**os.environ, "LC_ALL": "C.UTF-8", "PYTHONIOENCODING": "utf-8:strict"}
    proc = subprocess.run(
        [sys.executable, "-m", "gke_tpu_priority.policies.check", "-"],
        input=b"apiVersion: v1\nkind: \xff\xfe\x00\x01\n",
        capture_output=True,
        cwd=PROJECT_ROOT,
        env=env,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.decode().startswith("error: <stdin>: not UTF-8 text") and b"Traceback" not in proc.stderr


def test_stdin_text_stream_is_still_accepted() -> None:
    out = io.StringIO()
    code = check.main(["-"], stdin=io.StringIO("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"), stdout=out)
    assert code == 0 and out.getvalue() == "No violations; 1 object(s) checked.\n"


def test_without_libyaml_deep_nesting_is_refused_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """PyYAML's pure-Python composer recurses: its RecursionError becomes the same exit 2."""
    monkeypatch.setattr(inputs, "SAFE_LOADER", yaml.SafeLoader)
    path = tmp_path / "deep.yaml"
    path.write_text("[" * 5000 + "]" * 5000)
    assert "nested too deeply to read" in refused(capsys, [str(path)])
