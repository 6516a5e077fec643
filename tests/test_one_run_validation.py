"""One run reports every mistake it can: field mistakes and the cross-field checks that can be
judged on the fields that are valid come together, so five mistakes of different kinds take one run, not three.
A check that needs a field that failed is left out rather than judged on a default the user never chose."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from gke_tpu_priority.components.config import ConfigError, parse_platform_config
from gke_tpu_priority.components.config.fleet import parse_fleet_config
from gke_tpu_priority.components.config.partial import PARTIAL, independent
from testkit.mock_runtime import load_stack_config
from tools import preview

Raw = dict[str, Any]

FIVE_MISTAKES = [
    # an unknown key (a typo of `region`)
    "platform.regoin: unknown setting (check the spelling; settings are camelCase); did you mean `region`?",
    # a bad type
    'platform.tpuPools[0].slices: expected a whole number (got "two")',
    # a tier named like the platform's own PriorityClass
    "platform.priorities[0].name: 'hotswap-reconciler' is the PriorityClass of the hotswap reconciler, which the "
    "platform declares itself; name the tier something else",
    # a zone without TPU v6e (a cross-field check, judged although pool 0 has a bad type)
    "platform.tpuPools[1].zone: 'us-east5-c' is not a zone where Google documents TPU v6e "
    "(cloud.google.com/tpu/docs/regions-zones); the zones of region 'us-east5' with TPU v6e: us-east5-a, us-east5-b. "
    "If your project has v6e capacity in 'us-east5-c' (a newly launched, single-tenant or AI zone), add it to "
    "`platform.additionalTpuZones`",
    # starvationGrace against Kueue's waitForPodsReady.timeout (another cross-field check)
    "platform.hotswap.settings.starvationGrace: 600s is more than half of kueue.waitForPodsReady.timeout (15m); "
    "after the grace the victims must terminate and the JobSet start before the timeout, or Kueue evicts the JobSet "
    "the reconciler frees slices for; lower starvationGrace to 450s or less (default 60s), or raise the timeout",
]


def dev(change: Callable[[Raw], object]) -> Raw:
    raw = copy.deepcopy(load_stack_config("dev")["gke-tpu-priority:platform"])
    change(raw)
    return raw


def five(raw: Raw) -> None:
    raw["regoin"] = "us-east5"
    raw["tpuPools"][0]["slices"] = "two"
    raw["priorities"] = [
        {"name": "hotswap-reconciler", "value": 1000, "description": "x"},
        {"name": "training-high", "value": 2000, "description": "y"},
    ]
    raw["tpuPools"][1]["zone"] = "us-east5-c"
    raw["hotswap"] = {"settings": {"starvationGrace": "10m"}}


def problems(raw: Raw) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_platform_config(raw, stack_file=True)
    return caught.value.problems


def test_five_mistakes_of_different_stages_in_one_run() -> None:
    assert sorted(problems(dev(five))) == sorted(FIVE_MISTAKES)


def test_five_mistakes_in_a_stack_file_one_preview_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stack = {"config": {**load_stack_config("dev"), "gke-tpu-priority:platform": dev(five)}}
    (tmp_path / "stacks").mkdir()
    (tmp_path / "stacks" / "Pulumi.five.yaml").write_text(yaml.safe_dump(stack, sort_keys=False))
    monkeypatch.setattr(preview, "load_stack_config", lambda name: load_stack_config(name, tmp_path))
    assert preview.main(["--stack", "five", "--build-dir", str(tmp_path / "build")]) == 2
    err = capsys.readouterr().err
    assert "(5 problem(s))" in err and "Traceback" not in err
    for problem in FIVE_MISTAKES:
        assert f"  - {problem}\n" in err
    assert not (tmp_path / "build").exists()


def test_a_field_that_failed_is_not_judged_by_its_default() -> None:
    # The timeout is unreadable, so starvationGrace cannot be judged against it; against the default 15m, 10m
    # would look too long, a mistake the user did not make.
    def change(raw: Raw) -> None:
        raw["kueue"] = {"waitForPodsReady": {"timeout": "soon"}}
        raw["hotswap"] = {"settings": {"starvationGrace": "10m"}}

    assert problems(dev(change)) == [
        'platform.kueue.waitForPodsReady.timeout: expected a duration such as `90s`, `15m` or `1h30m` (got "soon")'
    ]


def test_a_value_its_own_model_refused_is_not_built_on() -> None:
    # 30s fails WaitForPodsReady's own check; starvationGrace (default 60s) is not judged against it as well.
    found = problems(dev(lambda raw: raw.update(kueue={"waitForPodsReady": {"timeout": "30s"}})))
    assert [p.split(":")[0] for p in found] == ["platform.kueue.waitForPodsReady.timeout"]


def test_a_nested_models_own_checks_run_beside_its_field_mistakes() -> None:
    # hotswap.replicas is out of range, and hotswap's own check of `settings` still reports in the same run.
    def change(raw: Raw) -> None:
        raw["hotswap"] = {"replicas": 9, "settings": {"maxHold": "soon", "leaderElection": True}}

    assert problems(dev(change)) == [
        "platform.hotswap.replicas: must be at most 3 (got 9)",
        "platform.hotswap.settings.leaderElection: set by the package from the stack (remove it)",
        'platform.hotswap.settings.maxHold: expected a duration such as `90s`, `15m` or `1h30m` (got "soon")',
    ]


def test_hotswap_settings_speak_the_stacks_words() -> None:
    def change(raw: Raw) -> None:
        raw["hotswap"] = {"settings": {"maxHlod": "6h", "fastFail": {"enabld": True}, "starvation_grace": "30s"}}

    assert sorted(problems(dev(change))) == [
        "platform.hotswap.settings.fastFail.enabld: unknown setting (check the spelling; settings are camelCase); "
        "did you mean `enabled`?",
        "platform.hotswap.settings.maxHlod: unknown setting (check the spelling; settings are camelCase); did you "
        "mean `maxHold`?",
        "platform.hotswap.settings.starvation_grace: settings are camelCase; write `starvationGrace`",
    ]


def test_pool_checks_run_per_pool() -> None:
    # Pool 0 lacks its zone (required): its zone check cannot run, pool 1's still does.
    def change(raw: Raw) -> None:
        del raw["tpuPools"][0]["zone"]
        raw["tpuPools"][1]["zone"] = "us-central1-b"

    assert problems(dev(change)) == [
        "platform.tpuPools[0].zone: required setting is missing — Zone for this group's node pools (must be in the "
        "stack's region, with v6e capacity)",
        "platform.tpuPools[1].zone: 'us-central1-b' is not in region 'us-east5'; a TPU pool's zone must be in the "
        "cluster's region; the zones of region 'us-east5' with TPU v6e: us-east5-a, us-east5-b",
    ]


def test_snake_case_and_a_cross_field_mistake_in_one_run() -> None:
    def change(raw: Raw) -> None:
        raw["systemPool"]["machine_type"] = raw["systemPool"].pop("machineType")
        raw["tpuPools"][0]["zone"] = "us-east5-c"

    found = problems(dev(change))
    assert [p.split(":")[0] for p in found] == ["platform.systemPool.machine_type", "platform.tpuPools[0].zone"]


def test_fleet_workers_checks_run_beside_field_mistakes() -> None:
    fleet = copy.deepcopy(load_stack_config("fleet")["gke-tpu-priority:fleet"])
    # Worker 0's pool has a bad type and a zone without v6e: its platform checks run although a field failed.
    worker = fleet["workers"][0]["platform"]
    worker["tpuPools"][0].update(slices="two", zone=worker["region"] + "-z")
    with pytest.raises(ConfigError) as caught:
        parse_fleet_config(fleet, stack_file=True)
    paths = [p.split(":")[0] for p in caught.value.problems]
    assert paths == ["fleet.workers[0].platform.tpuPools[0].slices", "fleet.workers[0].platform.tpuPools[0].zone"]


# --- the fleet's own cross-field checks: every mistake in one run, as the platform's ----------------------------


def fleet(change: Callable[[Raw], object]) -> Raw:
    raw = copy.deepcopy(load_stack_config("fleet")["gke-tpu-priority:fleet"])
    change(raw)
    return raw


def fleet_problems(raw: Raw) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_fleet_config(raw, stack_file=True)
    return caught.value.problems


def paths(found: list[str]) -> list[str]:
    return [p.split(": ")[0] for p in found]


TOO_MANY_CHIPS = {"clusterQueue": "tpu-training", "flavor": "v6e-4x4", "chips": 640}


def test_the_fleets_own_mistakes_come_in_one_run() -> None:
    def three(raw: Raw) -> None:
        # Worker 1 on worker 0's cluster, with other tiers, and manager quotas above what the workers back.
        raw["workers"][1]["platform"] = {
            **copy.deepcopy(raw["workers"][0]["platform"]),
            "priorities": [{"name": "only", "value": 1, "description": "x"}],
        }
        raw["managerQuotas"] = [TOO_MANY_CHIPS, {**TOO_MANY_CHIPS, "chips": 8}]

    found = fleet_problems(fleet(three))
    # Before, the quota checks ran only once everything else was right: these mistakes took two runs.
    assert paths(found) == [
        "fleet.workers[1].platform.cluster.name",
        "fleet.workers[1].platform.priorities",
        "fleet.managerQuotas[0].chips",
        "fleet.managerQuotas[1]",
    ]
    assert found[1].startswith("fleet.workers[1].platform.priorities: [('only', 1)] differ from workers[0]'s")
    assert found[2].startswith(
        "fleet.managerQuotas[0].chips: 640 exceeds the 64 chips the workers back for 'tpu-training'/'v6e-4x4' "
        "(east5: 32, south1: 32)"
    )
    assert found[3] == "fleet.managerQuotas[1]: 'tpu-training'/'v6e-4x4' is already managerQuotas[0]"


def test_the_fleets_checks_run_beside_a_workers_field_mistake() -> None:
    def change(raw: Raw) -> None:
        raw["workers"][1]["platform"]["tpuPools"][0]["slices"] = "two"  # worker 1's pools cannot be read
        raw["workers"][1]["name"] = "east5"
        raw["workers"][1]["platform"]["priorities"] = [{"name": "only", "value": 1, "description": "x"}]

    found = fleet_problems(fleet(change))
    assert paths(found) == [
        "fleet.workers[1].platform.tpuPools[0].slices",
        "fleet.workers[1].name",
        "fleet.workers[1].platform.priorities",
    ]


def test_quotas_are_not_judged_without_every_workers_pools() -> None:
    # The workers' sum needs every worker's pools: with one worker's unreadable, 640 chips is left unjudged.
    def change(raw: Raw) -> None:
        raw["workers"][1]["platform"]["tpuPools"][0]["slices"] = "two"
        raw["managerQuotas"] = [TOO_MANY_CHIPS]

    assert paths(fleet_problems(fleet(change))) == ["fleet.workers[1].platform.tpuPools[0].slices"]


def test_quotas_are_not_judged_with_two_workers_of_one_name() -> None:
    # The sums are per worker name: two workers of one name would mislead them.
    def change(raw: Raw) -> None:
        raw["workers"][1]["name"] = "east5"
        raw["managerQuotas"] = [TOO_MANY_CHIPS]

    assert paths(fleet_problems(fleet(change))) == ["fleet.workers[1].name"]


def test_a_managers_field_mistake_leaves_the_workers_clusters_judged() -> None:
    def change(raw: Raw) -> None:
        raw["manager"]["region"] = 5
        raw["workers"][1]["platform"] = copy.deepcopy(raw["workers"][0]["platform"])

    found = fleet_problems(fleet(change))
    assert paths(found) == ["fleet.manager.region", "fleet.workers[1].platform.cluster.name"]
    assert found[1] == (
        "fleet.workers[1].platform.cluster.name: 'tpu-east5' in 'us-east5' (project 'my-tpu-fleet') is already "
        "workers[0]'s cluster; give each worker its own region or cluster name"
    )


def test_independent_skips_a_check_only_on_a_partial_config() -> None:
    def needs_a_missing_field() -> list[str]:
        raise AttributeError("'PlatformConfig' object has no attribute 'kueue'")

    with pytest.raises(AttributeError):
        independent(needs_a_missing_field)
    token = PARTIAL.set(True)
    try:
        assert independent(needs_a_missing_field, lambda: ["kept"]) == ["kept"]
    finally:
        PARTIAL.reset(token)


def test_a_mapping_where_a_list_belongs_is_one_mistake() -> None:
    # `flavors:` written as a mapping: one type problem, not a list of clashing flavor names built from it.
    found = problems(dev(lambda raw: raw.update(queues={"flavors": {"name": "v6e-2x2", "topology": "2x2"}})))
    assert [p.split(":")[0] for p in found] == ["platform.queues.flavors"]


def test_pools_that_cannot_be_read_leave_the_other_checks_running() -> None:
    # `tpuPools:` as a mapping: the pool checks cannot run, starvationGrace against the timeout still does.
    def change(raw: Raw) -> None:
        raw["tpuPools"] = raw["tpuPools"][0]
        raw["hotswap"] = {"settings": {"starvationGrace": "10m"}}

    found = problems(dev(change))
    assert [p.split(":")[0] for p in found] == ["platform.tpuPools", "platform.hotswap.settings.starvationGrace"]
