"""The cross-language contract: the schema Pulumi generates for the components (what `pulumi package add` sees)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pulumi.provider.experimental.component import ComponentProvider

from gke_tpu_priority.components.provider import PACKAGE_NAME, hosted_components


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    provider = ComponentProvider(hosted_components(), PACKAGE_NAME, None, "0.1.0")
    raw = provider.schema
    return json.loads(raw) if isinstance(raw, str) else dict(raw)


def test_every_component_is_served_under_its_class_name(schema: dict[str, Any]) -> None:
    tokens = set(schema["resources"])
    assert tokens == {f"{PACKAGE_NAME}:index:{c.__name__}" for c in hosted_components()}
    for component in hosted_components():
        assert getattr(component, "__module__", "").startswith("gke_tpu_priority.components.")


def test_platform_config_is_one_object_input(schema: dict[str, Any]) -> None:
    for token, resource in schema["resources"].items():
        assert resource["isComponent"] is True
        if token.endswith(":TpuJobSet"):
            assert set(resource["inputProperties"]) == {"jobset"}
        elif token.endswith(":TpuFleet"):
            assert set(resource["inputProperties"]) == {"fleet"}
            assert resource["inputProperties"]["fleet"]["description"].startswith("The fleet settings")
        else:
            assert set(resource["inputProperties"]) == {"platform"}, token
            assert resource["inputProperties"]["platform"]["description"].startswith("The platform settings")


def test_cluster_outputs_are_described(schema: dict[str, Any]) -> None:
    cluster = schema["resources"][f"{PACKAGE_NAME}:index:TpuCluster"]
    assert set(cluster["properties"]) == {
        "clusterName",
        "endpoint",
        "location",
        "kubeconfig",
        "systemPoolName",
        "tpuNodePoolNames",
    }
    assert all(p.get("description") for p in cluster["properties"].values())


def test_platform_exposes_the_stack_outputs(schema: dict[str, Any]) -> None:
    platform = schema["resources"][f"{PACKAGE_NAME}:index:TpuPlatform"]
    assert set(platform["properties"]) == {
        "clusterName",
        "kubeconfig",
        "endpoint",
        "location",
        "priorityTiers",
        "clusterQueues",
        "localQueues",
    }


def test_plugin_requirements_are_the_package_runtime_dependencies() -> None:
    """`pulumi package add` installs components/requirements.txt, not pyproject: a module missing there fails at
    import in every other language's program, which no test of this virtualenv would notice."""
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    declared = tomllib.loads((root / "pyproject.toml").read_text())["project"]["dependencies"]
    lines = (root / "components" / "requirements.txt").read_text().splitlines()
    plugin = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    assert sorted(plugin) == sorted(declared)


def test_the_plugin_entry_point_runs_the_checkout_without_the_package_installed(tmp_path: Any) -> None:
    """The host runs `python components/` in a virtualenv of components/requirements.txt only: this package is not
    installed there, and the folder it puts on sys.path holds a platform.py beside the standard library's."""
    import subprocess
    import sys
    import sysconfig
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    # -S: no site initialisation, so neither the editable install's import hook nor its .pth file is active.
    run = subprocess.run(
        [sys.executable, "-S", str(root / "components")],
        cwd=tmp_path,
        env={"PYTHONPATH": sysconfig.get_paths()["purelib"], "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    # Past every import, the provider host asks for the engine's address the Pulumi CLI passes it.
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr[-2000:]
    assert "the following arguments are required: engine" in run.stderr
