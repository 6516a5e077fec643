"""The offline preview contract: build/<stack>/resources.json and manifests.yaml, and clean failure."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.conftest import CREATED_CLUSTER_STACKS, STACKS
from tools import preview


@pytest.mark.parametrize("stack", STACKS)
def test_preview_writes_complete_contract_files(stack: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert preview.main(["--stack", stack, "--build-dir", str(tmp_path)]) == 0
    doc = json.loads((tmp_path / stack / "resources.json").read_text())
    assert doc["stack"] == stack and doc["project"] == "gke-tpu-priority"
    assert set(doc["outputs"]) >= {"clusterName", "endpoint", "location", "kubeconfig"}
    types = {r["type"] for r in doc["resources"]}
    if stack in CREATED_CLUSTER_STACKS:
        assert "tpuNodePools" in doc["outputs"]
        assert {"gcp:container/cluster:Cluster", "gcp:container/nodePool:NodePool"} <= types
    assert "pulumi:providers:kubernetes" in types
    urns = {r["urn"] for r in doc["resources"]}
    for res in doc["resources"]:
        assert set(res) >= {"urn", "type", "name", "parent", "inputs"}
        assert res["urn"].endswith(f"::{res['name']}") and res["urn"].startswith(f"urn:pulumi:{stack}::")
        if res["type"] != "gke-tpu-priority:index:TpuPlatform":
            assert res["parent"] in urns
    manifests = list(yaml.safe_load_all((tmp_path / stack / "manifests.yaml").read_text()))
    for obj in manifests:
        assert obj["apiVersion"] and obj["kind"] and obj["metadata"]
    out = capsys.readouterr().out
    assert "TPU v6e capacity" in out and "TOTAL" in out


def test_prod_plan_shows_capacity_per_pool_group(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert preview.main(["--stack", "prod", "--build-dir", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    resv = next(line.split() for line in lines if line.startswith("resv-4x4"))
    assert resv == ["resv-4x4", "4x4", "ct6e-standard-4t", "reservation", "us-east5-b", "8", "8", "4", "32", "128"]
    total = next(line.split() for line in lines if line.startswith("TOTAL"))
    assert total == ["TOTAL", "12", "12", "48", "192"]


def test_preview_is_deterministic(tmp_path: Path) -> None:
    assert preview.main(["--stack", "prod", "--build-dir", str(tmp_path / "a")]) == 0
    assert preview.main(["--stack", "prod", "--build-dir", str(tmp_path / "b")]) == 0
    for name in ("resources.json", "manifests.yaml"):
        assert (tmp_path / "a/prod" / name).read_bytes() == (tmp_path / "b/prod" / name).read_bytes()


def test_invalid_stack_exits_nonzero_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "project"
    (root / "stacks").mkdir(parents=True)
    bad = {
        "config": {
            "gke-tpu-priority:platform": {
                "project": "my-proj-1",
                "region": "us-east5",
                "tpuPools": [
                    {"name": "x", "topology": "4x5", "slices": 1, "zone": "us-east5-b", "capacity": {"mode": "spot"}}
                ],
            }
        }
    }
    (root / "stacks" / "Pulumi.broken.yaml").write_text(yaml.safe_dump(bad))
    monkeypatch.setattr(preview, "load_stack_config", lambda stack: bad["config"])
    build = tmp_path / "build"
    assert preview.main(["--stack", "broken", "--build-dir", str(build)]) == 2
    err = capsys.readouterr().err
    assert "platform.tpuPools[0].topology: '4x5' is not a TPU v6e topology" in err
    assert not build.exists()


def test_unknown_stack_names_the_known_ones(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert preview.main(["--stack", "nope", "--build-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "no stack file" in err and "known stacks:" in err and "dev" in err and "prod" in err


def test_plan_summarises_the_reconciler(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert preview.main(["--stack", "prod", "--build-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "Hotswap reconciler: mode reconciler, 2 replica(s), namespace hotswap-system" in out
    assert "built from hotswap/Dockerfile" in out
