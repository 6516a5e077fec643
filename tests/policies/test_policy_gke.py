"""GKE cluster and node-pool rules, fed with the engine's camelCase inputs."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from pulumi_policy import EnforcementLevel

from tests.policies.policy_testing import (
    assert_has_violation,
    assert_no_violations,
    assert_policy_metadata,
    resource_args,
    rules,
)

NODE_POOL = "gcp:container/nodePool:NodePool"
CLUSTER = "gcp:container/cluster:Cluster"

TPU_POOL: dict[str, Any] = {
    "cluster": "tpu-cluster",
    "nodeCount": 4,
    "placementPolicy": {"type": "COMPACT", "tpuTopology": "4x4"},
    "management": {"autoRepair": True, "autoUpgrade": True},
    "nodeConfig": {
        "machineType": "ct6e-standard-4t",
        "serviceAccount": "tpu-nodes@my-project.iam.gserviceaccount.com",
        "workloadMetadataConfig": {"mode": "GKE_METADATA"},
        "shieldedInstanceConfig": {"enableSecureBoot": True, "enableIntegrityMonitoring": True},
        "reservationAffinity": {
            "consumeReservationType": "SPECIFIC_RESERVATION",
            "key": "compute.googleapis.com/reservation-name",
            "values": ["v6e"],
        },
    },
}
CLUSTER_PROPS: dict[str, Any] = {
    "workloadIdentityConfig": {"workloadPool": "my-project.svc.id.goog"},
    "enableLegacyAbac": False,
    "masterAuth": {"clientCertificateConfig": {"issueClientCertificate": False}},
    "releaseChannel": {"channel": "REGULAR"},
    "deletionProtection": True,
}
NODE_POOL_POLICIES = [
    rules.GKE_TPU_NODE_POOL_PLACEMENT,
    rules.GKE_NODE_POOL_SPOT_XOR_RESERVATION,
    rules.GKE_NODE_POOL_SERVICE_ACCOUNT,
    rules.GKE_NODE_POOL_METADATA_SERVER,
    rules.GKE_NODE_POOL_SHIELDED,
    rules.GKE_NODE_POOL_AUTO_REPAIR,
]
CLUSTER_POLICIES = [
    rules.GKE_CLUSTER_WORKLOAD_IDENTITY,
    rules.GKE_CLUSTER_LEGACY_ABAC,
    rules.GKE_CLUSTER_CLIENT_CERTIFICATE,
    rules.GKE_CLUSTER_RELEASE_CHANNEL,
    rules.GKE_CLUSTER_DELETION_PROTECTION,
]


def pool(**node_config: Any) -> dict[str, Any]:
    props = copy.deepcopy(TPU_POOL)
    for key, value in node_config.items():
        if value is None:
            props["nodeConfig"].pop(key, None)
        else:
            props["nodeConfig"][key] = value
    return props


def test_metadata() -> None:
    for policy in NODE_POOL_POLICIES + CLUSTER_POLICIES:
        expected = EnforcementLevel.ADVISORY if policy is rules.GKE_NODE_POOL_SHIELDED else EnforcementLevel.MANDATORY
        assert_policy_metadata(policy, expected)


@pytest.mark.parametrize("policy", NODE_POOL_POLICIES, ids=lambda p: p.name)
def test_compliant_tpu_pool_passes(policy: Any) -> None:
    assert_no_violations(policy, resource_args(NODE_POOL, TPU_POOL, name="tpu-pool"))


@pytest.mark.parametrize("policy", CLUSTER_POLICIES, ids=lambda p: p.name)
def test_compliant_cluster_passes(policy: Any) -> None:
    assert_no_violations(policy, resource_args(CLUSTER, CLUSTER_PROPS, name="tpu-cluster", stack="prod"))


def test_multi_host_pool_needs_compact_placement() -> None:
    props = copy.deepcopy(TPU_POOL)
    props["placementPolicy"] = {"tpuTopology": "4x4"}
    assert_has_violation(
        rules.GKE_TPU_NODE_POOL_PLACEMENT,
        resource_args(NODE_POOL, props, name="tpu-pool"),
        "TPU node pool 'tpu-pool' (ct6e-standard-4t) is a multi-host slice; set placementPolicy.type to COMPACT",
    )


def test_compact_placement_needs_a_topology() -> None:
    props = copy.deepcopy(TPU_POOL)
    props["placementPolicy"] = {"type": "COMPACT"}
    assert_has_violation(
        rules.GKE_TPU_NODE_POOL_PLACEMENT,
        resource_args(NODE_POOL, props, name="tpu-pool"),
        "has COMPACT placement but no placementPolicy.tpuTopology",
    )


def test_a_pool_of_single_host_2x2_slices_may_have_many_nodes() -> None:
    # One node pool holding several single-host 2x2 slices (one VM each) is not a multi-host slice.
    props = copy.deepcopy(TPU_POOL)
    props.pop("placementPolicy", None)
    props["nodeCount"] = 3
    assert_no_violations(rules.GKE_TPU_NODE_POOL_PLACEMENT, resource_args(NODE_POOL, props, name="tpu-2x2"))


def test_topology_must_match_node_count() -> None:
    props = copy.deepcopy(TPU_POOL)
    props["nodeCount"] = 2
    assert_has_violation(
        rules.GKE_TPU_NODE_POOL_PLACEMENT,
        resource_args(NODE_POOL, props, name="p"),
        "topology 4x4 needs 16 chips; set nodeCount to 4",
    )


def test_single_host_and_non_tpu_pools_need_no_placement() -> None:
    single = copy.deepcopy(TPU_POOL)
    single.update(nodeCount=1, placementPolicy={"tpuTopology": "2x2"})
    assert_no_violations(rules.GKE_TPU_NODE_POOL_PLACEMENT, resource_args(NODE_POOL, single))
    cpu = copy.deepcopy(TPU_POOL)
    cpu.update(nodeCount=3, placementPolicy={})
    cpu["nodeConfig"]["machineType"] = "e2-standard-4"
    assert_no_violations(rules.GKE_TPU_NODE_POOL_PLACEMENT, resource_args(NODE_POOL, cpu))


def test_spot_with_reservation_is_rejected() -> None:
    args = resource_args(NODE_POOL, pool(spot=True), name="tpu-pool")
    assert_has_violation(
        rules.GKE_NODE_POOL_SPOT_XOR_RESERVATION,
        args,
        "Node pool 'tpu-pool' is Spot and also consumes a reservation (SPECIFIC_RESERVATION)",
    )
    spot_only = resource_args(NODE_POOL, pool(spot=True, reservationAffinity=None))
    assert_no_violations(rules.GKE_NODE_POOL_SPOT_XOR_RESERVATION, spot_only)


@pytest.mark.parametrize("account", [None, "default", "123456789012-compute@developer.gserviceaccount.com"])
def test_default_service_account_is_rejected(account: str | None) -> None:
    args = resource_args(NODE_POOL, pool(serviceAccount=account), name="tpu-pool")
    assert_has_violation(rules.GKE_NODE_POOL_SERVICE_ACCOUNT, args, "Compute Engine default service account")


def test_metadata_server_required() -> None:
    args = resource_args(NODE_POOL, pool(workloadMetadataConfig={"mode": "GCE_METADATA"}), name="tpu-pool")
    assert_has_violation(rules.GKE_NODE_POOL_METADATA_SERVER, args, "has workloadMetadataConfig.mode GCE_METADATA")


def test_secure_boot_required() -> None:
    args = resource_args(NODE_POOL, pool(shieldedInstanceConfig=None), name="tpu-pool")
    assert_has_violation(rules.GKE_NODE_POOL_SHIELDED, args, "does not enable Secure Boot")


def test_auto_repair_required_except_flex_start() -> None:
    props = copy.deepcopy(TPU_POOL)
    props["management"] = {"autoRepair": False}
    assert_has_violation(
        rules.GKE_NODE_POOL_AUTO_REPAIR,
        resource_args(NODE_POOL, props, name="p"),
        "Node pool 'p' does not enable auto-repair",
    )
    props["nodeConfig"]["flexStart"] = True
    assert_no_violations(rules.GKE_NODE_POOL_AUTO_REPAIR, resource_args(NODE_POOL, props))


@pytest.mark.parametrize(
    ("policy", "change", "message"),
    [
        (
            rules.GKE_CLUSTER_WORKLOAD_IDENTITY,
            {"workloadIdentityConfig": None},
            "no workloadIdentityConfig.workloadPool",
        ),
        (rules.GKE_CLUSTER_LEGACY_ABAC, {"enableLegacyAbac": True}, "enables legacy ABAC"),
        (
            rules.GKE_CLUSTER_CLIENT_CERTIFICATE,
            {"masterAuth": {"clientCertificateConfig": {"issueClientCertificate": True}}},
            "issues client certificates",
        ),
        (
            rules.GKE_CLUSTER_RELEASE_CHANNEL,
            {"releaseChannel": {"channel": "UNSPECIFIED"}},
            "release channel UNSPECIFIED",
        ),
        (
            rules.GKE_CLUSTER_DELETION_PROTECTION,
            {"deletionProtection": False},
            "is in a production stack but deletionProtection is not true",
        ),
    ],
    ids=lambda v: getattr(v, "name", None) or "",
)
def test_cluster_mistakes_are_rejected(policy: Any, change: dict[str, Any], message: str) -> None:
    props = {k: v for k, v in {**CLUSTER_PROPS, **change}.items() if v is not None}
    messages = assert_has_violation(policy, resource_args(CLUSTER, props, name="tpu-cluster", stack="prod"), message)
    assert all("Cluster 'tpu-cluster'" in m for m in messages)


def test_deletion_protection_only_for_production() -> None:
    props = {**CLUSTER_PROPS, "deletionProtection": False}
    policy = rules.GKE_CLUSTER_DELETION_PROTECTION
    assert_no_violations(policy, resource_args(CLUSTER, props, stack="dev"))
    assert_has_violation(
        policy, resource_args(CLUSTER, props, stack="dev", stack_tags={"environment": "production"}), "production stack"
    )
    assert_has_violation(policy, resource_args(CLUSTER, props, {"production": True}, stack="dev"), "production stack")
    assert_no_violations(policy, resource_args(CLUSTER, props, {"production": False}, stack="prod"))


def test_release_channel_is_configurable() -> None:
    args = resource_args(CLUSTER, CLUSTER_PROPS, {"allowedChannels": ["STABLE"]}, name="c")
    assert_has_violation(rules.GKE_CLUSTER_RELEASE_CHANNEL, args, "release channel REGULAR")
