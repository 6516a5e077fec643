"""The real program per stack under mocks: cluster, node pools and provider as GKE will receive them."""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pytest

from gke_tpu_priority.components import tpu_shapes
from testkit.mock_runtime import load_stack_config, run_program
from testkit.platform import platform, stack_config, tpu_pool
from testkit.resources import ProgramRun, RegisteredResource
from testkit.stacks import CREATED_CLUSTER_STACKS, STACKS, stack_run
from tools.manifests import unwrap_secrets

NODE_POOL = "gcp:container/nodePool:NodePool"
CLUSTER = "gcp:container/cluster:Cluster"


def of_type(run: ProgramRun, typ: str) -> list[RegisteredResource]:
    return [r for r in run.resources if r.type == typ]


def tpu_pools(run: ProgramRun) -> list[RegisteredResource]:
    return [p for p in of_type(run, NODE_POOL) if p.inputs["nodeConfig"]["machineType"].startswith("ct6e-")]


@pytest.fixture(params=CREATED_CLUSTER_STACKS)
def any_stack_run(request: pytest.FixtureRequest) -> ProgramRun:
    """Every stack that creates its cluster (this module checks the GKE resources)."""
    return stack_run(request.param)


def test_both_documented_stacks_exist() -> None:
    assert {"dev", "prod"} <= set(STACKS)


def test_dev_stack_shape() -> None:
    pools = {p.inputs["name"]: p.inputs for p in tpu_pools(stack_run("dev"))}
    assert set(pools) == {"dev-2x2", "dev-4x4-0"}
    assert pools["dev-2x2"]["nodeConfig"]["machineType"] == "ct6e-standard-4t"
    assert "placementPolicy" not in pools["dev-2x2"]  # single-host: no multi-host placement
    assert pools["dev-4x4-0"]["placementPolicy"] == {"type": "COMPACT", "tpuTopology": "4x4"}
    assert all(p["nodeConfig"]["spot"] is True for p in pools.values())


def test_prod_stack_shape_and_capacity() -> None:
    pools = tpu_pools(stack_run("prod"))
    resv = [p.inputs for p in pools if p.inputs["name"].startswith("resv-4x4-")]
    spot = [p.inputs for p in pools if p.inputs["name"].startswith("spot-4x4-")]
    assert len(resv) == 8 and len(spot) == 4
    for p in resv:
        assert p["nodeConfig"]["reservationAffinity"] == {
            "consumeReservationType": "SPECIFIC_RESERVATION",
            "key": "compute.googleapis.com/reservation-name",
            "values": ["tpu-v6e-prod"],
        }
        assert "spot" not in p["nodeConfig"]
        assert p["nodeCount"] == 4
    for p in spot:
        assert p["nodeConfig"]["spot"] is True
        assert p["nodeConfig"]["reservationAffinity"] == {"consumeReservationType": "NO_RESERVATION"}
        assert p["autoscaling"]["totalMinNodeCount"] == 0 and p["autoscaling"]["totalMaxNodeCount"] == 4


def test_every_tpu_pool_matches_the_v6e_table(any_stack_run: ProgramRun) -> None:
    raw = load_stack_config(any_stack_run.stack)["gke-tpu-priority:platform"]
    groups = {g["name"]: g for g in raw["tpuPools"]}
    for pool in tpu_pools(any_stack_run):
        inputs = pool.inputs
        group = groups[inputs["nodeConfig"]["labels"]["gke-tpu-priority.io/pool-group"]]
        shape = tpu_shapes.resolve_shape(group["topology"], group.get("machineType"))
        assert inputs["nodeConfig"]["machineType"] == shape.machine_type
        autoscaling = inputs.get("autoscaling", {})
        count = inputs.get("nodeCount", autoscaling.get("totalMaxNodeCount", autoscaling.get("maxNodeCount")))
        if shape.multi_host:
            assert inputs["placementPolicy"] == {"type": "COMPACT", "tpuTopology": shape.topology}
            assert count == shape.vms
        else:
            assert count == group["slices"]
        assert inputs["nodeLocations"] == [group["zone"]]
        assert {"key": "google.com/tpu", "value": "present", "effect": "NO_SCHEDULE"} in inputs["nodeConfig"]["taints"]


def test_cluster_secure_defaults(any_stack_run: ProgramRun) -> None:
    (cluster,) = of_type(any_stack_run, CLUSTER)
    c = cluster.inputs
    assert c["removeDefaultNodePool"] is True
    assert c["workloadIdentityConfig"]["workloadPool"].endswith(".svc.id.goog")
    assert c["datapathProvider"] == "ADVANCED_DATAPATH"
    assert c["enableShieldedNodes"] is True
    assert c["enableLegacyAbac"] is False
    assert c["masterAuth"]["clientCertificateConfig"]["issueClientCertificate"] is False
    assert c["releaseChannel"]["channel"] in {"RAPID", "REGULAR", "STABLE"}
    assert c["networkingMode"] == "VPC_NATIVE"
    assert c["privateClusterConfig"]["enablePrivateNodes"] is True
    assert "JOBSET" in c["monitoringConfig"]["enableComponents"]
    assert c["maintenancePolicy"]["recurringWindow"]["recurrence"].startswith("FREQ=")


def test_every_pool_is_hardened_and_uses_the_dedicated_node_sa(any_stack_run: ProgramRun) -> None:
    (account,) = of_type(any_stack_run, "gcp:serviceaccount/account:Account")
    email = f"{account.inputs['accountId']}@{account.inputs['project']}.iam.gserviceaccount.com"
    for pool in of_type(any_stack_run, NODE_POOL):
        node = pool.inputs["nodeConfig"]
        assert node["serviceAccount"] == email  # never the Compute Engine default SA
        assert node["workloadMetadataConfig"] == {"mode": "GKE_METADATA"}
        assert node["shieldedInstanceConfig"] == {"enableSecureBoot": True, "enableIntegrityMonitoring": True}
        assert node["imageType"] == "COS_CONTAINERD"
        assert pool.inputs["management"]["autoUpgrade"] is True
    roles = {r.inputs["role"] for r in of_type(any_stack_run, "gcp:projects/iAMMember:IAMMember")}
    # GKE's documented minimum for node accounts, plus image pulls from the stack's Artifact Registry.
    assert roles == {"roles/container.defaultNodeServiceAccount", "roles/artifactregistry.reader"}


def test_the_bootstrap_default_pool_runs_as_the_node_sa_after_its_grants(any_stack_run: ProgramRun) -> None:
    (account,) = of_type(any_stack_run, "gcp:serviceaccount/account:Account")
    email = f"{account.inputs['accountId']}@{account.inputs['project']}.iam.gserviceaccount.com"
    (cluster,) = of_type(any_stack_run, CLUSTER)
    node = cluster.inputs["nodeConfig"]
    assert node["serviceAccount"] == email  # never the Compute Engine default SA, even for the temporary pool
    assert node["shieldedInstanceConfig"] == {"enableSecureBoot": True, "enableIntegrityMonitoring": True}
    assert node["workloadMetadataConfig"] == {"mode": "GKE_METADATA"}
    grants = {r.urn for r in of_type(any_stack_run, "gcp:projects/iAMMember:IAMMember")}
    assert grants and grants <= set(cluster.dependencies)


def test_vulnerability_scanning_mode_is_not_the_retired_basic(any_stack_run: ProgramRun) -> None:
    (cluster,) = of_type(any_stack_run, CLUSTER)
    assert cluster.inputs["securityPostureConfig"] == {"mode": "BASIC", "vulnerabilityMode": "VULNERABILITY_DISABLED"}


def test_scale_to_zero_pools_start_empty() -> None:
    pools = [p.inputs for p in tpu_pools(stack_run("dev")) + tpu_pools(stack_run("prod")) if "autoscaling" in p.inputs]
    assert {p["name"] for p in pools} >= {"dev-2x2", "dev-4x4-0", "spot-4x4-0"}
    for pool in pools:
        assert pool["initialNodeCount"] == 0, pool["name"]
        assert "nodeCount" not in pool


def test_production_protects_what_must_not_be_lost() -> None:
    prod = stack_run("prod")
    (cluster,) = of_type(prod, CLUSTER)
    assert cluster.options["protect"] is True and cluster.inputs["deletionProtection"] is True
    for pool in tpu_pools(prod):
        assert pool.options["protect"] is True and pool.inputs["deletionPolicy"] == "PREVENT"
    dev = stack_run("dev")
    (dev_cluster,) = of_type(dev, CLUSTER)
    assert dev_cluster.options["protect"] is False and dev_cluster.inputs["deletionProtection"] is False


def test_tpu_pools_are_replace_only_on_shape_and_ignore_autoscaled_counts() -> None:
    for pool in tpu_pools(stack_run("prod")):
        assert pool.options["delete_before_replace"] is True
        assert set(pool.options["replace_on_changes"]) == {"placementPolicy", "nodeConfig.machineType"}
        assert "initialNodeCount" in pool.options["ignore_changes"]


def test_system_pool_runs_no_tpu_and_autoscales(any_stack_run: ProgramRun) -> None:
    (system,) = [p for p in of_type(any_stack_run, NODE_POOL) if p.inputs["name"] == "system"]
    assert not system.inputs["nodeConfig"]["machineType"].startswith("ct6e-")
    assert system.inputs["nodeConfig"]["labels"] == {"gke-tpu-priority.io/system": "true"}
    assert system.inputs["autoscaling"]["minNodeCount"] >= 1


def test_kubernetes_provider_uses_exec_auth_and_a_stable_identifier(any_stack_run: ProgramRun) -> None:
    (provider,) = of_type(any_stack_run, "pulumi:providers:kubernetes")
    assert provider.inputs["clusterIdentifier"].startswith("projects/")
    raw_kubeconfig = provider.inputs["kubeconfig"]
    assert isinstance(raw_kubeconfig, dict) and raw_kubeconfig.get("value")  # sent as a secret
    kubeconfig = json.loads(unwrap_secrets(raw_kubeconfig))
    user = kubeconfig["users"][0]["user"]
    assert user["exec"]["command"] == "gke-gcloud-auth-plugin" and "token" not in user
    # ADC by default: a CI runner with only Application Default Credentials has no gcloud account.
    assert user["exec"]["args"] == ["--use_application_default_credentials"]
    assert kubeconfig["clusters"][0]["cluster"]["server"].startswith("https://")


def test_dns_endpoint_stack_talks_to_the_dns_name() -> None:
    (provider,) = of_type(stack_run("dev"), "pulumi:providers:kubernetes")
    kubeconfig = json.loads(unwrap_secrets(provider.inputs["kubeconfig"]))
    assert kubeconfig["clusters"][0]["cluster"]["server"].endswith(".gke.goog")
    (cluster,) = of_type(stack_run("dev"), CLUSTER)
    assert cluster.inputs["controlPlaneEndpointsConfig"]["ipEndpointsConfig"] == {"enabled": False}


def test_stack_outputs(any_stack_run: ProgramRun) -> None:
    outputs = any_stack_run.outputs
    assert set(outputs) >= {
        "clusterName",
        "endpoint",
        "location",
        "tpuNodePools",
        "kubeconfig",
        "systemPoolName",
    }
    assert outputs["location"] == "us-east5"
    assert sorted(outputs["tpuNodePools"]) == sorted(p.inputs["name"] for p in tpu_pools(any_stack_run))


def test_children_are_parented_and_named_after_their_component(any_stack_run: ProgramRun) -> None:
    comps = {r.urn: r for r in any_stack_run.resources if not r.custom}
    for res in any_stack_run.resources:
        if res.type == "gke-tpu-priority:index:TpuPlatform":
            continue
        assert res.parent in comps, res.name
        assert res.name.startswith(comps[res.parent].name + "-"), (res.name, comps[res.parent].name)


@pytest.mark.parametrize(
    ("pool", "check"),
    [
        (
            tpu_pool(topology="2x4", machineType="ct6e-standard-4t", slices=3),
            lambda ps: (
                len(ps) == 3 and all(p["nodeCount"] == 2 and p["placementPolicy"]["tpuTopology"] == "2x4" for p in ps)
            ),
        ),
        (
            tpu_pool(topology="2x4", machineType="ct6e-standard-8t", slices=3),
            lambda ps: (
                len(ps) == 1 and ps[0]["nodeCount"] == 3 and ps[0]["nodeConfig"]["machineType"] == "ct6e-standard-8t"
            ),
        ),
        (
            tpu_pool(topology="16x16", slices=1, capacity={"mode": "flex-start", "maxRunDuration": "86400s"}),
            lambda ps: (
                ps[0]["management"]["autoRepair"] is False
                and ps[0]["nodeConfig"]["flexStart"] is True
                # Per-zone limits (the provider's TPU flex-start bug), the pool's single zone holding the slice.
                and ps[0]["autoscaling"] == {"minNodeCount": 0, "maxNodeCount": 64, "locationPolicy": "ANY"}
                and ps[0]["nodeLocations"] == ["us-east5-b"]
                and ps[0]["initialNodeCount"] == 0
                and "nodeCount" not in ps[0]
                and ps[0]["nodeConfig"]["maxRunDuration"] == "86400s"
            ),
        ),
        (
            tpu_pool("flex", topology="2x2", slices=3, capacity={"mode": "flex-start"}),
            lambda ps: (
                len(ps) == 1
                and ps[0]["autoscaling"] == {"minNodeCount": 0, "maxNodeCount": 3, "locationPolicy": "ANY"}
                and ps[0]["nodeConfig"]["reservationAffinity"] == {"consumeReservationType": "NO_RESERVATION"}
                and "spot" not in ps[0]["nodeConfig"]
            ),
        ),
        (
            tpu_pool(capacity={"mode": "reservation", "reservation": {"name": "r", "project": "other-proj"}}),
            lambda ps: ps[0]["nodeConfig"]["reservationAffinity"]["values"] == ["projects/other-proj/reservations/r"],
        ),
    ],
)
def test_pool_variants(pool: dict[str, Any], check: Any) -> None:
    run = run_program("variant", stack_config(platform(pool)))
    assert check([p.inputs for p in tpu_pools(run)])


def test_gcloud_credentials_are_an_explicit_choice() -> None:
    run = run_program("gcloud-auth", stack_config(platform(cluster={"kubernetesAuth": "gcloud"})))
    (provider,) = of_type(run, "pulumi:providers:kubernetes")
    user = json.loads(unwrap_secrets(provider.inputs["kubeconfig"]))["users"][0]["user"]
    assert user["exec"]["command"] == "gke-gcloud-auth-plugin" and "args" not in user["exec"]


def test_invalid_config_stops_before_any_resource() -> None:
    with pytest.raises(pulumi.RunError, match=r"platform.tpuPools\[0\].topology"):
        run_program("bad", stack_config(platform(tpu_pool(topology="5x5"))))
