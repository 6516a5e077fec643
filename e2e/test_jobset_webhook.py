"""The real JobSet controller (v0.12.0, its chart and its manager) judges the JobSets the workload template makes.

The chart is installed with the dev stack's values (e2e/conftest.py `controllers`); the manager built from the same
release runs as the chart's ServiceAccount; its mutating and validating webhooks, and Kueue's JobSet webhook, are
reached by the API server through the egress proxy.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from e2e import report
from e2e.conftest import Controllers, Target
from gke_tpu_priority.components import tpu_shapes
from testkit.jobsets import MAX_SLICES, longest_name, workload

JsonObj = dict[str, Any]
STACK = "dev"


def _dry_run(target: Target, obj: JsonObj) -> tuple[bool, str, JsonObj]:
    response = target.rest.create(obj, dry_run=True)
    return response.ok, response.message, response.body


@pytest.fixture(scope="module")
def team_namespace(target: Target, controllers: Controllers) -> Iterator[str]:
    target.kubectl.run("create", "namespace", "team-a")
    yield "team-a"
    target.kubectl.run("delete", "namespace", "team-a", "--wait=true", "--timeout=120s")


@pytest.mark.parametrize("shape", tpu_shapes.SHAPES, ids=lambda s: s.key)
def test_the_jobset_webhooks_accept_every_jobset_the_template_makes(
    shape: tpu_shapes.SliceShape, target: Target, team_namespace: str
) -> None:
    verdicts = report.section("controllers").setdefault("jobsetTemplateCases", {"accepted": 0, "refused": []})
    for slices in (1, 2, MAX_SLICES):
        for name in ("t", longest_name(shape, slices)):
            obj = workload(name=name, topology=shape.topology, machineType=shape.machine_type, slices=slices)
            accepted, error, stored = _dry_run(target, obj)
            if accepted:
                verdicts["accepted"] += 1
            else:
                verdicts["refused"].append({"shape": shape.key, "slices": slices, "name": name, "error": error})
            assert accepted, error
            # The mutating webhook ran: JobSet defaults what the template leaves out.
            assert stored["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["restartPolicy"]


def test_the_jobset_webhook_refuses_what_jobset_refuses(target: Target, team_namespace: str) -> None:
    """A name whose generated pod names exceed 63 characters: only the webhook knows, the schema does not."""
    shape = tpu_shapes.SHAPES[-1]
    obj = workload(name="x", topology=shape.topology, machineType=shape.machine_type, slices=MAX_SLICES)
    obj["metadata"]["name"] = longest_name(shape, MAX_SLICES) + "b"
    accepted, error, _ = _dry_run(target, obj)
    assert not accepted
    assert "admission webhook" in error and "jobset" in error.lower()
