"""Stack configuration validation: every rule, valid and invalid, plus generated configs."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gke_tpu_priority.components import tpu_shapes
from gke_tpu_priority.components.config import CapacityMode, ConfigError, parse_platform_config
from testkit.platform import platform, tpu_pool


def problems_of(raw: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_platform_config(raw)
    return info.value.problems


def test_minimal_config_is_valid_with_secure_defaults() -> None:
    config = parse_platform_config(platform())
    assert config.cluster.private_nodes is True
    assert config.cluster.release_channel.value == "REGULAR"
    assert config.protect is False and config.deletion_protection is False
    assert config.system_zones == ["us-east5-b"]
    assert config.tpu_pools[0].capacity.mode is CapacityMode.SPOT


def test_protect_drives_deletion_protection_unless_overridden() -> None:
    assert parse_platform_config(platform(protect=True)).deletion_protection is True
    cfg = parse_platform_config(platform(protect=True, cluster={"deletionProtection": False}))
    assert cfg.deletion_protection is False


@pytest.mark.parametrize(
    ("pool", "expected"),
    [
        (
            tpu_pool(topology="3x3"),
            "platform.tpuPools[0].topology: '3x3' is not a TPU v6e topology; allowed: 1x1",
        ),
        (
            tpu_pool(topology="2x4"),
            "platform.tpuPools[0].machineType: topology '2x4' needs an explicit machineType",
        ),
        (
            tpu_pool(topology="4x4", machineType="ct6e-standard-8t"),
            "platform.tpuPools[0].machineType: machineType 'ct6e-standard-8t' does not fit topology '4x4'",
        ),
        (
            tpu_pool(slices=0),
            "platform.tpuPools[0].slices: must be at least 1 (got 0)",
        ),
        (tpu_pool(zone="us-west1-c"), "platform.tpuPools[0].zone: 'us-west1-c' is not in region 'us-east5'"),
        (tpu_pool(zone="useast5b"), "platform.tpuPools[0].zone: 'useast5b' is not a zone name"),
        (
            tpu_pool(capacity={"mode": "reservation"}),
            "platform.tpuPools[0].capacity.reservation: mode `reservation` needs `reservation.name`",
        ),
        (
            tpu_pool(capacity={"mode": "spot", "reservation": {"name": "r1"}}),
            "platform.tpuPools[0].capacity.reservation: only valid with mode `reservation` (mode is `spot`)",
        ),
        (
            tpu_pool(capacity={"mode": "on-demand", "maxRunDuration": "3600s"}),
            "platform.tpuPools[0].capacity.maxRunDuration: only valid with mode `flex-start`",
        ),
        (
            tpu_pool(capacity={"mode": "cheap"}),
            "platform.tpuPools[0].capacity.mode: expected one of 'on-demand'",
        ),
        (tpu_pool(name="Train_Pool"), "platform.tpuPools[0].name: expected a name of lowercase letters"),
        (tpu_pool(name="a" * 39, slices=12), "would exceed GKE's 40 characters"),
        (tpu_pool(labels={"cloud.google.com/gke-nodepool": "x"}), "is reserved by GKE"),
        (tpu_pool(typo=True), "platform.tpuPools[0].typo: unknown setting"),
        (tpu_pool(name="system", topology="2x2"), "'system' is reserved for the system node pool"),
    ],
)
def test_invalid_pool_is_rejected_with_path_value_and_allowed(pool: dict[str, Any], expected: str) -> None:
    problems = problems_of(platform(pool))
    assert any(expected in p for p in problems), problems


def test_duplicate_pool_names() -> None:
    problems = problems_of(platform(tpu_pool("a"), tpu_pool("a", topology="2x2")))
    assert problems == [
        "platform.tpuPools[1].name: 'a' is already used by tpuPools[0]; pool group names must be unique"
    ]


def test_node_pool_name_collision_between_groups() -> None:
    # Group "a" with slices makes a-0, a-1; a single-host group literally named "a-1" collides.
    problems = problems_of(platform(tpu_pool("a", slices=2), tpu_pool("a-1", topology="2x2")))
    assert any("node pool 'a-1' collides with group 'a'" in p for p in problems)


def test_every_problem_is_reported_at_once() -> None:
    raw = platform(
        tpu_pool("a", topology="3x3", slices=0),
        tpu_pool("b", topology="2x4", capacity={"mode": "spot", "reservation": {"name": "r"}}, bogus=1),
    )
    problems = problems_of(raw)
    assert len(problems) == 5, problems
    assert {p.split(":")[0] for p in problems} == {
        "platform.tpuPools[0].topology",
        "platform.tpuPools[0].slices",
        "platform.tpuPools[1].machineType",
        "platform.tpuPools[1].capacity.reservation",
        "platform.tpuPools[1].bogus",
    }


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"project": "X"}, "platform.project: expected a GCP project id"),
        ({"region": "us east"}, "platform.region: expected a GCP region, e.g. `us-east5`"),
        ({"tpuPools": []}, "platform.tpuPools: expected at least 1 item (got [])"),
        (
            {"cluster": {"minMasterVersion": "1.30.5-gke.100"}},
            "is too old for TPU v6e; use 1.31.2-gke.1115000",
        ),
        ({"cluster": {"minMasterVersion": "latest"}}, "is not a GKE version"),
        ({"cluster": {"masterIpv4CidrBlock": "172.16.0.0/24"}}, "must be a /28"),
        (
            {"cluster": {"controlPlaneAccess": "private", "privateNodes": False}},
            "requires `privateNodes: true`",
        ),
        (
            {"cluster": {"controlPlaneAccess": "dns", "authorizedNetworks": [{"cidrBlock": "10.0.0.0/8"}]}},
            "unused with `controlPlaneAccess: dns`",
        ),
        ({"cluster": {"authorizedNetworks": [{"cidrBlock": "10.0.0.1/8"}]}}, "is not a valid CIDR block"),
        (
            {"network": {"podsCidr": "10.10.0.0/16"}},
            "platform.network.podsCidr: 10.10.0.0/16 overlaps subnetCidr",
        ),
        (
            {"network": {"mode": "existing"}},
            "platform.network.subnetwork: mode `existing` needs the subnet name",
        ),
        ({"network": {"subnetwork": "x"}}, "only valid with mode `existing`"),
        ({"systemPool": {"nodeCountPerZone": 3, "maxNodeCountPerZone": 2}}, "raise it to at least 3"),
        (
            {"systemPool": {"zones": ["europe-west4-a"]}},
            "platform.systemPool.zones[0]: 'europe-west4-a' is not in",
        ),
        ({"network": {"name": "ok", "extra": 1}}, "platform.network.extra: unknown setting"),
    ],
)
def test_invalid_platform_settings(overrides: dict[str, Any], expected: str) -> None:
    problems = problems_of(platform(**overrides))
    assert any(expected in p for p in problems), problems


def test_the_error_message_lists_each_problem_on_its_own_line() -> None:
    with pytest.raises(ConfigError) as info:
        parse_platform_config(platform(tpu_pool(slices=0), tpu_pool("b", topology="9x9")))
    text = str(info.value)
    assert text.startswith("invalid stack configuration 'platform' (2 problem(s)):")
    assert "\n  - platform.tpuPools[0].slices" in text and "\n  - platform.tpuPools[1].topology" in text


def test_non_mapping_config_is_rejected() -> None:
    with pytest.raises(ConfigError, match="expected an object"):
        parse_platform_config(["not", "a", "mapping"])


def test_existing_network_and_reservation_from_another_project() -> None:
    cfg = parse_platform_config(
        platform(
            tpu_pool(capacity={"mode": "reservation", "reservation": {"name": "shared", "project": "capacity-prj"}}),
            network={"mode": "existing", "name": "corp-vpc", "subnetwork": "corp-us-east5"},
        )
    )
    assert cfg.tpu_pools[0].capacity.reservation is not None
    assert cfg.tpu_pools[0].capacity.reservation.project == "capacity-prj"


# --- generated configs -------------------------------------------------------------------------------------

shapes = st.sampled_from(tpu_shapes.SHAPES)
modes = st.sampled_from(["on-demand", "spot", "reservation", "flex-start"])


@st.composite
def generated_pools(draw: st.DrawFn) -> list[dict[str, Any]]:
    count = draw(st.integers(min_value=1, max_value=4))
    pools = []
    for i in range(count):
        shape = draw(shapes)
        mode = draw(modes)
        capacity: dict[str, Any] = {"mode": mode}
        if mode == "reservation":
            capacity["reservation"] = {"name": f"resv-{i}"}
        pool = tpu_pool(
            f"g{i}",
            topology=shape.topology,
            slices=draw(st.integers(1, 16)),
            capacity=capacity,
            zone=draw(st.sampled_from(["us-east5-a", "us-east5-b"])),
        )
        if draw(st.booleans()) or len(tpu_shapes.shapes_for(shape.topology)) > 1:
            pool["machineType"] = shape.machine_type
        pools.append(pool)
    return pools


@settings(max_examples=150, deadline=None)
@given(generated_pools())
def test_generated_valid_configs_parse_and_keep_their_capacity(pools: list[dict[str, Any]]) -> None:
    cfg = parse_platform_config(platform(*pools))
    for raw, group in zip(pools, cfg.tpu_pools, strict=True):
        shape = group.shape
        assert shape.topology == raw["topology"]
        assert group.chips == shape.chips * raw["slices"]
        assert group.nodes == shape.vms * raw["slices"]
        expected_pools = raw["slices"] if shape.multi_host else 1
        assert len(group.node_pool_names()) == expected_pools


@settings(max_examples=100, deadline=None)
@given(generated_pools(), st.sampled_from(["slices", "zone", "topology", "mode"]), st.data())
def test_generated_single_breakage_is_reported_at_its_path(
    pools: list[dict[str, Any]], breakage: str, data: st.DataObject
) -> None:
    index = data.draw(st.integers(0, len(pools) - 1))
    pool = pools[index]
    if breakage == "slices":
        pool["slices"] = data.draw(st.integers(-5, 0))
        field = "slices"
    elif breakage == "zone":
        pool["zone"] = "europe-west4-a"
        field = "zone"
    elif breakage == "topology":
        pool["topology"] = data.draw(st.sampled_from(["3x3", "4x16", "1x2", "16x32"]))
        field = "topology"
    else:
        pool["capacity"] = {"mode": "reservation"}
        field = "capacity.reservation"
    problems = problems_of(platform(*pools))
    assert any(p.startswith(f"platform.tpuPools[{index}].{field}") for p in problems), problems
