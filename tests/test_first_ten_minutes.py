"""Mistakes a newcomer makes in the first ten minutes get the message they need: snake_case
keys named, the platform's own PriorityClass names refused, starvationGrace checked against Kueue's timeout, a
timeout floor, and no library jargon (regexes, class names, `datetime.timedelta(...)`)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from gke_tpu_priority.components.config import ConfigError, parse_platform_config
from gke_tpu_priority.components.config.priorities import PLATFORM_PRIORITY_CLASSES
from gke_tpu_priority.components.kueue import CONTROLLERS_PRIORITY_CLASS
from gke_tpu_priority.components.reconciler.objects import RECONCILER_PRIORITY_CLASS
from testkit.mock_runtime import load_stack_config

Raw = dict[str, Any]


def dev(change: Callable[[Raw], object]) -> Raw:
    raw = copy.deepcopy(load_stack_config("dev")["gke-tpu-priority:platform"])
    change(raw)
    return raw


def problems(raw: Raw) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_platform_config(raw, stack_file=True)
    return caught.value.problems


def test_snake_case_key_is_named_with_its_camel_case() -> None:
    def snake(raw: Raw) -> None:
        raw["systemPool"]["machine_type"] = raw["systemPool"].pop("machineType")

    assert problems(dev(snake)) == ["platform.systemPool.machine_type: settings are camelCase; write `machineType`"]


def test_both_spellings_report_the_snake_case_one() -> None:
    def both(raw: Raw) -> None:
        raw["tpuPools"][1]["scale_to_zero"] = False

    assert problems(dev(both)) == [
        "platform.tpuPools[1].scale_to_zero: snake_case spelling of `scaleToZero`, which is set too; remove "
        "`scale_to_zero` (settings are camelCase)"
    ]


def test_platform_priority_class_names_are_not_tiers() -> None:
    assert set(PLATFORM_PRIORITY_CLASSES) == {CONTROLLERS_PRIORITY_CLASS, RECONCILER_PRIORITY_CLASS}

    def tiers(raw: Raw) -> None:
        raw["priorities"] = [
            {"name": "hotswap-reconciler", "value": 1000, "description": "a"},
            {"name": "tpu-platform-controllers", "value": 2000, "description": "b"},
        ]

    assert problems(dev(tiers)) == [
        "platform.priorities[0].name: 'hotswap-reconciler' is the PriorityClass of the hotswap reconciler, which the "
        "platform declares itself; name the tier something else",
        "platform.priorities[1].name: 'tpu-platform-controllers' is the PriorityClass of Kueue's and JobSet's "
        "controllers, which the platform declares itself; name the tier something else",
    ]


def test_wait_for_pods_ready_timeout_has_a_floor() -> None:
    found = problems(dev(lambda raw: raw.update(kueue={"waitForPodsReady": {"timeout": "30s"}})))
    assert found == [
        "platform.kueue.waitForPodsReady.timeout: '30s' is shorter than 5m: a multi-host TPU slice takes minutes to "
        "pull images and initialise, so Kueue would evict and requeue every workload before it could start; use "
        "10m or more (default 15m)"
    ]


def test_starvation_grace_must_leave_room_in_the_ready_timeout() -> None:
    def grace(raw: Raw) -> None:
        raw.setdefault("hotswap", {})["settings"] = {"starvationGrace": "6m"}
        raw["kueue"] = {"waitForPodsReady": {"timeout": "10m"}}

    (found,) = problems(dev(grace))
    assert found.startswith(
        "platform.hotswap.settings.starvationGrace: 360s is more than half of kueue.waitForPodsReady.timeout (10m)"
    )
    assert found.endswith("lower starvationGrace to 300s or less (default 60s), or raise the timeout")
    # Half exactly is allowed, and with the reconciler off there is nothing to check.
    parse_platform_config(dev(lambda raw: grace(raw) or raw["hotswap"]["settings"].update(starvationGrace="5m")))
    parse_platform_config(dev(lambda raw: grace(raw) or raw["hotswap"].update(enabled=False)))


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            lambda raw: raw["tpuPools"][0].update(capacity="spot"),
            "platform.tpuPools[0].capacity: expected a group of settings (`key: value` lines indented under it) "
            '(got "spot")',
        ),
        (
            lambda raw: raw["tpuPools"][0].update(name="Dev_2x2"),
            "platform.tpuPools[0].name: expected a name of lowercase letters, digits and `-`, starting with a letter "
            'and ending with a letter or digit, e.g. `tpu-dev` (got "Dev_2x2")',
        ),
        (
            lambda raw: raw.setdefault("hotswap", {}).update(settings={"maxHold": "soon"}),
            'platform.hotswap.settings.maxHold: expected a duration such as `90s`, `15m` or `1h30m` (got "soon")',
        ),
        (
            lambda raw: raw.update(region="useast5"),
            'platform.region: expected a GCP region, e.g. `us-east5` (got "useast5")',
        ),
    ],
)
def test_messages_speak_the_users_words(change: Callable[[Raw], object], expected: str) -> None:
    found = problems(dev(change))
    assert expected in found
    for jargon in ("timedelta", "instance of", "^[", "Input should be"):
        assert not any(jargon in p for p in found), (jargon, found)


def test_zone_hint_does_not_invent_a_zone() -> None:
    found = problems(dev(lambda raw: raw["tpuPools"][0].update(zone="europe-west4-a")))
    assert found == [
        "platform.tpuPools[0].zone: 'europe-west4-a' is not in region 'us-east5'; a TPU pool's zone must be in the "
        "cluster's region; the zones of region 'us-east5' with TPU v6e: us-east5-a, us-east5-b"
    ]


def test_field_mistakes_of_several_kinds_come_in_one_run() -> None:
    def four(raw: Raw) -> None:
        raw["systemPool"]["machine_type"] = raw["systemPool"].pop("machineType")
        raw["tpuPools"][0]["capacity"] = "spot"
        raw["kueue"] = {"waitForPodsReady": {"timeout": "30s"}}
        raw["priorities"] = [{"name": "hotswap-reconciler", "value": 1000, "description": "x"}]

    found = problems(dev(four))
    assert [p.split(":")[0] for p in found] == [
        "platform.systemPool.machine_type",
        "platform.tpuPools[0].capacity",
        "platform.kueue.waitForPodsReady.timeout",
        "platform.priorities[0].name",
    ]


def test_an_unknown_key_is_shown_as_written_with_the_setting_meant() -> None:
    assert problems(dev(lambda raw: raw.update(Region="us-east5"))) == [
        "platform.Region: unknown setting (check the spelling; settings are camelCase); did you mean `region`?"
    ]
    assert problems(dev(lambda raw: raw["systemPool"].update(machineTyp="x"))) == [
        "platform.systemPool.machineTyp: unknown setting (check the spelling; settings are camelCase); did you mean "
        "`machineType`?"
    ]
    # Nothing close: the settings allowed at that place, when few enough to list.
    assert problems(dev(lambda raw: raw["systemPool"].update(size=3))) == [
        "platform.systemPool.size: unknown setting (check the spelling; settings are camelCase); settings here: "
        "machineType, nodeCountPerZone, maxNodeCountPerZone, zones, diskSizeGb"
    ]
