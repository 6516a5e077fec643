"""`cluster.mode: existing`: no GCP resource, a complete in-cluster install through one provider, strict validation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gke_tpu_priority.components.config import ConfigError, parse_platform_config
from testkit.mock_runtime import run_program
from testkit.platform import platform, stack_config, tpu_pool
from testkit.stacks import stack_run
from tools import preview
from tools.manifests import kubernetes_objects, unwrap_secrets

IMAGE = "us-docker.pkg.dev/p/r/hotswap@sha256:" + "a" * 64


def existing(**overrides: Any) -> dict[str, Any]:
    cluster = {"mode": "existing", "name": "xpk-cluster", **overrides.pop("cluster", {})}
    hotswap = {"image": IMAGE, **overrides.pop("hotswap", {})}
    return platform(cluster=cluster, hotswap=hotswap, **overrides)


def problems(raw: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as info:
        parse_platform_config(raw)
    return str(info.value)


def test_existing_stack_creates_no_gcp_resource_and_installs_everything_in_cluster() -> None:
    run = stack_run("existing")
    types = {r.type for r in run.resources}
    assert not [t for t in types if t.startswith(("gcp:", "docker-build:", "pulumi:providers:gcp"))]
    (provider,) = [r for r in run.resources if r.type == "pulumi:providers:kubernetes"]
    kubeconfig = json.loads(unwrap_secrets(provider.inputs["kubeconfig"]))
    # The endpoint and CA come from the GKE lookup of the named cluster, not from a created one.
    assert kubeconfig["clusters"][0]["cluster"]["server"] == "https://198.51.100.20"
    assert provider.inputs["clusterIdentifier"] == "projects/my-tpu-prod/locations/us-east5/clusters/xpk-v6e-cluster"
    for res in run.resources:
        if res.custom and res.type.startswith("kubernetes:"):
            assert res.provider is not None and res.provider.startswith(provider.urn), res.urn
    objects = kubernetes_objects(run.resources)
    kinds: dict[str, set[str]] = {}
    for obj in objects:
        kinds.setdefault(obj["kind"], set()).add(obj["metadata"]["name"])
    assert {"training-high", "training-low", "best-effort"} <= kinds["PriorityClass"]
    assert kinds["WorkloadPriorityClass"] == {"training-high", "training-low", "best-effort"}
    assert kinds["ResourceFlavor"] == {"v6e-2x2", "v6e-4x4"}
    assert kinds["ClusterQueue"] == {"tpu-training"} and kinds["LocalQueue"] == {"training"}
    charts = {r.inputs["chart"] for r in run.resources if r.type == "kubernetes:helm.sh/v4:Chart"}
    assert charts == {"oci://registry.k8s.io/kueue/charts/kueue", "oci://registry.k8s.io/jobset/charts/jobset"}
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    assert pod["containers"][0]["image"].startswith("us-docker.pkg.dev/my-tpu-prod/platform/hotswap-reconciler")
    assert pod["nodeSelector"] == {"cloud.google.com/gke-nodepool": "cpu-np"}
    (cq,) = [o for o in objects if o["kind"] == "ClusterQueue"]
    flavors = [f for g in cq["spec"]["resourceGroups"] for f in g["flavors"]]
    quotas = {f["name"]: int(f["resources"][0]["nominalQuota"]) for f in flavors}
    assert quotas == {"v6e-2x2": 16, "v6e-4x4": 64}  # chips of the described pools
    assert set(run.outputs) >= {"clusterName", "endpoint", "location", "kubeconfig", "clusterQueues"}
    assert "tpuNodePools" not in run.outputs


def test_preview_says_the_cluster_is_existing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert preview.main(["--stack", "existing", "--build-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "Existing cluster (xpk-v6e-cluster in us-east5): 0 GCP resources" in out


def test_controllers_follow_the_system_node_selector() -> None:
    charts = {r.name: r.inputs for r in stack_run("existing").resources if r.type == "kubernetes:helm.sh/v4:Chart"}
    assert charts["existing-kueue-jobset"]["values"]["controller"]["nodeSelector"] == {
        "cloud.google.com/gke-nodepool": "cpu-np"
    }
    kueue = charts["existing-kueue-kueue"]["values"]["controllerManager"]
    assert kueue["nodeSelector"] == {"cloud.google.com/gke-nodepool": "cpu-np"}


def test_kubeconfig_context_uses_the_local_kubeconfig_and_no_lookup() -> None:
    run = run_program("ctx", stack_config(existing(cluster={"kubeconfigContext": "gke_p_us-east5_xpk"})))
    (provider,) = [r for r in run.resources if r.type == "pulumi:providers:kubernetes"]
    assert provider.inputs["context"] == "gke_p_us-east5_xpk"
    assert "kubeconfig" not in provider.inputs
    assert not [r for r in run.resources if r.type.startswith("gcp:")]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"cluster": {"releaseChannel": "RAPID"}}, "platform.cluster.releaseChannel: only applies to a cluster"),
        (
            {"cluster": {"maintenance": {"recurrence": "FREQ=DAILY"}}},
            "platform.cluster.maintenance: only applies to a cluster",
        ),
        ({"network": {"name": "vpc"}}, "platform.network: only applies to resources this package creates"),
        ({"systemPool": {"machineType": "n2-standard-8"}}, "platform.systemPool: only applies"),
        ({"labels": {"env": "x"}}, "platform.labels: only applies"),
        ({"tpuPools": [tpu_pool(scaleToZero=True)]}, "platform.tpuPools[0].scaleToZero: only applies to node pools"),
        ({"tpuPools": [tpu_pool(taints=[{"key": "a", "effect": "NO_SCHEDULE"}])]}, "platform.tpuPools[0].taints"),
        ({"hotswap": {"image": None}}, "platform.hotswap.image: required with `cluster.mode: existing`"),
        ({"cluster": {"location": "europe-west4"}}, "platform.cluster.location: 'europe-west4' is not in region"),
        (
            {"tpuPools": [tpu_pool("a"), tpu_pool("b", capacity={"mode": "on-demand"})]},
            "flavor 'v6e-4x4-on-demand' would select the node label 'gke-tpu-priority.io/capacity'",
        ),
    ],
)
def test_existing_mode_refuses_settings_of_a_created_cluster(overrides: dict[str, Any], message: str) -> None:
    assert message in problems(existing(**overrides))


def test_existing_mode_without_reconciler_needs_no_image() -> None:
    config = parse_platform_config(existing(hotswap={"image": None, "enabled": False}))
    assert config.cluster.is_existing() and config.hotswap.image is None


@pytest.mark.parametrize("field", ["location", "kubeconfigContext", "systemNodeSelector"])
def test_create_mode_refuses_existing_only_settings(field: str) -> None:
    value: Any = {"a": "b"} if field == "systemNodeSelector" else "us-east5"
    assert f"platform.cluster.{field}: only valid with `mode: existing`" in problems(platform(cluster={field: value}))


def test_tpu_cluster_alone_refuses_an_existing_cluster_config(tmp_path: Path) -> None:
    (tmp_path / "__main__.py").write_text(
        "import pulumi\n"
        "from components.cluster import TpuCluster\n"
        "TpuCluster('c', {'platform': pulumi.Config('gke-tpu-priority').require_object('platform')})\n"
    )
    with pytest.raises(Exception, match=r"TpuCluster creates a GKE cluster, but platform\.cluster\.mode is `existing`"):
        run_program("alone", stack_config(existing()), root=tmp_path)
