"""Every Kubernetes object of every stack, and what the pinned charts render for its values, judged by the real
API server: server-side apply with strict field validation, nothing refused, nothing dropped, and the admission
policies free of type-checking warnings."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from e2e import report
from e2e.apply import ApplyOutcome, apply_all, delete_all
from e2e.charts import chart_objects
from e2e.conftest import Controllers, Target, served_locally
from gke_tpu_priority.components.config import parse_platform_config
from gke_tpu_priority.policies.rules.base import CLUSTER_ANNOTATION
from testkit.mock_runtime import load_stack_config
from testkit.resources import ProgramRun
from testkit.stacks import FLEET_STACKS, STACKS, stack_run
from tools.fleet_preview import fleet_objects
from tools.manifests import kubernetes_objects

JsonObj = dict[str, Any]


def _objects_by_cluster(stack: str) -> dict[str, list[JsonObj]]:
    """One list per cluster the stack deploys to: the single cluster of a platform stack, or each fleet member."""
    run: ProgramRun = stack_run(stack)
    if stack not in FLEET_STACKS:
        return {stack: kubernetes_objects(run.resources)}
    groups: dict[str, list[JsonObj]] = {}
    for obj in fleet_objects(run, stack):
        annotations = obj["metadata"]["annotations"]
        cluster = annotations.pop(CLUSTER_ANNOTATION)
        if not annotations:
            obj["metadata"].pop("annotations")
        groups.setdefault(f"{stack}/{cluster}", []).append(obj)
    return groups


def _type_checking_warnings(target: Target, policy: str) -> list[str]:
    """The API server type-checks a policy's CEL against the schemas it matches, asynchronously; wait for it."""
    deadline = time.monotonic() + 30
    while True:
        obj = target.kubectl.json("get", "validatingadmissionpolicy", policy)
        status = obj.get("status", {})
        if status.get("observedGeneration") == obj["metadata"]["generation"] or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert status.get("observedGeneration") == obj["metadata"]["generation"], f"{policy} was never type-checked"
    return [
        f"{policy}: {w['fieldRef']}: {w['warning']}"
        for w in status.get("typeChecking", {}).get("expressionWarnings", [])
    ]


def _summary(outcomes: list[ApplyOutcome]) -> JsonObj:
    return {
        "applied": sum(o.accepted for o in outcomes),
        "refused": [o.as_json() for o in outcomes if not o.accepted],
        "dropped": [o.as_json() for o in outcomes if o.dropped],
        "warnings": [w for o in outcomes for w in o.warnings],
    }


@pytest.fixture
def applied(target: Target, controllers: Controllers) -> Iterator[list[JsonObj]]:
    """The objects the test applies, deleted afterwards (all but the controllers' own install) so the next stack
    starts from a cluster holding only Kueue and JobSet. With the controllers running, Kueue's and JobSet's
    webhooks judge every object too, and Kueue's finalizers must let the queues go."""
    objects: list[JsonObj] = []
    yield objects
    left = delete_all(target.rest, [o for o in objects if not controllers.owns(o)])
    assert not left, left


def _stack_ids() -> list[str]:
    return [*STACKS, *FLEET_STACKS]


@pytest.mark.parametrize("stack", _stack_ids())
def test_every_object_of_the_stack_is_accepted_unchanged(
    stack: str, target: Target, controllers: Controllers, applied: list[JsonObj]
) -> None:
    section = report.section("stacks")
    for cluster, every in _objects_by_cluster(stack).items():
        objects = [o for o in every if served_locally(target, o)]
        skipped = [
            f"{o['kind']} {o['metadata'].get('namespace', '')}/{o['metadata']['name']}"
            for o in every
            if o not in objects
        ]
        applied[:] = objects
        outcomes = apply_all(target.rest, objects)
        policies = [o["metadata"]["name"] for o in objects if o["kind"] == "ValidatingAdmissionPolicy"]
        type_warnings = [w for p in policies for w in _type_checking_warnings(target, p)]
        section[cluster] = {**_summary(outcomes), "typeCheckingWarnings": type_warnings, "gkeOnlyNotApplied": skipped}
        assert [o.as_json() for o in outcomes if not o.accepted] == []
        assert [o.as_json() for o in outcomes if o.dropped] == []
        assert type_warnings == []
        if cluster != stack:  # the next fleet member gets an empty cluster too
            left = delete_all(target.rest, [o for o in objects if not controllers.owns(o)])
            assert not left, left
            applied.clear()


@pytest.mark.parametrize("stack", STACKS)
def test_what_the_charts_render_for_the_stack_is_accepted(stack: str, target: Target, applied: list[JsonObj]) -> None:
    """The charts' objects, with this stack's values, on a cluster holding the stack's own objects (namespaces,
    the controllers' PriorityClass). Dry run, beside the running controllers' install."""
    config = parse_platform_config(load_stack_config(stack)["gke-tpu-priority:platform"])
    platform = [
        o for o in kubernetes_objects(stack_run(stack).resources) if o["kind"] in ("Namespace", "PriorityClass")
    ]
    applied[:] = platform
    assert [o.as_json() for o in apply_all(target.rest, platform) if not o.accepted] == []
    version = target.kubectl.json("version")["serverVersion"]["gitVersion"]
    section = report.section("charts").setdefault(stack, {})
    for namespace, objects in chart_objects(config, version).items():
        outcomes = apply_all(target.rest, objects, dry_run=True, namespace=namespace)
        section[namespace] = _summary(outcomes)
        assert [o.as_json() for o in outcomes if not o.accepted] == []
        assert [o.as_json() for o in outcomes if o.dropped] == []
