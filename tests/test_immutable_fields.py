"""Immutable fields become replacements: every emitted kind is mapped, and the map matches the pinned sources.

The API server refuses an in-place change to an immutable field ("field is immutable"), and pulumi-kubernetes has
no replacement rule for PriorityClass or any custom resource; the package's map (components/kube/immutable.py)
must cover every kind it emits and every rule the pinned Kueue/JobSet CRDs and webhooks enforce.
"""

from __future__ import annotations

import functools
import re
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gke_tpu_priority.components.config import parse_platform_config
from gke_tpu_priority.components.kube.immutable import CHART_KINDS, IMMUTABLE, NOT_RENDERED, immutable_paths, type_token
from gke_tpu_priority.components.kueue import jobset_values, kueue_values
from gke_tpu_priority.components.workloads import tpu_jobset
from testkit.mock_runtime import load_stack_config, run_program
from testkit.platform import platform, stack_config
from testkit.resources import RegisteredResource
from testkit.stacks import ALL_STACKS, stack_run
from tests.support.upstream_data import (
    JOBSET,
    JOBSET_CHART,
    KUEUE,
    KUEUE_CHART,
    lock,
    reference_file,
    reference_files,
    reference_text,
)
from tests.test_workloads import spec as jobset_spec
from tools.manifests import is_kubernetes_object, object_from_resource


def emitted() -> Iterator[RegisteredResource]:
    for stack in ALL_STACKS:
        yield from (r for r in stack_run(stack).resources if is_kubernetes_object(r))


# --- every emitted kind is mapped, and its objects replace on exactly those fields ------------------------


def test_every_emitted_kind_is_in_the_immutable_field_map() -> None:
    kinds = {r.type for r in emitted()}
    jobset = tpu_jobset(jobset_spec())
    kinds.add(type_token(jobset["apiVersion"], jobset["kind"]))
    assert kinds, "no Kubernetes object emitted"
    assert kinds - set(IMMUTABLE) == set()


def test_every_emitted_object_replaces_deleting_first_on_its_immutable_fields() -> None:
    checked = 0
    for res in emitted():
        paths = immutable_paths(object_from_resource(res))
        assert sorted(res.options["replace_on_changes"]) == sorted(paths), res.name
        if paths:
            checked += 1
            # Fixed names: the replacement must delete the old object before creating the new one.
            assert res.options["delete_before_replace"] is True, res.name
    assert checked


def test_switching_the_hotswap_mode_replaces_every_tier_priority_class() -> None:
    # `hotswap.mode` flips every tier's preemptionPolicy, which the API server refuses to update in place.
    for stack in ("dev", "prod"):
        classes = [r for r in stack_run(stack).resources if r.type == "kubernetes:scheduling.k8s.io/v1:PriorityClass"]
        assert len(classes) >= 3
        for pc in classes:
            assert {"value", "preemptionPolicy"} <= set(pc.options["replace_on_changes"]), pc.name
            assert pc.options["delete_before_replace"] is True


def test_a_local_queue_moved_to_another_cluster_queue_is_replaced() -> None:
    queues = [r for r in stack_run("prod").resources if r.type == "kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue"]
    assert queues
    for lq in queues:
        assert lq.options["replace_on_changes"] == ["spec.clusterQueue"]
        assert lq.options["delete_before_replace"] is True


def test_a_tpu_jobset_component_replaces_on_its_replicated_jobs(tmp_path: Path) -> None:
    (tmp_path / "__main__.py").write_text(
        textwrap.dedent(
            """
            from gke_tpu_priority.components.workloads import TpuJobSet
            from tests.test_workloads import spec

            TpuJobSet("train", {"jobset": spec().model_dump(by_alias=True, exclude_none=True)})
            """
        )
    )
    run = run_program("jobset-component", stack_config(platform()), root=tmp_path)
    (jobset,) = [r for r in run.resources if r.type == "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"]
    # A running JobSet's replicated jobs and queue cannot change in place: a new spec means a new JobSet.
    assert "spec.replicatedJobs" in jobset.options["replace_on_changes"]
    assert 'metadata.labels["kueue.x-k8s.io/queue-name"]' in jobset.options["replace_on_changes"]
    assert jobset.options["delete_before_replace"] is True


def test_resource_flavor_fields_are_immutable_only_with_a_topology() -> None:
    flavor = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "f"}}
    assert immutable_paths({**flavor, "spec": {"nodeLabels": {"a": "b"}}}) == []
    with_topology = {**flavor, "spec": {"nodeLabels": {"a": "b"}, "topologyName": "tpu"}}
    assert immutable_paths(with_topology) == ["spec.nodeLabels", "spec.tolerations", "spec.topologyName"]


def test_an_unmapped_kind_is_refused_by_name() -> None:
    with pytest.raises(KeyError, match=r"kubernetes:batch/v1:Job: not in components.kube.immutable.IMMUTABLE"):
        immutable_paths({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}})


# --- the map matches the pinned CRDs' CEL rules ------------------------------------------------------------

EMITTED_CRD_VERSIONS = {"kueue.x-k8s.io": "v1beta2", "jobset.x-k8s.io": "v1alpha2"}


def _old_self_rules(schema: dict[str, Any], path: tuple[str, ...] = ()) -> Iterator[tuple[str, str, str]]:
    """(path, rule, message) of every CEL rule that reads oldSelf; array items add no path segment."""
    for rule in schema.get("x-kubernetes-validations") or []:
        if "oldSelf" in rule["rule"]:
            yield ".".join(path), rule["rule"], rule.get("message", "")
    for name, sub in (schema.get("properties") or {}).items():
        yield from _old_self_rules(sub, (*path, name))
    if isinstance(schema.get("items"), dict):
        yield from _old_self_rules(schema["items"], path)


@functools.cache
def _crd_rules() -> dict[str, list[tuple[str, str, str]]]:
    out: dict[str, list[tuple[str, str, str]]] = {}
    for directory in ("crds/kueue", "crds/jobset"):
        for entry in _locked(directory):
            crd = yaml.safe_load(reference_file(entry).read_text(encoding="utf-8"))
            group = crd["spec"]["group"]
            (version,) = [v for v in crd["spec"]["versions"] if v["name"] == EMITTED_CRD_VERSIONS[group]]
            token = type_token(f"{group}/{version['name']}", crd["spec"]["names"]["kind"])
            out[token] = list(_old_self_rules(version["schema"]["openAPIV3Schema"]))
    return out


def _locked(directory: str) -> list[str]:
    return [e.path for e in lock().under(directory)]


def _covered(path: str, listed: tuple[str, ...]) -> bool:
    return any(path == p or path.startswith(p + ".") for p in listed)


def test_every_unconditional_crd_immutability_rule_is_a_replacement() -> None:
    rules = _crd_rules()
    checked = 0
    for token, entry in IMMUTABLE.items():
        for path, rule, _ in rules.get(token, []):
            if rule.strip() == "self == oldSelf":
                assert _covered(path, entry.paths), f"{token}: {path} is immutable in the CRD"
                checked += 1
    assert checked >= 7  # LocalQueue, AdmissionCheck and JobSet's five


def test_every_conditional_crd_rule_of_an_emitted_kind_is_accounted_for() -> None:
    # Rules that read oldSelf under a condition: ResourceFlavor's, while a topology is set. A new one in a
    # chart upgrade fails here until the map says what it means for the package.
    for token, entry in IMMUTABLE.items():
        for path, rule, message in _crd_rules().get(token, []):
            if rule.strip() == "self == oldSelf":
                continue
            assert message.endswith("when topologyName is set"), (token, path, message)
            assert f"{path}.{message.split()[0]}" in entry.when_topology, (token, message)


def test_the_crd_rules_read_are_the_ones_expected() -> None:
    # Guards the walk itself: LocalQueue's clusterQueue rule is found where the API reports it.
    assert ("spec.clusterQueue", "self == oldSelf", "field is immutable") in _crd_rules()[
        "kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue"
    ]


# --- the map matches the pinned webhooks' update validation ------------------------------------------------


def _immutable_calls(text: str) -> Iterator[str]:
    """The argument text of every `ValidateImmutableField(...)` call (balanced parentheses, any line breaks)."""
    for match in re.finditer(r"ValidateImmutableField\(", text):
        depth, end = 1, match.end()
        while depth:
            depth += {"(": 1, ")": -1}.get(text[end], 0)
            end += 1
        yield text[match.end() : end - 1]


def _go_path(call: str) -> str:
    """`field.NewPath("spec", "a")` / `field.NewPath("spec").Child("b")` as a dotted path."""
    parts: list[str] = []
    for args in re.findall(r"(?:NewPath|Child)\(([^()]*)\)", call):
        parts.extend(re.findall(r'"([^"]+)"', args))
    return ".".join(parts)


@pytest.mark.parametrize(
    ("source", "token", "expected"),
    [
        (
            f"{KUEUE}/pkg/webhooks/clusterqueue_webhook.go",
            "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue",
            {"spec.concurrentAdmissionPolicy"},
        ),
        (
            f"{JOBSET}/pkg/webhooks/jobset_webhook.go",
            "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet",
            {"spec.replicatedJobs", "spec.managedBy"},
        ),
        (f"{KUEUE}/pkg/webhooks/resourceflavor_webhook.go", "kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor", set()),
        (f"{KUEUE}/pkg/webhooks/cohort_webhook.go", "kubernetes:kueue.x-k8s.io/v1beta2:Cohort", set()),
    ],
)
def test_every_webhook_immutable_field_is_a_replacement(source: str, token: str, expected: set[str]) -> None:
    text = reference_text(source)
    found = {_go_path(m) for m in _immutable_calls(text) if "NewPath" in m}
    assert found == expected  # a webhook that gains an immutable field fails here first
    assert expected <= set(IMMUTABLE[token].paths)


def test_kueue_refuses_a_running_jobsets_queue_change() -> None:
    text = reference_text(f"{KUEUE}/pkg/controller/jobframework/validation.go")
    assert "ValidateImmutableField(QueueName(newJob), QueueName(oldJob), queueNameLabelPath)" in text
    assert (
        'metadata.labels["kueue.x-k8s.io/queue-name"]' in IMMUTABLE["kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"].paths
    )


# --- the charts' own objects: every kind their templates can render is accounted for ----------------------

# The Kueue value that keeps each not-rendered template off (JobSet's cert-manager and Prometheus switches are
# checked separately); the package must not turn any of them on.
OFF_SWITCHES = {
    "FlowSchema": "enableVisibilityAPF",
    "PriorityLevelConfiguration": "enableVisibilityAPF",
    "MutatingAdmissionPolicy": "enableMutatingAdmissionPolicy",
    "MutatingAdmissionPolicyBinding": "enableMutatingAdmissionPolicy",
    "Certificate": "enableCertManager",
    "Issuer": "enableCertManager",
    "ServiceMonitor": "enablePrometheus",
    "Ingress": "enableKueueViz",
}


def _template_kinds() -> set[str]:
    kinds: set[str] = set()
    for chart in (KUEUE_CHART, JOBSET_CHART):
        for path in reference_files(f"{chart}/templates"):
            kinds.update(re.findall(r"^kind:\s*['\"]?([A-Za-z]+)", path.read_text(encoding="utf-8"), re.M))
    return kinds


def test_every_kind_the_pinned_charts_can_render_is_accounted_for() -> None:
    assert _template_kinds() == set(CHART_KINDS)


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_chart_features_counted_as_not_rendered_stay_off(stack: str) -> None:
    config = parse_platform_config(load_stack_config(stack)["gke-tpu-priority:platform"])
    kueue_defaults = yaml.safe_load(reference_text(f"{KUEUE_CHART}/values.yaml"))
    jobset_defaults = yaml.safe_load(reference_text(f"{JOBSET_CHART}/values.yaml"))
    kueue, jobset = kueue_values(config), jobset_values(config)
    for kind, switch in OFF_SWITCHES.items():
        assert CHART_KINDS[kind].startswith(NOT_RENDERED), kind
        assert not kueue.get(switch, kueue_defaults[switch]), (kind, switch)
    assert not jobset.get("prometheus", {}).get("enable", jobset_defaults["prometheus"]["enable"])
    assert not jobset.get("certManager", {}).get("enable", jobset_defaults["certManager"]["enable"])
    assert {k for k, why in CHART_KINDS.items() if why.startswith(NOT_RENDERED)} == set(OFF_SWITCHES)
