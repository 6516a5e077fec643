"""The hotswap-readiness rule: which tiers it covers, what counts as surviving a restart, and the package's own
JobSets passing it in every front end."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gke_tpu_priority.components.admission import admission_settings
from gke_tpu_priority.components.config import parse_platform_config
from gke_tpu_priority.components.workloads import TpuJobSetSpec, tpu_jobset
from gke_tpu_priority.policies.check import check_objects
from gke_tpu_priority.policies.rules.base import manifest_object
from gke_tpu_priority.policies.rules.hotswap_readiness import JOBSET_HOTSWAP_RESTARTABLE, hotswap_tiers, restart_problem
from testkit.platform import platform
from tests.policies.test_three_front_ends import PLATFORM, admit, jobset

RULE = JOBSET_HOTSWAP_RESTARTABLE.name


def tier_objects(values: dict[str, int]) -> list[Any]:
    out = []
    for name, value in values.items():
        for api, kind in (
            ("scheduling.k8s.io/v1", "PriorityClass"),
            ("kueue.x-k8s.io/v1beta2", "WorkloadPriorityClass"),
        ):
            out.append(manifest_object({"apiVersion": api, "kind": kind, "metadata": {"name": name}, "value": value}))
    return out


def test_every_tier_above_the_lowest_is_covered() -> None:
    objects = tier_objects({"best-effort": 100, "low": 1000, "high": 2000})
    assert hotswap_tiers(objects, {}) == {"low", "high"}
    assert hotswap_tiers(objects, {"hotswapTiers": ["high"]}) == {"high"}
    # A PriorityClass without its WorkloadPriorityClass is no tier.
    assert hotswap_tiers(objects[:2] + tier_objects({"x": 5000})[:1], {}) == set()


def test_the_stack_and_the_rule_agree_on_the_covered_tiers() -> None:
    config = parse_platform_config(platform())
    covered = admission_settings(config).context.hotswap_tiers
    values = {t.name: t.value for t in config.priorities}
    assert set(covered) == hotswap_tiers(tier_objects(values), {})
    assert min(values, key=lambda n: values[n]) not in covered and covered


@pytest.mark.parametrize(
    ("failure_policy", "survives"),
    [
        (None, False),
        ({}, False),
        ({"maxRestarts": 0}, False),
        ({"maxRestarts": 1}, True),
        ({"maxRestarts": 0, "rules": [{"name": "a", "action": "RestartJobSet"}]}, False),
        ({"maxRestarts": 0, "rules": [{"name": "a", "action": "RestartJobSetAndIgnoreMaxRestarts"}]}, True),
        ({"rules": [{"name": "a", "action": "RestartJobAndIgnoreMaxRestarts"}]}, True),
    ],
)
def test_what_survives_one_restart(failure_policy: dict[str, Any] | None, survives: bool) -> None:
    obj = copy.deepcopy(jobset())
    obj["spec"].pop("failurePolicy")
    if failure_policy is not None:
        obj["spec"]["failurePolicy"] = failure_policy
    assert (restart_problem(manifest_object(obj)) is None) is survives
    refused = RULE in admit(obj).rules
    assert refused is not survives
    assert (RULE in {r.rule for r in check_objects([manifest_object(m) for m in [*PLATFORM, obj]])}) is not survives


def test_the_packages_own_high_priority_jobset_passes() -> None:
    spec = TpuJobSetSpec.model_validate(
        {
            "name": "llm",
            "namespace": "team-a",
            "queue": "training",
            "priority": "training-high",
            "topology": "4x4",
            "slices": 2,
            "image": "trainer:1",
            "maxRestarts": 1,
        }
    )
    obj = tpu_jobset(spec)
    assert restart_problem(manifest_object(obj)) is None
    assert RULE not in admit(obj).rules
