"""The admission policy component in every stack: present, valid for the API server, following the stack config,
and admitting the package's own TPU JobSets while refusing broken ones (its CEL evaluated offline)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gke_tpu_priority.components import tpu_shapes
from gke_tpu_priority.components.admission import admission_objects
from gke_tpu_priority.components.config import ConfigError, parse_platform_config
from gke_tpu_priority.components.config.resolved import effective_local_queues
from gke_tpu_priority.components.workloads import TpuJobSetSpec, tpu_jobset
from gke_tpu_priority.policies.admission import POLICY_KINDS, POLICY_NAME, SYSTEM_NAMESPACES
from testkit.mock_runtime import load_stack_config, run_program
from testkit.platform import platform, stack_config
from testkit.stacks import STACKS, stack_run
from tests.policies.admission_cel import evaluate
from tests.support.crd_validation import assert_valid
from tests.support.kube_schemas import assert_valid_builtin
from tools import preview
from tools.manifests import kubernetes_objects

KINDS = ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")


def admission(objects: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The stack's policies and bindings: one of each per checked kind, each binding naming its policy."""
    ours = [o for o in objects if o["metadata"]["name"].startswith(POLICY_NAME)]  # not the reconciler's state guard
    policies, bindings = ([o for o in ours if o["kind"] == kind] for kind in KINDS)
    assert len(policies) == len(bindings) == len(POLICY_KINDS)
    assert [b["spec"]["policyName"] for b in bindings] == [p["metadata"]["name"] for p in policies]
    return policies, bindings


def from_config(config: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    objects = admission_objects(parse_platform_config(config))
    return [p for _, p, _ in objects], [b for _, _, b in objects]


def stack_platform(stack: str) -> dict[str, Any]:
    return dict(load_stack_config(stack)["gke-tpu-priority:platform"])


@pytest.mark.parametrize("stack", STACKS)
def test_every_stack_deploys_a_valid_policy_bound_to_every_namespace_but_the_system_ones(stack: str) -> None:
    policies, bindings = admission(kubernetes_objects(stack_run(stack).resources))
    config = parse_platform_config(stack_platform(stack))
    matched = []
    for policy, binding in zip(policies, bindings, strict=True):
        assert_valid_builtin(policy)
        assert_valid_builtin(binding)
        assert binding["spec"]["validationActions"] == [config.admission_policy.action]
        (selector,) = binding["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"]
        # Every namespace is checked, with or without a LocalQueue, but GKE's, Kubernetes' and the platform's own.
        assert selector["operator"] == "NotIn"
        unchecked = {*SYSTEM_NAMESPACES, config.kueue.namespace, config.jobset.namespace}
        assert set(selector["values"]) - unchecked <= {config.hotswap.namespace}
        assert not {q.namespace for q in effective_local_queues(config.queues)} & set(selector["values"])
        validations = " ".join(v["expression"] for v in policy["spec"]["validations"])
        kind = policy["spec"]["matchConstraints"]["resourceRules"][0]["resources"][0]
        for tier in config.priorities if kind in ("jobs", "jobsets") else ():
            assert f"'{tier.name}'" in validations
        for validation in policy["spec"]["validations"]:
            assert "\n" not in validation["message"] and validation["messageExpression"]
        exempt = policy["spec"]["matchConditions"][0]["expression"]
        assert f"system:serviceaccount:{config.kueue.namespace}:" in exempt
        assert f"system:serviceaccount:{config.jobset.namespace}:" in exempt
        (rule,) = policy["spec"]["matchConstraints"]["resourceRules"]
        matched += rule["resources"]
    assert sorted(matched) == [
        "cronjobs",
        "daemonsets",
        "deployments",
        "jobs",
        "jobsets",
        "pods",
        "replicasets",
        "statefulsets",
    ]


@pytest.mark.parametrize("stack", STACKS)
def test_policy_is_created_after_kueue_jobset_tiers_and_queues(stack: str) -> None:
    run = stack_run(stack)
    by_urn = {r.urn: r for r in run.resources}
    policies = [
        r
        for r in run.resources
        if r.type == "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
        and r.inputs["metadata"]["name"].startswith(POLICY_NAME)
    ]
    assert len(policies) == len(POLICY_KINDS)
    for policy in policies:
        component = by_urn[str(policy.parent)]
        assert component.type == "gke-tpu-priority:index:TpuAdmissionPolicy"
        depends_on = {by_urn[d].type for d in policy.dependencies}
        # Components' depends_on reaches their children: the charts (JobSet CRD), the tiers and the LocalQueues.
        assert {
            "kubernetes:helm.sh/v4:Chart",
            "kubernetes:scheduling.k8s.io/v1:PriorityClass",
            "kubernetes:kueue.x-k8s.io/v1beta2:WorkloadPriorityClass",
            "kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue",
        } <= depends_on


@pytest.mark.parametrize("stack", STACKS)
def test_policy_admits_the_packages_own_jobsets_and_refuses_broken_ones(stack: str) -> None:
    config = parse_platform_config(stack_platform(stack))
    policies, bindings = admission(kubernetes_objects(stack_run(stack).resources))
    queue = effective_local_queues(config.queues)[0]
    tier = config.priorities[0].name
    for shape in tpu_shapes.SHAPES:
        spec = TpuJobSetSpec.model_validate(
            {
                "name": "train",
                "namespace": queue.namespace,
                "queue": queue.name,
                "priority": tier,
                "topology": shape.topology,
                "machineType": shape.machine_type,
                "slices": 2,
                "image": "trainer:1",
                "command": ["python", "train.py"],
            }
        )
        good = tpu_jobset(spec)
        assert_valid(good)
        outcome = evaluate(policies, bindings, good)
        assert outcome.matched and outcome.failures == [], (shape, outcome.failures)
        bad = tpu_jobset(spec.model_copy(update={"priority": "not-a-tier"}))
        assert evaluate(policies, bindings, bad).rules == {"tpu-workload-priority-tier-declared"}


def test_policy_can_be_turned_off_or_softened() -> None:
    off = run_program("no-admission", stack_config(platform(admissionPolicy={"enabled": False})))
    assert not [
        o
        for o in kubernetes_objects(off.resources)
        if o["kind"] in KINDS and o["metadata"]["name"].startswith(POLICY_NAME)
    ]
    assert not [r for r in off.resources if r.type == "gke-tpu-priority:index:TpuAdmissionPolicy"]
    for action in ("Warn", "Audit"):
        for _, _, binding in admission_objects(parse_platform_config(platform(admissionPolicy={"action": action}))):
            assert binding["spec"]["validationActions"] == [action]
            assert_valid_builtin(binding)


def test_bad_action_is_refused_with_what_is_allowed() -> None:
    with pytest.raises(ConfigError) as info:
        parse_platform_config(platform(admissionPolicy={"action": "Block"}))
    assert any("admissionPolicy.action" in p and "Deny" in p for p in info.value.problems), info.value.problems


def test_policy_follows_the_stack_config() -> None:
    custom = platform(
        priorities=[
            {"name": "urgent", "value": 5000, "description": "u"},
            {"name": "batch", "value": 10, "preempts": False, "description": "b"},
        ],
        queues={
            "clusterQueues": [
                {"name": "cq", "namespaces": ["ml-a", "ml-b"], "quotas": [{"flavor": "v6e-4x4", "chips": 32}]}
            ],
            "localQueues": [
                {"name": "main", "namespace": "ml-a", "clusterQueue": "cq"},
                {"name": "main", "namespace": "ml-b", "clusterQueue": "cq"},
            ],
        },
    )
    policies, bindings = from_config(custom)
    good = tpu_jobset(
        TpuJobSetSpec.model_validate(
            {
                "name": "t",
                "namespace": "ml-b",
                "queue": "main",
                "priority": "urgent",
                "topology": "4x4",
                "slices": 1,
                "image": "i:1",
                "command": ["run"],
            }
        )
    )
    assert evaluate(policies, bindings, good).failures == []
    good["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "training"
    assert evaluate(policies, bindings, good).rules == {"tpu-workload-queue-declared"}


def test_preview_shows_the_policy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert preview.main(["--stack", "dev", "--build-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy " in out
    assert "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicyBinding " in out
    assert "kind: ValidatingAdmissionPolicy\n" in (tmp_path / "dev" / "manifests.yaml").read_text()
