"""``gke-tpu-priority-check``'s flags as kubectl users spell them (-o, -n, -f, --version) and its CI reports:
GitHub Actions annotations on the offending file and line, and a SARIF 2.1.0 log."""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from gke_tpu_priority.policies import check
from gke_tpu_priority.policies.ci_formats import Location, render_github
from gke_tpu_priority.policies.rules import OBJECT_RULES, PICTURE_RULES
from gke_tpu_priority.policies.rules.base import manifest_object
from gke_tpu_priority.policies.selector import SelectorError, parse_selector
from tests.policies.test_check_cli import build_dir, manifests, run, team_jobset, write

__all__ = ["build_dir"]  # the module-scoped fixture, shared with the CLI tests

# The part of the SARIF 2.1.0 schema (OASIS, sarif-schema-2.1.0.json) a log of this tool exercises: required
# properties, the level enumeration and the location shape, with the schema's own names and constraints.
SARIF_SUBSET: dict[str, Any] = {
    "type": "object",
    "required": ["version", "runs"],
    "properties": {
        "$schema": {"type": "string", "format": "uri"},
        "version": {"enum": ["2.1.0"]},
        "runs": {"type": "array", "items": {"$ref": "#/definitions/run"}},
    },
    "definitions": {
        "run": {
            "type": "object",
            "required": ["tool"],
            "properties": {
                "tool": {
                    "type": "object",
                    "required": ["driver"],
                    "properties": {"driver": {"$ref": "#/definitions/toolComponent"}},
                },
                "results": {"type": "array", "items": {"$ref": "#/definitions/result"}},
            },
        },
        "toolComponent": {
            "type": "object",
            "required": ["name"],
            "properties": {
                "name": {"type": "string"},
                "version": {"type": "string"},
                "rules": {"type": "array", "items": {"$ref": "#/definitions/reportingDescriptor"}},
            },
        },
        "reportingDescriptor": {
            "type": "object",
            "required": ["id"],
            "properties": {
                "id": {"type": "string"},
                "shortDescription": {"$ref": "#/definitions/message"},
                "defaultConfiguration": {
                    "type": "object",
                    "properties": {"level": {"$ref": "#/definitions/level"}},
                },
            },
        },
        "level": {"enum": ["none", "note", "warning", "error"]},
        "message": {"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}},
        "result": {
            "type": "object",
            "required": ["message"],
            "properties": {
                "ruleId": {"type": "string"},
                "ruleIndex": {"type": "integer", "minimum": -1},
                "level": {"$ref": "#/definitions/level"},
                "message": {"$ref": "#/definitions/message"},
                "locations": {"type": "array", "items": {"$ref": "#/definitions/location"}},
            },
        },
        "location": {
            "type": "object",
            "properties": {
                "physicalLocation": {
                    "type": "object",
                    "required": ["artifactLocation"],
                    "properties": {
                        "artifactLocation": {
                            "type": "object",
                            "required": ["uri"],
                            "properties": {"uri": {"type": "string"}},
                        },
                        "region": {
                            "type": "object",
                            "properties": {"startLine": {"type": "integer", "minimum": 1}},
                        },
                    },
                }
            },
        },
    },
}


def unqueued_jobset_file(tmp_path: Path) -> tuple[str, int, dict[str, Any]]:
    """A file whose second document is a JobSet without its queue label; (path, its first line, the JobSet)."""
    jobset = team_jobset("dev")
    jobset["metadata"]["labels"].pop("kueue.x-k8s.io/queue-name")
    leading = "# a team's workloads\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: x}\n---\n"
    path = tmp_path / "workloads.yaml"
    path.write_text(leading + yaml.safe_dump(jobset))
    return str(path), leading.count("\n") + 1, jobset


def test_output_yaml_and_json_carry_one_report_and_format_is_a_deprecated_alias(
    build_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    platform, (team, _, _) = str(manifests("dev", build_dir)), unqueued_jobset_file(tmp_path)
    code, out = run([team], "--platform", platform, "-o", "json")
    assert code == 1
    document = json.loads(out)
    assert [v["rule"] for v in document["violations"]] == ["tpu-workload-require-queue-name"]
    assert run([team], "--platform", platform, "--output", "yaml") == (1, yaml.safe_dump(document, sort_keys=False))
    assert capsys.readouterr().err == ""
    assert run([team], "--platform", platform, "--format", "json") == (1, out)
    assert capsys.readouterr().err.strip() == "note: --format is deprecated; use -o/--output"
    with pytest.raises(SystemExit) as exit_info:
        run([team], "--platform", platform, "-o", "junit")
    assert exit_info.value.code == 2
    assert "argument -o/--output: invalid choice: 'junit'" in capsys.readouterr().err


def test_short_flags_mean_what_kubectl_means(
    build_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    jobset = team_jobset("dev")
    namespace = jobset["metadata"].pop("namespace")
    platform, team = str(manifests("dev", build_dir)), write(tmp_path, jobset)
    assert run([team], "--platform", platform, "--namespace", namespace)[0] == 0
    assert run([platform], "-n", namespace, "-f", team)[0] == 0
    assert run([platform], "-f", team)[0] == 1  # namespace "default" declares no queue
    with pytest.raises(SystemExit) as exit_info:
        run([])
    assert exit_info.value.code == 2
    assert "give the files to check: PATH... or -f PATH" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        run([], "--version")
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"gke-tpu-priority-check {importlib.metadata.version('gke-tpu-priority')}"


def test_github_annotations_point_at_the_file_and_line_of_the_object(build_dir: Path, tmp_path: Path) -> None:
    team, line, jobset = unqueued_jobset_file(tmp_path)
    code, out = run([team], "--platform", str(manifests("dev", build_dir)), "-o", "github")
    assert code == 1
    annotation, summary = out.strip().splitlines()
    ref = f"JobSet {jobset['metadata']['namespace']}/llm"
    assert annotation.startswith(f"::error file={team},line={line},title=tpu-workload-require-queue-name::{ref}: ")
    assert "set it to a LocalQueue" in annotation
    assert summary.startswith("1 violation(s) (1 blocking) on 1 object(s);")


def test_github_annotation_values_are_escaped_and_stdin_names_no_file() -> None:
    obj = manifest_object({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "a"}}, "x")
    report = check.Report("rule,one", "advisory", "50% of\nthe pods", obj)
    picture = check.Report("rule-two", "mandatory", "no tier", None)
    where = {id(obj): Location("dir/a:b.yaml", 7)}
    text = render_github([report, picture], lambda s: None if s is None else where[id(s)], "done")
    assert text.splitlines() == [
        "::warning file=dir/a%3Ab.yaml,line=7,title=rule%2Cone::Pod a/p: 50%25 of%0Athe pods",
        "::error title=rule-two::no tier",
        "done",
    ]
    on_stdin = render_github([report], lambda _: Location(None, 3), "done")
    assert on_stdin.splitlines()[0] == "::warning title=rule%2Cone::Pod a/p: 50%25 of%0Athe pods"


def test_sarif_log_has_the_shape_of_sarif_2_1_0_and_locates_each_result(build_dir: Path, tmp_path: Path) -> None:
    team, line, _ = unqueued_jobset_file(tmp_path)
    code, out = run([team], "--platform", str(manifests("dev", build_dir)), "-o", "sarif")
    assert code == 1
    log = json.loads(out)
    jsonschema.Draft7Validator(SARIF_SUBSET).validate(log)
    (run_,) = log["runs"]
    driver = run_["tool"]["driver"]
    assert driver["name"] == "gke-tpu-priority-check"
    assert driver["version"] == importlib.metadata.version("gke-tpu-priority")
    assert [r["id"] for r in driver["rules"]] == [r.name for r in (*OBJECT_RULES, *PICTURE_RULES)]
    (result,) = run_["results"]
    assert (result["ruleId"], result["level"]) == ("tpu-workload-require-queue-name", "error")
    assert driver["rules"][result["ruleIndex"]]["id"] == result["ruleId"]
    (location,) = result["locations"]
    assert location["physicalLocation"] == {"artifactLocation": {"uri": team}, "region": {"startLine": line}}
    clean = team_jobset("dev")
    code, out = run([write(tmp_path, clean)], "--platform", str(manifests("dev", build_dir)), "-o", "sarif")
    assert code == 0 and json.loads(out)["runs"][0]["results"] == []


@pytest.mark.parametrize(
    ("selector", "labels", "matches"),
    [
        ("team=a", {"team": "a"}, True),
        ("team==a", {"team": "b"}, False),
        ("team!=a", {}, True),  # as Kubernetes: a missing key is not equal
        ("team", {"team": ""}, True),
        ("!team", {"team": "a"}, False),
        ("team in (a, b),tier notin (x)", {"team": "b"}, True),
        ("team in (a,b),tier notin (x)", {"team": "b", "tier": "x"}, False),
        ("app.kubernetes.io/name=llm,team=a", {"app.kubernetes.io/name": "llm", "team": "a"}, True),
    ],
)
def test_a_label_selector_reads_as_kubectl_reads_it(selector: str, labels: dict[str, str], matches: bool) -> None:
    assert parse_selector(selector)(labels) is matches


@pytest.mark.parametrize("selector", ["", "team=a,", "team in a,b", "=a", "team=a b"])
def test_a_malformed_selector_is_refused(selector: str) -> None:
    with pytest.raises(SelectorError):
        parse_selector(selector)


def test_selector_picks_the_objects_checked(
    build_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    platform = str(manifests("dev", build_dir))
    broken = team_jobset("dev")
    broken["metadata"]["labels"].pop("kueue.x-k8s.io/queue-name")
    broken["metadata"]["labels"]["team"] = "b"
    team = tmp_path / "both.yaml"
    good = team_jobset("dev")
    good["metadata"]["name"] = "good"
    team.write_text(yaml.safe_dump_all([good, broken]))
    assert run([str(team)], "--platform", platform)[0] == 1
    assert run([str(team)], "--platform", platform, "-l", "team!=b")[0] == 0
    code, out = run([str(team)], "--platform", platform, "--selector", "team=b", "-o", "json")
    assert code == 1 and [v["object"]["name"] for v in json.loads(out)["violations"]] == ["llm"]
    assert run([str(team)], "--platform", platform, "-l", "team=c")[0] == 2
    assert "no object matches the selector 'team=c'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        run([str(team)], "-l", "team in a")
    assert exit_info.value.code == 2
    assert "-l/--selector: 'team in a' is not a requirement" in capsys.readouterr().err
