"""The typed component inputs: generated from the pydantic models, never edited by hand, and accepted by them."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from pulumi.provider.experimental.component import ComponentProvider
from pydantic import BaseModel

from gke_tpu_priority.components import tpu_shapes
from gke_tpu_priority.components.config import ConfigError, PlatformConfig, parse_platform_config
from gke_tpu_priority.components.provider import PACKAGE_NAME, hosted_components
from gke_tpu_priority.components.workloads.jobset import TpuJobSetSpec
from testkit.mock_runtime import run_program
from testkit.platform import platform, stack_config, tpu_pool
from tools import component_types

TYPES = f"{PACKAGE_NAME}:index:"


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    return component_types.current_schema()


def test_generated_types_module_is_up_to_date() -> None:
    assert component_types.TYPES_MODULE.read_text() == component_types.generate(), (
        "components/schema_types.py is stale: run `python -m tools.component_types` and review the schema diff"
    )


def test_schema_snapshot_is_up_to_date() -> None:
    # Every change to the public contract shows up as a diff of components/schema.json in review.
    assert component_types.SCHEMA_FILE.read_text() == component_types.schema_text(), (
        "components/schema.json is stale: run `python -m tools.component_types` and review the diff"
    )


def _model_types(model: type[BaseModel], seen: dict[str, type[BaseModel]]) -> dict[str, type[BaseModel]]:
    seen[model.__name__] = model
    for info in model.model_fields.values():
        for arg in _leaf_types(info.annotation):
            if isinstance(arg, type) and issubclass(arg, BaseModel) and arg.__name__ not in seen:
                _model_types(arg, seen)
    return seen


def _leaf_types(typ: Any) -> list[Any]:
    import typing

    args = typing.get_args(typ)
    return [leaf for a in args for leaf in _leaf_types(a)] if args else [typ]


def test_every_setting_is_typed_and_described_with_the_models_text(schema: dict[str, Any]) -> None:
    models = _model_types(TpuJobSetSpec, _model_types(PlatformConfig, {}))
    assert len(models) > 20
    for name, model in models.items():
        props = schema["types"][TYPES + name]["properties"]
        assert set(props) == {info.alias for info in model.model_fields.values()}, name
        required = set(schema["types"][TYPES + name].get("required", []))
        for field, info in model.model_fields.items():
            prop = props[info.alias]
            assert prop["description"] == info.description, f"{name}.{field}"
            assert ("type" in prop) != ("$ref" in prop), f"{name}.{field}: {prop}"
            assert prop.get("type") != "object" or "additionalProperties" in prop, f"{name}.{field} is untyped"
            assert (info.alias in required) == info.is_required(), f"{name}.{field}"


def test_closed_value_sets_are_enums(schema: dict[str, Any]) -> None:
    def values(enum: str) -> list[str]:
        return [m["value"] for m in schema["types"][TYPES + enum]["enum"]]

    assert values("CapacityMode") == ["on-demand", "spot", "reservation", "flex-start"]
    assert values("Topology") == list(tpu_shapes.TOPOLOGIES)
    assert values("ClusterMode") == ["create", "existing"]
    pool = schema["types"][TYPES + "TpuPoolGroup"]["properties"]
    assert pool["topology"]["$ref"] == f"#/types/{TYPES}Topology"
    assert pool["machineType"]["$ref"] == f"#/types/{TYPES}TpuMachineType"
    # The system pool's machine type is any GCE machine type, not a TPU one.
    assert schema["types"][TYPES + "SystemPool"]["properties"]["machineType"]["type"] == "string"


def test_only_pass_through_values_accept_outputs(schema: dict[str, Any]) -> None:
    accepting = {
        f"{name.removeprefix(TYPES)}.{prop}"
        for name, typ in schema["types"].items()
        for prop, spec in typ.get("properties", {}).items()
        if not spec.get("plain")
    }
    assert accepting == {"PlatformConfig.project", "ClusterSettings.name", "NetworkConfig.subnetwork"}


def test_components_take_typed_inputs(schema: dict[str, Any]) -> None:
    for token, resource in schema["resources"].items():
        (prop,) = resource["inputProperties"].values()
        expected = {":TpuJobSet": "TpuJobSetSpec", ":TpuFleet": "FleetConfig"}.get(
            token[token.rindex(":") :], "PlatformConfig"
        )
        assert prop["$ref"] == f"#/types/{TYPES}{expected}", token


def test_inputs_from_another_language_reach_the_model_unchanged() -> None:
    """What the provider hands a component (snake_case keys, enum members) validates to the same config."""
    provider = ComponentProvider(hosted_components(), PACKAGE_NAME, None, "0.1.0")
    raw = platform(
        tpu_pool("resv", capacity={"mode": "reservation", "reservation": {"name": "r1"}}),
        cluster={"name": "tpu", "releaseChannel": "STABLE"},
        hotswap={"settings": {"unhealthyGrace": "20s"}},
        queues={"flavors": [{"name": "v6e", "topology": "4x4"}]},
    )
    mapped = provider.map_inputs({"platform": raw}, provider._component_defs["TpuPlatform"])
    assert "tpu_pools" in mapped["platform"] and "release_channel" in mapped["platform"]["cluster"]
    # Free-form maps keep their keys (the reconciler's own camelCase schema).
    assert mapped["platform"]["hotswap"]["settings"] == {"unhealthyGrace": "20s"}
    assert parse_platform_config(mapped["platform"]) == parse_platform_config(raw)


def _program(tmp_path: Path, body: str) -> Path:
    (tmp_path / "__main__.py").write_text(textwrap.dedent(body))
    return tmp_path


def test_an_output_is_validated_once_known_with_the_models_message(tmp_path: Path) -> None:
    root = _program(
        tmp_path,
        """
        import pulumi
        from gke_tpu_priority.components.platform import TpuPlatform

        config = pulumi.Config("gke-tpu-priority").require_object("platform")
        project = pulumi.Output.from_input(config["project"]).apply(lambda p: p)  # as if from another resource
        TpuPlatform("p", {"platform": {**config, "project": project}})
        """,
    )
    good = run_program("outputs", stack_config(platform()), root=root)
    (cluster,) = [r for r in good.resources if r.type == "gcp:container/cluster:Cluster"]
    assert cluster.inputs["project"] == "my-tpu-project"
    assert cluster.inputs["workloadIdentityConfig"] == {"workloadPool": "my-tpu-project.svc.id.goog"}
    bad = stack_config(platform(project="Not_A_Project"))
    bad["gcp:project"] = "x"
    with pytest.raises(Exception, match="project: expected a GCP project id"):
        run_program("outputs", bad, root=root)
    with pytest.raises(ConfigError, match="project: expected a GCP project id"):
        parse_platform_config(platform(project="Not_A_Project"))


def test_a_created_clusters_name_must_be_plain() -> None:
    import asyncio

    import pulumi

    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        raw = platform()
        raw["cluster"] = {"name": pulumi.Output.from_input("tpu")}
        with pytest.raises(ConfigError, match=r"cluster.name: an output is accepted only with `mode: existing`"):
            parse_platform_config(raw)
        existing = platform(hotswap={"enabled": False})
        existing["cluster"] = {"mode": "existing", "name": pulumi.Output.from_input("tpu")}
        assert isinstance(parse_platform_config(existing).cluster.name, pulumi.Output)
    finally:
        asyncio.set_event_loop(None)
        loop.close()


def test_schema_json_is_valid_json_with_every_component() -> None:
    doc = json.loads(component_types.SCHEMA_FILE.read_text())
    assert set(doc["resources"]) == {f"{TYPES}{c.__name__}" for c in hosted_components()}
