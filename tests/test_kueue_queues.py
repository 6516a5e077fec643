"""Kueue/JobSet install, priority tiers and queues: emitted objects validated against the real CRDs."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from gke_tpu_priority.components.config import ConfigError, parse_platform_config
from gke_tpu_priority.components.kueue import jobset_values, kueue_values
from gke_tpu_priority.components.kueue.manager_config import kueue_manager_config
from testkit.mock_runtime import load_stack_config
from testkit.platform import platform, tpu_pool
from testkit.stacks import STACKS, stack_run
from tests.support.crd_validation import validate_manifest
from tools.manifests import kubernetes_objects


def objects(stack: str) -> list[dict[str, Any]]:
    return kubernetes_objects(stack_run(stack).resources)


def of_kind(stack: str, kind: str) -> list[dict[str, Any]]:
    return [o for o in objects(stack) if o["kind"] == kind]


def config_of(stack: str) -> Any:
    return parse_platform_config(load_stack_config(stack)["gke-tpu-priority:platform"])


@pytest.mark.parametrize("stack", STACKS)
def test_every_emitted_object_is_accepted_by_the_real_schemas_with_nothing_pruned(stack: str) -> None:
    objs = objects(stack)
    assert objs
    failures = []
    for obj in objs:
        if str(obj.get("apiVersion", "")).startswith("monitoring.googleapis.com/"):
            continue  # GKE Managed Prometheus: no pinned CRD; tests/test_monitoring.py checks these objects
        result = validate_manifest(obj)
        if not result.ok:
            failures.append(f"{obj['kind']}/{obj['metadata']['name']}: {result.describe()}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("stack", STACKS)
def test_kueue_objects_use_v1beta2_and_depend_on_the_install(stack: str) -> None:
    run = stack_run(stack)
    chart = next(r for r in run.resources if r.type == "kubernetes:helm.sh/v4:Chart" and r.name.endswith("-kueue"))
    for res in run.resources:
        if "kueue.x-k8s.io" in res.type:
            assert res.type.startswith("kubernetes:kueue.x-k8s.io/v1beta2:")
            # Created only after the chart that brings the CRDs.
            assert chart.urn in res.dependencies, res.name


@pytest.mark.parametrize("stack", STACKS)
def test_each_tier_has_a_priority_class_and_workload_priority_class_that_agree(stack: str) -> None:
    config = config_of(stack)
    pcs = {
        o["metadata"]["name"]: o
        for o in of_kind(stack, "PriorityClass")
        if "gke-tpu-priority.io/priority-tier" in o["metadata"].get("labels", {})
    }
    wpcs = {o["metadata"]["name"]: o for o in of_kind(stack, "WorkloadPriorityClass")}
    assert set(pcs) == set(wpcs) == {t.name for t in config.priorities}
    for tier in config.priorities:
        assert pcs[tier.name]["value"] == wpcs[tier.name]["value"] == tier.value
        assert pcs[tier.name]["globalDefault"] is tier.global_default


def test_reconciler_mode_leaves_preemption_to_the_reconciler() -> None:
    for pc in of_kind("prod", "PriorityClass"):
        assert pc["preemptionPolicy"] == "Never"


def test_scheduler_assisted_mode_lets_preempting_tiers_preempt() -> None:
    from gke_tpu_priority.components.config.priorities import HotswapMode
    from gke_tpu_priority.components.priorities import priority_class

    config = parse_platform_config(platform(hotswap={"mode": "scheduler-assisted"}))
    policies = {
        t.name: priority_class(t, HotswapMode.SCHEDULER_ASSISTED)["preemptionPolicy"] for t in config.priorities
    }
    assert policies == {
        "best-effort": "Never",
        "training-low": "PreemptLowerPriority",
        "training-high": "PreemptLowerPriority",
    }


def test_prod_flavors_split_one_shape_by_capacity_mode() -> None:
    flavors = {o["metadata"]["name"]: o["spec"] for o in of_kind("prod", "ResourceFlavor")}
    assert set(flavors) == {"v6e-4x4-reservation", "v6e-4x4-spot"}
    assert flavors["v6e-4x4-spot"]["nodeLabels"] == {
        "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
        "cloud.google.com/gke-tpu-topology": "4x4",
        "gke-tpu-priority.io/capacity": "spot",
    }
    assert flavors["v6e-4x4-spot"]["tolerations"] == [
        {"key": "google.com/tpu", "operator": "Exists", "effect": "NoSchedule"}
    ]


def test_prod_queues_two_teams_in_one_cohort() -> None:
    cqs = {o["metadata"]["name"]: o["spec"] for o in of_kind("prod", "ClusterQueue")}
    assert set(cqs) == {"team-a", "team-b"}
    for name, spec in cqs.items():
        assert spec["cohortName"] == "research" and "cohort" not in spec
        assert spec["namespaceSelector"]["matchExpressions"][0]["values"] == [name]
        assert spec["resourceGroups"][0]["coveredResources"] == ["google.com/tpu"]
    team_b = {f["name"]: f["resources"][0] for f in cqs["team-b"]["resourceGroups"][0]["flavors"]}
    assert team_b["v6e-4x4-reservation"] == {"name": "google.com/tpu", "nominalQuota": "48", "lendingLimit": "32"}
    lqs = {
        (o["metadata"]["namespace"], o["metadata"]["name"]): o["spec"]["clusterQueue"]
        for o in of_kind("prod", "LocalQueue")
    }
    assert lqs == {("team-a", "training"): "team-a", ("team-b", "training"): "team-b"}
    namespaces = {o["metadata"]["name"]: o["metadata"]["labels"] for o in of_kind("prod", "Namespace")}
    assert namespaces["team-a"]["pod-security.kubernetes.io/enforce"] == "baseline"


def test_gke_best_practice_sample_comes_out_valid() -> None:
    (flavor,) = of_kind("gke-sample", "ResourceFlavor")
    assert flavor["metadata"]["name"] == "tpu-v6e-slice"
    assert flavor["spec"]["nodeLabels"] == {"cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice"}
    (cq,) = of_kind("gke-sample", "ClusterQueue")
    assert cq["metadata"]["name"] == "tpu-training-cq"
    group = cq["spec"]["resourceGroups"][0]
    assert group["coveredResources"] == ["google.com/tpu"]
    assert group["flavors"] == [
        {"name": "tpu-v6e-slice", "resources": [{"name": "google.com/tpu", "nominalQuota": "32"}]}
    ]
    assert "reclaimOutOfCohort" not in yaml.safe_dump(cq)
    (lq,) = of_kind("gke-sample", "LocalQueue")
    assert (lq["metadata"]["namespace"], lq["metadata"]["name"], lq["spec"]["clusterQueue"]) == (
        "default",
        "default-queue",
        "tpu-training-cq",
    )
    # `default` already exists; the package must not try to own it.
    assert "default" not in {o["metadata"]["name"] for o in of_kind("gke-sample", "Namespace")}


def test_default_queues_give_every_chip_to_one_team_namespace() -> None:
    (cq,) = of_kind("dev", "ClusterQueue")
    quotas = {f["name"]: int(f["resources"][0]["nominalQuota"]) for f in cq["spec"]["resourceGroups"][0]["flavors"]}
    assert quotas == {"v6e-2x2": 8, "v6e-4x4": 16}
    (lq,) = of_kind("dev", "LocalQueue")
    assert lq["metadata"] == {
        "name": "training",
        "namespace": "tpu-training",
        "labels": {"app.kubernetes.io/managed-by": "gke-tpu-priority"},
    }


def test_kueue_manager_config_and_chart_values() -> None:
    prod = config_of("prod")
    manager = kueue_manager_config(prod)
    assert manager["apiVersion"] == "config.kueue.x-k8s.io/v1beta2"
    assert "jobset.x-k8s.io/jobset" in manager["integrations"]["frameworks"]
    assert manager["waitForPodsReady"]["recoveryTimeout"] == "20m"
    assert "backoffLimitCount" not in manager["waitForPodsReady"]["requeuingStrategy"]  # requeue forever
    assert manager["fairSharing"] == {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]}
    assert manager["health"] == {"healthProbeBindAddress": ":8081"}  # restated: the chart replaces its default
    assert "fairSharing" not in kueue_manager_config(config_of("dev"))
    values = kueue_values(prod)
    assert values["controllerManager"]["nodeSelector"] == {"gke-tpu-priority.io/system": "true"}
    assert values["controllerManager"]["manager"]["image"]["tag"] == "v0.19.2"
    assert yaml.safe_load(values["managerConfig"]["controllerManagerConfigYaml"]) == manager
    assert jobset_values(prod)["controller"]["nodeSelector"] == {"gke-tpu-priority.io/system": "true"}
    assert jobset_values(prod)["prometheus"] == {"enable": False}


def test_controller_resources_grow_with_the_fleet() -> None:
    small = kueue_values(parse_platform_config(platform(tpu_pool(slices=4))))
    big = kueue_values(parse_platform_config(platform(tpu_pool(slices=500), queues={"allowOvercommit": False})))
    req = lambda v: int(v["controllerManager"]["manager"]["resources"]["requests"]["memory"].removesuffix("Mi"))  # noqa: E731
    assert req(big) > req(small)


def test_charts_pin_versions_and_namespaces() -> None:
    charts = {r.name: r.inputs for r in stack_run("prod").resources if r.type == "kubernetes:helm.sh/v4:Chart"}
    kueue = next(v for k, v in charts.items() if k.endswith("-kueue"))
    jobset = next(v for k, v in charts.items() if k.endswith("-jobset"))
    assert (kueue["chart"], kueue["version"], kueue["namespace"]) == (
        "oci://registry.k8s.io/kueue/charts/kueue",
        "0.19.2",
        "kueue-system",
    )
    assert (jobset["chart"], jobset["version"], jobset["namespace"]) == (
        "oci://registry.k8s.io/jobset/charts/jobset",
        "0.12.0",
        "jobset-system",
    )


# --- validation of bad queue and priority configs ------------------------------------------------------


def problems(**overrides: Any) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_platform_config(platform(tpu_pool(slices=2), **overrides))
    return info.value.problems


def one_cq(**cq: Any) -> dict[str, Any]:
    base = {"name": "team", "namespaces": ["team"], "quotas": [{"flavor": "v6e-4x4", "chips": 32}]}
    base.update(cq)
    return {"clusterQueues": [base], "localQueues": [{"name": "q", "namespace": "team", "clusterQueue": "team"}]}


@pytest.mark.parametrize(
    ("queues", "expected"),
    [
        (
            one_cq(quotas=[{"flavor": "v6e-8x8", "chips": 64}]),
            "platform.queues.clusterQueues[0].quotas[0].flavor: 'v6e-8x8' is not a flavor of this stack "
            "(flavors: v6e-4x4)",
        ),
        (
            one_cq(quotas=[{"flavor": "v6e-4x4", "chips": 48}]),
            "nominal quota for flavor 'v6e-4x4' totals 48 chips but its pools provide 32",
        ),
        (one_cq(cohort="ghost"), "platform.queues.clusterQueues[0].cohort: unknown cohort 'ghost'"),
        (
            {**one_cq(), "localQueues": [{"name": "q", "namespace": "team", "clusterQueue": "missing"}]},
            "platform.queues.localQueues[0].clusterQueue: 'missing' is not a ClusterQueue of this stack",
        ),
        (
            {"clusterQueues": [one_cq()["clusterQueues"][0]] * 2, "localQueues": []},
            "platform.queues.clusterQueues[1].name: 'team' is already used by clusterQueues[0]",
        ),
        (one_cq(namespaces=[]), "Kueue would admit workloads from no namespace"),
        (one_cq(quotas=[{"flavor": "v6e-4x4", "chips": 8, "borrowingLimit": 8}]), "need a `cohort`"),
        (
            {
                "flavors": [{"name": "v6e-2x2-only", "topology": "2x2"}],
                **one_cq(quotas=[{"flavor": "v6e-2x2-only", "chips": 4}]),
            },
            "flavor 'v6e-2x2-only' matches no TPU pool; pools provide 4x4",
        ),
        (
            {**one_cq(), "localQueues": [{"name": "q", "namespace": "other", "clusterQueue": "team"}]},
            "'other' is not among ClusterQueue 'team''s namespaces",
        ),
        ({"clusterQueues": []}, "set both `clusterQueues` and `localQueues`"),
        ({"cohorts": [{"name": "child", "parent": "nobody"}]}, "platform.queues.cohorts[0].parent: unknown cohort"),
    ],
)
def test_bad_queue_config_is_rejected(queues: dict[str, Any], expected: str) -> None:
    found = problems(queues=queues)
    assert any(expected in p for p in found), found


def test_overcommit_can_be_allowed_explicitly() -> None:
    cfg = parse_platform_config(
        platform(
            tpu_pool(slices=2), queues={**one_cq(quotas=[{"flavor": "v6e-4x4", "chips": 64}]), "allowOvercommit": True}
        )
    )
    assert cfg.flavors[0].chips == 32


@pytest.mark.parametrize(
    ("priorities", "expected"),
    [
        (
            [{"name": "a", "value": 5, "description": "x"}, {"name": "a", "value": 6, "description": "y"}],
            "platform.priorities[1].name: 'a' is already used",
        ),
        (
            [{"name": "a", "value": 5, "description": "x"}, {"name": "b", "value": 5, "description": "y"}],
            "platform.priorities[1].value: 5 equals priorities[0]",
        ),
        (
            [
                {"name": "low", "value": 1, "description": "x"},
                {"name": "high", "value": 9, "description": "y", "globalDefault": True},
            ],
            "platform.priorities[1].globalDefault: only the lowest tier may be the default",
        ),
        (
            [
                {"name": "a", "value": 1, "description": "x", "globalDefault": True},
                {"name": "b", "value": 2, "description": "y", "globalDefault": True},
            ],
            "2 tiers are globalDefault",
        ),
        (
            [
                {"name": "a", "value": 10, "description": "x", "preempts": False},
                {"name": "b", "value": 5, "description": "y"},
            ],
            "tier 'a' may not preempt but sits at or above a tier that may",
        ),
        ([{"name": "huge", "value": 2_000_000_000, "description": "x"}], "must be at most 1000000000"),
        ([{"name": "system-x", "value": 1, "description": "x"}], "the `system-` prefix is reserved"),
    ],
)
def test_bad_priority_tiers_are_rejected(priorities: list[dict[str, Any]], expected: str) -> None:
    found = problems(priorities=priorities)
    assert any(expected in p for p in found), found


@pytest.mark.parametrize(
    ("kueue", "expected"),
    [
        ({"version": "0.15.8"}, "platform.kueue.version: Value error, Kueue 0.15.8 is too old"),
        ({"version": "v0.19.2"}, "is not a release version"),
        ({"waitForPodsReady": {"recoveryTimeout": "2m"}}, "would cut hotswap recovery short"),
    ],
)
def test_bad_kueue_settings_are_rejected(kueue: dict[str, Any], expected: str) -> None:
    found = problems(kueue=kueue)
    assert any(expected.removeprefix("platform.kueue.version: Value error, ") in p for p in found), found


def test_cohort_parent_cycle_is_rejected() -> None:
    found = problems(queues={"cohorts": [{"name": "a", "parent": "b"}, {"name": "b", "parent": "a"}]})
    assert any("is part of a parent cycle" in p for p in found), found


def test_controllers_run_above_every_tier_with_a_class_gke_admits_outside_kube_system() -> None:
    (pc,) = [o for o in of_kind("prod", "PriorityClass") if o["metadata"]["name"] == "tpu-platform-controllers"]
    tiers = [t.value for t in config_of("prod").priorities]
    assert max(tiers) < pc["value"] <= 1_000_000_000 and pc["preemptionPolicy"] == "Never"
    assert pc["metadata"]["labels"]["gke-tpu-priority.io/priority-class-role"] == "controllers"
    assert (
        kueue_values(config_of("prod"))["controllerManager"]["manager"]["priorityClassName"] == pc["metadata"]["name"]
    )


def test_cluster_queues_reclaim_within_cohort_only_from_lower_priority_by_default() -> None:
    """With `Any`, Kueue evicts borrowing workloads of the cohort irrespective of priority, so a victim
    the hotswap reconciler releases could evict the high-priority JobSet it was held for."""
    from gke_tpu_priority.components.config.queues import ClusterQueueSpec, ReclaimWithinCohort

    spec = ClusterQueueSpec.model_validate(
        {"name": "a", "namespaces": ["ml"], "quotas": [{"flavor": "v6e", "chips": 8}]}
    )
    assert spec.preemption.reclaim_within_cohort is ReclaimWithinCohort.LOWER_PRIORITY
