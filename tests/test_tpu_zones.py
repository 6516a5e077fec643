"""TPU pool zones are checked against the zones Google documents for TPU v6e: a zone that does
not exist or does not offer v6e is refused with the field, the value and the zones allowed in that region (or all),
and `additionalTpuZones` admits a zone the table does not know yet."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from gke_tpu_priority.components.config import ConfigError, parse_platform_config
from gke_tpu_priority.components.config.zones import V6E_ZONES, region_of, zone_problem
from testkit.mock_runtime import PROJECT_ROOT, load_stack_config

Raw = dict[str, Any]


def dev(change: Callable[[Raw], object]) -> Raw:
    raw = copy.deepcopy(load_stack_config("dev")["gke-tpu-priority:platform"])
    change(raw)
    return raw


def problems(raw: Raw) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_platform_config(raw, stack_file=True)
    return caught.value.problems


def zone(value: str, region: str | None = None, extra: list[str] | None = None) -> Callable[[Raw], None]:
    def change(raw: Raw) -> None:
        if region is not None:
            raw["region"] = region
        for pool in raw["tpuPools"]:
            pool["zone"] = value
        if extra is not None:
            raw["additionalTpuZones"] = extra

    return change


def test_the_table_is_the_documented_v6e_zones() -> None:
    assert V6E_ZONES == ("europe-west4-a", "us-central1-b", "us-east1-d", "us-east5-a", "us-east5-b")
    assert all(z.count("-") == 2 for z in V6E_ZONES)
    assert region_of("us-east5-b") == "us-east5"


def test_a_zone_without_v6e_names_the_zones_of_its_region_that_have_it() -> None:
    (first, *rest) = problems(dev(zone("us-east5-c")))
    assert first == (
        "platform.tpuPools[0].zone: 'us-east5-c' is not a zone where Google documents TPU v6e "
        "(cloud.google.com/tpu/docs/regions-zones); the zones of region 'us-east5' with TPU v6e: us-east5-a, "
        "us-east5-b. If your project has v6e capacity in 'us-east5-c' (a newly launched, single-tenant or AI "
        "zone), add it to `platform.additionalTpuZones`"
    )
    assert len(rest) == len(load_stack_config("dev")["gke-tpu-priority:platform"]["tpuPools"]) - 1  # every pool


def test_a_zone_that_does_not_exist_in_a_region_without_v6e_lists_every_documented_zone() -> None:
    (message, *_) = problems(dev(zone("us-west9-z", region="us-west9")))
    assert message.startswith("platform.tpuPools[0].zone: 'us-west9-z' is not a zone where Google documents TPU v6e")
    assert (
        "region 'us-west9' has no zone with TPU v6e in the table; the zones with it: " + ", ".join(sorted(V6E_ZONES))
        in message
    )


def test_no_hint_invents_a_zone() -> None:
    (message, *_) = problems(dev(zone("us-west1-c", region="us-west1")))
    assert "us-west1-b" not in message and "-b` that offers" not in message
    assert zone_problem(".zone", "us-east5-b", "us-east5") is None


def test_additional_zones_admit_a_zone_the_table_does_not_know() -> None:
    config = parse_platform_config(dev(zone("us-east5-c", extra=["us-east5-c"])), stack_file=True)
    assert {g.zone for g in config.tpu_pools} == {"us-east5-c"}
    assert config.additional_tpu_zones == ["us-east5-c"]


def test_additional_zones_must_be_zones_of_the_region() -> None:
    found = problems(dev(zone("us-east5-b", extra=["europe-west4-b", "us-east5"])))
    assert found == [
        "platform.additionalTpuZones[0]: 'europe-west4-b' is not a zone of region 'us-east5' "
        "(expected `us-east5-<zone letter>`, e.g. `us-east5-a`)",
        "platform.additionalTpuZones[1]: 'us-east5' is not a zone of region 'us-east5' "
        "(expected `us-east5-<zone letter>`, e.g. `us-east5-a`)",
    ]


def test_the_region_check_still_comes_first() -> None:
    (message, *_) = problems(dev(zone("europe-west4-a")))
    assert message == (
        "platform.tpuPools[0].zone: 'europe-west4-a' is not in region 'us-east5'; a TPU pool's zone must be in the "
        "cluster's region; the zones of region 'us-east5' with TPU v6e: us-east5-a, us-east5-b"
    )


def test_every_stack_zone_is_documented_or_named() -> None:
    stacks = sorted(p.stem.removeprefix("Pulumi.") for p in (PROJECT_ROOT / "stacks").glob("Pulumi.*.yaml"))
    checked = 0
    for stack in stacks:
        raw = load_stack_config(stack).get("gke-tpu-priority:platform")
        if raw is not None:
            parse_platform_config(raw, stack_file=True)
            checked += 1
    assert checked >= 4
