"""The offline preview contract: build/<stack>/resources.json and manifests.yaml, and clean failure."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from gke_tpu_priority.components.config.fleet import FLEET_CONFIG_PATH, parse_fleet_config
from testkit import mock_runtime
from testkit.mock_runtime import load_stack_config
from testkit.resources import SECRET_SIG
from testkit.stacks import CREATED_CLUSTER_STACKS, FLEET_STACKS, STACKS
from tests.test_fleet import fleet_cluster_objects
from tools import preview
from tools.fleet_preview import CLUSTER_ANNOTATION, REDACTED


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


# --- a fleet stack: every cluster's objects, and no token in the clear ------------------------------------

FLEET_TOKEN = "sentinel-sa-token-7c1f0e"  # what the token controller would write into each worker's token Secret


def _row(out: str, *cells: str) -> list[str]:
    (line,) = [ln for ln in out.splitlines() if ln.split()[: len(cells)] == list(cells)]
    return line.split()


@pytest.mark.parametrize("stack", FLEET_STACKS)
def test_fleet_preview_prints_the_fleet_and_writes_every_cluster_without_secrets(
    stack: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    real = mock_runtime._fake_outputs

    def with_token(typ: str, name: str, inputs: dict[str, Any]) -> dict[str, Any]:
        out = real(typ, name, inputs)
        if typ == "kubernetes:core/v1:Secret" and name.endswith("-read"):  # the live token Secret, read back
            out["data"] = {"token": base64.b64encode(FLEET_TOKEN.encode()).decode()}
        return out

    monkeypatch.setattr(mock_runtime, "_fake_outputs", with_token)
    # The token does reach the kubeconfig Secrets' inputs (so the redaction below is what keeps it out) ...
    run = mock_runtime.run_program(stack)
    kubeconfigs = [r for r in run.resources if r.type == "kubernetes:core/v1:Secret" and "-mk-kubeconfig-" in r.name]
    assert kubeconfigs and all(FLEET_TOKEN in json.dumps(r.inputs) for r in kubeconfigs)
    assert all(SECRET_SIG in r.inputs["stringData"] for r in kubeconfigs)

    assert preview.main(["--stack", stack, "--build-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    config = parse_fleet_config(load_stack_config(stack)[FLEET_CONFIG_PATH])
    m = config.manager
    assert _row(out, "manager", "manager", m.name)[3] == m.region
    for worker in config.workers:
        p = worker.platform
        row = _row(out, "worker", worker.name, p.cluster.name)
        assert row[3] == p.region
        assert row[-2:] == [str(sum(g.slices for g in p.tpu_pools)), str(sum(g.chips for g in p.tpu_pools))]
    order = " > ".join(w.name for w in config.workers)
    assert f"order: {order}" in out
    check = _row(out, "multikueue")
    assert check[1] == "tpu-training"  # the manager ClusterQueue that carries the check
    assert check[2] == ",".join(w.name for w in config.workers)

    # Every object of every cluster is written, each naming its cluster.
    written = list(yaml.safe_load_all((tmp_path / stack / "manifests.yaml").read_text()))
    expected = {c: len(objs) for c, objs in fleet_cluster_objects(stack).items()}
    per_cluster: dict[str, int] = {}
    for obj in written:
        cluster = obj["metadata"]["annotations"][CLUSTER_ANNOTATION]
        per_cluster[cluster] = per_cluster.get(cluster, 0) + 1
    assert per_cluster == expected and set(expected) == {"manager", *(w.name for w in config.workers)}
    section = out.split("Kubernetes objects per cluster\n", 1)[1].split("\n\n", 1)[0]
    assert {_row(section, c)[0]: int(_row(section, c)[1]) for c in expected} == expected
    secrets = [o for o in written if o["kind"] == "Secret" and o["metadata"]["name"].startswith("multikueue-")]
    assert {s["metadata"]["name"] for s in secrets} >= {f"multikueue-{w.name}" for w in config.workers}
    for secret in secrets:
        if secret["type"] == "Opaque":
            assert secret["stringData"] == REDACTED
    doc = json.loads((tmp_path / stack / "resources.json").read_text())
    assert len(doc["resources"]) == len(run.resources)

    # ... and never reaches the preview's files or output, in clear or base64.
    encoded = base64.b64encode(FLEET_TOKEN.encode()).decode()
    texts = [out] + [f.read_text() for f in (tmp_path / stack).iterdir()]
    assert all(FLEET_TOKEN not in t and encoded not in t for t in texts)
