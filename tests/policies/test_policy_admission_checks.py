"""Admission-check rules (MultiKueue, queued provisioning) on the ladder and fleet stacks' objects, and mutations."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from gke_tpu_priority.policies import check
from gke_tpu_priority.policies.rules.base import KubeObject
from tools import preview

Mutation = Callable[[list[dict[str, Any]]], None]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    out = tmp_path_factory.mktemp("build")
    docs: dict[str, list[dict[str, Any]]] = {}
    for stack in ("ladder", "fleet"):
        assert preview.main(["--stack", stack, "--build-dir", str(out)]) == 0
        docs[stack] = [d for d in yaml.safe_load_all(Path(out / stack / "manifests.yaml").read_text()) if d]
    return docs


def _reports(docs: list[dict[str, Any]]) -> list[check.Report]:
    objects = [KubeObject(d["apiVersion"], d["kind"], d, "test") for d in docs]
    return [r for r in check.check_objects(objects) if r.rule.startswith("kueue-v1beta2-")]


def _one(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    return next(d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name))


def _queued_cq(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return next(d for d in docs if d["kind"] == "ClusterQueue" and "admissionChecksStrategy" in d["spec"])


def test_the_ladder_and_fleet_stacks_pass(rendered: dict[str, list[dict[str, Any]]]) -> None:
    for stack, docs in rendered.items():
        assert _reports(docs) == [], stack
    # The rules have something to look at: the ladder's check is scoped to its queued flavors.
    on = _queued_cq(rendered["ladder"])["spec"]["admissionChecksStrategy"]["admissionChecks"][0]["onFlavors"]
    assert on and all(f.endswith("-flex-start-queued") for f in on)


def _drop_check(docs: list[dict[str, Any]]) -> None:
    del _queued_cq(docs)["spec"]["admissionChecksStrategy"]


def _check_on_spot(docs: list[dict[str, Any]]) -> None:
    _queued_cq(docs)["spec"]["admissionChecksStrategy"]["admissionChecks"][0]["onFlavors"].append("v6e-4x4-spot")


def _check_on_missing_flavor(docs: list[dict[str, Any]]) -> None:
    _queued_cq(docs)["spec"]["admissionChecksStrategy"]["admissionChecks"][0]["onFlavors"].append("v6e-8x8-nothing")


def _missing_check(docs: list[dict[str, Any]]) -> None:
    _queued_cq(docs)["spec"]["admissionChecksStrategy"]["admissionChecks"][0]["name"] = "typo"


def _long_run(docs: list[dict[str, Any]]) -> None:
    _one(docs, "ProvisioningRequestConfig")["spec"]["parameters"] = {"maxRunDurationSeconds": "700000"}


def _wrong_kind(docs: list[dict[str, Any]]) -> None:
    _one(docs, "AdmissionCheck")["spec"]["parameters"]["kind"] = "MultiKueueConfig"


def _missing_config(docs: list[dict[str, Any]]) -> None:
    docs.remove(_one(docs, "ProvisioningRequestConfig"))


@pytest.mark.parametrize(
    ("mutate", "rule", "fragment"),
    [
        (
            _drop_check,
            "kueue-v1beta2-queued-flavor-provisioning-check",
            "but no kueue.x-k8s.io/provisioning-request admission check",
        ),
        (
            _check_on_spot,
            "kueue-v1beta2-queued-flavor-provisioning-check",
            "to flavor 'v6e-4x4-spot', which is not a queued",
        ),
        (
            _check_on_missing_flavor,
            "kueue-v1beta2-admission-check-references-exist",
            "onFlavors 'v6e-8x8-nothing', which is not a flavor",
        ),
        (_missing_check, "kueue-v1beta2-admission-check-references-exist", "uses admission check 'typo'"),
        (_long_run, "kueue-v1beta2-provisioning-max-run-duration", "is '700000', beyond GKE's 604800 s"),
        (_wrong_kind, "kueue-v1beta2-admissioncheck-parameters-kind", "kind: ProvisioningRequestConfig"),
        (_missing_config, "kueue-v1beta2-admission-check-references-exist", "which this stack does not declare"),
    ],
)
def test_ladder_mistakes_are_caught(
    rendered: dict[str, list[dict[str, Any]]], mutate: Mutation, rule: str, fragment: str
) -> None:
    docs = copy.deepcopy(rendered["ladder"])
    mutate(docs)
    found = [r for r in _reports(docs) if r.rule == rule]
    assert found and any(fragment in r.message for r in found), [r.message for r in _reports(docs)]


def test_fleet_mistakes_are_caught(rendered: dict[str, list[dict[str, Any]]]) -> None:
    docs = copy.deepcopy(rendered["fleet"])
    _one(docs, "MultiKueueConfig")["spec"]["clusters"].append("west9")
    ac = _one(docs, "AdmissionCheck")
    ac["spec"]["parameters"]["kind"] = "ProvisioningRequestConfig"
    messages = [r.message for r in _reports(docs)]
    assert any("lists cluster 'west9'" in m for m in messages), messages
    assert any("controllerName kueue.x-k8s.io/multikueue" in m and "kind: MultiKueueConfig" in m for m in messages)


def test_a_manager_queue_needs_no_provisioning_check(rendered: dict[str, list[dict[str, Any]]]) -> None:
    """A MultiKueue manager ClusterQueue on a queued flavor is exempt: its workers' queues carry the check."""
    docs = copy.deepcopy(rendered["ladder"])
    cq = _queued_cq(docs)
    cq["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": "multikueue"}]}
    docs.append(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "AdmissionCheck",
            "metadata": {"name": "multikueue"},
            "spec": {
                "controllerName": "kueue.x-k8s.io/multikueue",
                "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "multikueue"},
            },
        }
    )
    docs.append(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "MultiKueueConfig",
            "metadata": {"name": "multikueue"},
            "spec": {"clusters": []},
        }
    )
    assert [r for r in _reports(docs) if r.rule == "kueue-v1beta2-queued-flavor-provisioning-check"] == []
