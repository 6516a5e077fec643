"""Priority conventions: PriorityClass bands, one lowest global default, PriorityClass <-> WorkloadPriorityClass."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from pulumi_policy import EnforcementLevel

from tests.policies.policy_testing import (
    assert_has_violation,
    assert_no_violations,
    assert_policy_metadata,
    resource_args,
    rules,
    run_policy,
    stack_args,
)

PC_TYPE = "kubernetes:scheduling.k8s.io/v1:PriorityClass"
WPC_TYPE = "kubernetes:kueue.x-k8s.io/v1beta2:WorkloadPriorityClass"
CONFIG_GROUP = "kubernetes:yaml/v2:ConfigGroup"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"


def priority_class(name: str, value: int, **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        **extra,
    }


def workload_priority_class(name: str, value: int) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": name},
        "value": value,
    }


LOW, HIGH = (
    priority_class("low-priority-job", 1000000, globalDefault=True),
    priority_class("high-priority-job", 2000000),
)
COMPLIANT_STACK: list[tuple[str, dict[str, Any], str]] = [
    (PC_TYPE, LOW, "low-priority-job"),
    (PC_TYPE, HIGH, "high-priority-job"),
    (
        CONFIG_GROUP,
        {
            "objs": [
                workload_priority_class("low-priority-job", 1000000),
                workload_priority_class("high-priority-job", 2000000),
            ]
        },
        "workload-priorities",
    ),
]


def with_resource(*extra: tuple[str, dict[str, Any], str]) -> list[tuple[str, dict[str, Any], str]]:
    return [*copy.deepcopy(COMPLIANT_STACK), *extra]


def test_metadata() -> None:
    for policy in (
        rules.PRIORITY_CLASS_VALUE_IN_BAND,
        rules.PRIORITY_CLASS_SINGLE_GLOBAL_DEFAULT,
        rules.PRIORITY_CLASSES_MATCH_WORKLOAD_PRIORITY_CLASSES,
    ):
        assert_policy_metadata(policy, EnforcementLevel.MANDATORY)


# ----- value band -----


def test_value_in_band_passes() -> None:
    assert_no_violations(rules.PRIORITY_CLASS_VALUE_IN_BAND, resource_args(PC_TYPE, HIGH, name="high-priority-job"))


def test_value_above_user_range_is_rejected() -> None:
    args = resource_args(PC_TYPE, priority_class("too-high", 1_000_000_001), name="too-high")
    assert_has_violation(rules.PRIORITY_CLASS_VALUE_IN_BAND, args, "PriorityClass 'too-high' has value 1000000001")


def test_configured_band_and_allowed_values() -> None:
    config = {"maxValue": 5000000, "minValue": 0, "allowedValues": [1000000, 2000000]}
    assert_no_violations(rules.PRIORITY_CLASS_VALUE_IN_BAND, resource_args(PC_TYPE, HIGH, config))
    odd = resource_args(PC_TYPE, priority_class("odd", 1500000), config, name="odd")
    assert_has_violation(rules.PRIORITY_CLASS_VALUE_IN_BAND, odd, "not one of the allowed values (1000000, 2000000)")
    negative = resource_args(PC_TYPE, priority_class("neg", -5), config, name="neg")
    assert_has_violation(rules.PRIORITY_CLASS_VALUE_IN_BAND, negative, "outside the allowed band [0, 5000000]")


def test_value_missing_is_rejected() -> None:
    props = priority_class("empty", 0)
    del props["value"]
    assert_has_violation(rules.PRIORITY_CLASS_VALUE_IN_BAND, resource_args(PC_TYPE, props), "no numeric 'value'")


def test_value_policy_ignores_other_kinds() -> None:
    assert_no_violations(
        rules.PRIORITY_CLASS_VALUE_IN_BAND, resource_args(WPC_TYPE, workload_priority_class("x", 2_000_000_000))
    )


# ----- global default -----


def test_single_lowest_global_default_passes() -> None:
    assert_no_violations(rules.PRIORITY_CLASS_SINGLE_GLOBAL_DEFAULT, stack_args(COMPLIANT_STACK))


def test_two_global_defaults_are_rejected() -> None:
    stack = with_resource((PC_TYPE, priority_class("also-default", 500, globalDefault=True), "also-default"))
    assert_has_violation(
        rules.PRIORITY_CLASS_SINGLE_GLOBAL_DEFAULT,
        stack_args(stack),
        "also-default, low-priority-job all set globalDefault",
    )


def test_global_default_must_be_lowest() -> None:
    stack = with_resource((PC_TYPE, priority_class("best-effort", 10), "best-effort"))
    messages = assert_has_violation(
        rules.PRIORITY_CLASS_SINGLE_GLOBAL_DEFAULT,
        stack_args(stack),
        "PriorityClass 'low-priority-job' is the global default but has value 1000000",
    )
    assert "'best-effort' (10)" in messages[0]


# ----- PriorityClass <-> WorkloadPriorityClass -----


def test_pairs_match_with_config_group_objs() -> None:
    assert_no_violations(rules.PRIORITY_CLASSES_MATCH_WORKLOAD_PRIORITY_CLASSES, stack_args(COMPLIANT_STACK))


def test_pairs_match_with_custom_resources() -> None:
    stack = [(PC_TYPE, HIGH, "high"), (WPC_TYPE, workload_priority_class("high-priority-job", 2000000), "high-w")]
    assert_no_violations(rules.PRIORITY_CLASSES_MATCH_WORKLOAD_PRIORITY_CLASSES, stack_args(stack))


def test_priority_class_without_workload_priority_class_is_rejected() -> None:
    stack = with_resource((PC_TYPE, priority_class("urgent-job", 3000000), "urgent-job"))
    assert_has_violation(
        rules.PRIORITY_CLASSES_MATCH_WORKLOAD_PRIORITY_CLASSES,
        stack_args(stack),
        "PriorityClass 'urgent-job' has no WorkloadPriorityClass named 'urgent-job'",
    )


def test_workload_priority_class_without_priority_class_is_rejected() -> None:
    stack = with_resource((WPC_TYPE, workload_priority_class("orphan", 5), "orphan"))
    assert_has_violation(
        rules.PRIORITY_CLASSES_MATCH_WORKLOAD_PRIORITY_CLASSES,
        stack_args(stack),
        "WorkloadPriorityClass 'orphan' has no PriorityClass named 'orphan'",
    )


def test_value_mismatch_is_rejected() -> None:
    stack = copy.deepcopy(COMPLIANT_STACK)
    stack[2][1]["objs"][1]["value"] = 2000001
    assert_has_violation(
        rules.PRIORITY_CLASSES_MATCH_WORKLOAD_PRIORITY_CLASSES,
        stack_args(stack),
        "has value 2000000.0 but WorkloadPriorityClass 'high-priority-job'",
    )


def test_float_values_from_the_engine_match_integers() -> None:
    # The engine sends 2000000.0 for the PriorityClass; a YAML string in a ConfigGroup gives int 2000000.
    stack = [
        (PC_TYPE, HIGH, "high"),
        (
            CONFIG_GROUP,
            {
                "yaml": "apiVersion: kueue.x-k8s.io/v1beta2\nkind: WorkloadPriorityClass\n"
                "metadata: {name: high-priority-job}\nvalue: 2000000\n"
            },
            "cg",
        ),
    ]
    assert_no_violations(rules.PRIORITY_CLASSES_MATCH_WORKLOAD_PRIORITY_CLASSES, stack_args(stack))


def reconciler_deployment(priority_class_name: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "hotswap", "namespace": "hotswap"},
        "spec": {
            "template": {
                "spec": {"priorityClassName": priority_class_name, "containers": [{"name": "c", "image": "x"}]}
            }
        },
    }


@pytest.mark.parametrize("exempt_by", ["config", "usage"])
def test_reconciler_class_is_exempt(exempt_by: str) -> None:
    stack = with_resource((PC_TYPE, priority_class("hotswap-critical", 999_000_000), "hotswap-critical"))
    config: dict[str, Any] = {}
    if exempt_by == "config":
        config["exemptPriorityClasses"] = ["hotswap-critical"]
    else:
        stack.append((DEPLOYMENT, reconciler_deployment("hotswap-critical"), "hotswap"))
    policy = rules.PRIORITY_CLASSES_MATCH_WORKLOAD_PRIORITY_CLASSES
    assert_no_violations(policy, stack_args(stack, config))
    assert run_policy(policy, stack_args(stack[:-1] if exempt_by == "usage" else stack))  # exemption mattered


def test_controller_role_label_exempts_a_class_from_pairing() -> None:
    from gke_tpu_priority.policies.rules import evaluate_resources

    def pc(labels: dict[str, str]) -> dict[str, object]:
        return {
            "urn": "urn:pulumi:s::p::kubernetes:scheduling.k8s.io/v1:PriorityClass::ctl",
            "type": "kubernetes:scheduling.k8s.io/v1:PriorityClass",
            "name": "ctl",
            "parent": None,
            "inputs": {"metadata": {"name": "ctl", "labels": labels}, "value": 5.0},
        }

    unlabelled = evaluate_resources([pc({})])
    assert any(v.policy == "kueue-workloadpriorityclass-matches-priorityclass" for v in unlabelled)
    labelled = evaluate_resources([pc({"gke-tpu-priority.io/priority-class-role": "controllers"})])
    assert not any(v.policy == "kueue-workloadpriorityclass-matches-priorityclass" for v in labelled)
