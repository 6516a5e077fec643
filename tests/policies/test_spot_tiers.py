"""A tier kept off spot (`priorities[].spot: false`): declared on its WorkloadPriorityClass, enforced by the rule
`tpu-workload-off-spot` in the CLI and in the admission policy alike, and satisfied by the JobSet builder's
`allowSpot: false`. The `ladder` stack keeps `training-high` off spot."""

from __future__ import annotations

from typing import Any

from gke_tpu_priority.components.admission import admission_objects, admission_settings
from gke_tpu_priority.components.config import parse_platform_config
from gke_tpu_priority.components.workloads import TpuJobSetSpec, tpu_jobset
from gke_tpu_priority.policies.check import check_objects
from gke_tpu_priority.policies.rules.base import manifest_object
from gke_tpu_priority.policies.rules.spot_tiers import ALLOW_SPOT_ANNOTATION, off_spot
from testkit.mock_runtime import load_stack_config
from testkit.stacks import stack_run
from tests.policies.admission_cel import evaluate
from tools.manifests import kubernetes_objects

STACK = "ladder"
RULE = "tpu-workload-off-spot"


def _jobset(tier: str, allow_spot: bool) -> dict[str, Any]:
    spec = {"name": "llm", "namespace": "research", "queue": "training", "priority": tier, "topology": "4x4",
            "slices": 2, "image": "trainer:1", "allowSpot": allow_spot}  # fmt: skip
    return tpu_jobset(TpuJobSetSpec.model_validate(spec))


def test_the_ladder_stack_declares_its_top_tier_off_spot_where_every_front_end_reads_it() -> None:
    config = parse_platform_config(load_stack_config(STACK)["gke-tpu-priority:platform"])
    assert admission_settings(config).context.spot_free_tiers == ("training-high",)
    declared = {
        o["metadata"]["name"]: o["metadata"].get("annotations", {}).get(ALLOW_SPOT_ANNOTATION)
        for o in kubernetes_objects(stack_run(STACK).resources)
        if o["kind"] == "WorkloadPriorityClass"
    }
    assert declared == {"training-high": "false", "training-low": None, "best-effort": None}


def test_the_cli_and_the_admission_policy_refuse_a_top_tier_jobset_that_may_land_on_spot() -> None:
    stack = [manifest_object(o) for o in kubernetes_objects(stack_run(STACK).resources)]
    config = parse_platform_config(load_stack_config(STACK)["gke-tpu-priority:platform"])
    objects = admission_objects(config)
    policies, bindings = [p for _, p, _ in objects], [b for _, _, b in objects]
    for tier, allow_spot, refused in (
        ("training-high", True, True),
        ("training-high", False, False),
        ("training-low", True, False),  # control: a tier that may use spot
    ):
        obj = _jobset(tier, allow_spot)
        cli = {
            r.rule
            for r in check_objects([*stack, manifest_object(obj)])
            if r.subject is not None and r.subject.name == "llm"
        }
        assert (RULE in cli) is refused, (tier, allow_spot, cli)
        assert evaluate(policies, bindings, obj).rules == ({RULE} if refused else set()), (tier, allow_spot)


def test_off_spot_reads_selectors_and_every_affinity_term() -> None:
    def required(*terms: list[dict[str, Any]]) -> dict[str, Any]:
        nodes = {"nodeSelectorTerms": [{"matchExpressions": t} for t in terms]}
        return {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": nodes}}}

    label = "gke-tpu-priority.io/capacity"
    not_spot = [{"key": label, "operator": "NotIn", "values": ["spot"]}]
    assert not off_spot({})
    assert off_spot({"nodeSelector": {label: "reservation"}})
    assert not off_spot({"nodeSelector": {label: "spot"}})
    assert off_spot(required(not_spot))
    assert off_spot(required([{"key": label, "operator": "In", "values": ["reservation", "flex-start-queued"]}]))
    assert not off_spot(required([{"key": label, "operator": "In", "values": ["spot", "reservation"]}]))
    assert not off_spot(required(not_spot, [{"key": "zone", "operator": "In", "values": ["a"]}]))  # one term allows it
    assert not off_spot(required([{"key": "cloud.google.com/gke-spot", "operator": "NotIn", "values": ["true"]}]))
