"""The hotswap reconciler's deployment in every stack: least privilege, restricted pod security, valid config."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from gke_tpu_priority.components.config import ConfigError, parse_platform_config
from gke_tpu_priority.components.reconciler import objects
from gke_tpu_priority.hotswap.config import HotswapConfig
from testkit.mock_runtime import load_stack_config
from testkit.platform import platform
from testkit.stacks import CREATED_CLUSTER_STACKS, STACKS, stack_run
from tools.manifests import kubernetes_objects

FORBIDDEN_RESOURCES = {"secrets", "pods/exec", "pods/attach", "pods/portforward", "nodes/proxy"}
FORBIDDEN_VERBS = {"*", "bind", "escalate", "impersonate"}


def find(stack: str, kind: str, name: str | None = None) -> dict[str, Any]:
    matches = [
        o
        for o in kubernetes_objects(stack_run(stack).resources)
        if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)
    ]
    assert len(matches) == 1, (kind, name, len(matches))
    return matches[0]


@pytest.mark.parametrize("stack", CREATED_CLUSTER_STACKS)
def test_reconciler_is_part_of_every_stack(stack: str) -> None:
    deployment = find(stack, "Deployment", "hotswap-reconciler")
    pod = deployment["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"gke-tpu-priority.io/system": "true"}
    assert pod["serviceAccountName"] == "hotswap-reconciler"
    (container,) = pod["containers"]
    assert container["args"] == [
        "run",
        "--config",
        "/etc/hotswap/config.yaml",
        "--release-on-removal",
        "hotswap-system/hotswap-reconciler",
    ]
    assert container["image"].endswith("@sha256:" + "0" * 64)  # built and pinned by digest
    assert container["imagePullPolicy"] == "IfNotPresent"


@pytest.mark.parametrize("stack", STACKS)
def test_restricted_pod_security(stack: str) -> None:
    pod = find(stack, "Deployment", "hotswap-reconciler")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    sc = pod["containers"][0]["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"] == {"drop": ["ALL"]} and sc["runAsUser"] != 0
    resources = pod["containers"][0]["resources"]
    assert resources["requests"] and resources["limits"]
    assert {"livenessProbe", "readinessProbe"} <= set(pod["containers"][0])
    ns = find(stack, "Namespace", "hotswap-system")
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert all(v["name"] in {"config", "tmp"} for v in pod["volumes"])


@pytest.mark.parametrize("stack", STACKS)
def test_rbac_is_least_privilege(stack: str) -> None:
    role = find(stack, "ClusterRole", "hotswap-reconciler")
    writes: dict[str, set[str]] = {}
    for rule in role["rules"]:
        assert not FORBIDDEN_VERBS & set(rule["verbs"])
        for resource in rule["resources"]:
            assert resource not in FORBIDDEN_RESOURCES and "*" not in resource
            mutating = set(rule["verbs"]) - {"get", "list", "watch"}
            if mutating:
                writes.setdefault(resource, set()).update(mutating)
    # Writes only Workloads (spec.active + annotations), Events and the quarantine taint on nodes; never deletes
    # anything by default. A stack with spot and queued-provisioning pools adds the rung switch's two writes.
    expected = {"workloads": {"patch"}, "events": {"create"}, "nodes": {"patch"}}
    if objects.rung_switch_enabled(parse_platform_config(load_stack_config(stack)["gke-tpu-priority:platform"])):
        expected |= {"workloads": {"patch", "delete"}, "jobsets": {"patch"}}
    assert writes == expected
    lease = find(stack, "Role", "hotswap-reconciler-leader-election")
    assert {r["resources"][0] for r in lease["rules"]} == {"leases"}
    assert find(stack, "ServiceAccount")["automountServiceAccountToken"] is False


def test_fast_fail_adds_exactly_pod_delete_and_status() -> None:
    cfg = parse_platform_config(platform(hotswap={"settings": {"fastFail": {"enabled": True}}}))
    rules = objects.cluster_role(cfg)["rules"]
    extra = [r for r in rules if r["apiGroups"] == [""] and set(r["verbs"]) & {"delete", "patch"}]
    assert extra == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["patch"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["delete"]},
        {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["patch"]},
    ]


def test_quarantine_off_drops_the_node_patch() -> None:
    cfg = parse_platform_config(platform(hotswap={"settings": {"quarantineUnhealthySlices": False}}))
    rules = objects.cluster_role(cfg)["rules"]
    assert [r for r in rules if "nodes" in r["resources"]] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]}
    ]


@pytest.mark.parametrize("stack", STACKS)
def test_config_map_is_a_valid_reconciler_config(stack: str) -> None:
    config_map = find(stack, "ConfigMap", "hotswap-reconciler-config")
    data = yaml.safe_load(config_map["data"]["config.yaml"])
    parsed = HotswapConfig.model_validate(data)
    assert parsed.mode.value == "reconciler"
    assert parsed.leader_election.lease_namespace == "hotswap-system"
    assert parsed.leader_election.lease_name == "hotswap-reconciler"


def test_reconciler_priority_is_above_every_tier() -> None:
    reconciler = find("prod", "PriorityClass", "hotswap-reconciler")
    tiers = [
        o["value"]
        for o in kubernetes_objects(stack_run("prod").resources)
        if o["kind"] == "PriorityClass" and "gke-tpu-priority.io/priority-tier" in o["metadata"]["labels"]
    ]
    assert reconciler["value"] > max(tiers)
    assert reconciler["value"] <= 1_000_000_000


def test_pdb_and_two_replicas() -> None:
    assert find("prod", "Deployment", "hotswap-reconciler")["spec"]["replicas"] == 2
    assert find("prod", "PodDisruptionBudget")["spec"]["minAvailable"] == 1
    single = parse_platform_config(platform(hotswap={"replicas": 1}))
    assert objects.pod_disruption_budget(single)["spec"] == {
        "selector": {"matchLabels": {"app.kubernetes.io/name": "hotswap-reconciler"}},
        "maxUnavailable": 1,
    }


def test_given_image_is_used_and_unpinned_images_are_always_pulled() -> None:
    cfg = parse_platform_config(platform(hotswap={"image": "ghcr.io/acme/hotswap:1.0"}))
    dep = objects.deployment(cfg, cfg.hotswap.image, "abc", pinned=False)
    assert dep["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] == "Always"


@pytest.mark.parametrize(
    ("hotswap", "expected"),
    [
        ({"settings": {"unhealthyGrace": "soon"}}, "platform.hotswap.settings.unhealthyGrace"),
        ({"settings": {"starvationGrace": "2s"}}, "starvationGrace (2.0s) is shorter than kube-scheduler needs"),
        (
            {"settings": {"leaderElection": {"leaseName": "x"}}},
            "platform.hotswap.settings.leaderElection: set by the package",
        ),
        ({"settings": {"mode": "reconciler"}}, "use `hotswap.mode`"),
        ({"replicas": 5}, "platform.hotswap.replicas"),
    ],
)
def test_bad_reconciler_settings_are_rejected(hotswap: dict[str, Any], expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_platform_config(platform(hotswap=hotswap))
    assert any(expected in p for p in info.value.problems), info.value.problems


def test_disabled_reconciler_is_not_deployed() -> None:
    from testkit.mock_runtime import run_program
    from testkit.platform import stack_config

    run = run_program("no-hotswap", stack_config(platform(hotswap={"enabled": False})))
    assert not [r for r in run.resources if "HotswapReconciler" in r.type or r.name.endswith("-deployment")]


def test_tiers_that_may_not_preempt_reach_the_reconciler_as_a_floor() -> None:
    """Default tiers: best-effort (100000) may not preempt; the lowest tier that may is training-low (1000000)."""
    default = HotswapConfig.model_validate(objects.reconciler_config(parse_platform_config(platform())))
    assert default.preemptor_min_priority == 1_000_000
    tiers = [
        {"name": "scratch", "value": 10, "description": "s", "preempts": False, "globalDefault": True},
        {"name": "batch", "value": 20, "description": "b", "preempts": False},
        {"name": "prod", "value": 30, "description": "p"},
    ]
    custom = objects.reconciler_config(parse_platform_config(platform(priorities=tiers)))
    assert custom["preemptorMinPriority"] == 30
    every_tier_preempts = [{**t, "preempts": True} for t in tiers]
    assert "preemptorMinPriority" not in objects.reconciler_config(
        parse_platform_config(platform(priorities=every_tier_preempts))
    )


def test_the_floor_is_not_a_setting_of_its_own() -> None:
    with pytest.raises(ConfigError, match=r"settings\.preemptorMinPriority: set by the package from the tiers"):
        parse_platform_config(platform(hotswap={"settings": {"preemptorMinPriority": 5}}))


# --- removal releases the holds (hotswap/kube/removal.py) --------------------------------------------------


@pytest.mark.parametrize("stack", STACKS)
def test_removal_can_tell_itself_from_a_restart_and_release_before_its_rbac_goes(stack: str) -> None:
    deployment = find(stack, "Deployment", "hotswap-reconciler")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    namespace = deployment["metadata"]["namespace"]
    assert container["args"][-2:] == ["--release-on-removal", f"{namespace}/hotswap-reconciler"]
    # It may read its own Deployment and nothing else.
    role = find(stack, "Role", "hotswap-reconciler-self")
    assert role["rules"] == [
        {"apiGroups": ["apps"], "resources": ["deployments"], "resourceNames": ["hotswap-reconciler"], "verbs": ["get"]}
    ]
    binding = find(stack, "RoleBinding", "hotswap-reconciler-self")
    assert binding["roleRef"]["name"] == "hotswap-reconciler-self"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "hotswap-reconciler", "namespace": namespace}]
    # Foreground deletion keeps the Deployment (deleting) until its pods end, and Pulumi deletes what the
    # Deployment depends on (the RBAC the release needs) only after that.
    assert deployment["metadata"]["annotations"]["pulumi.com/deletionPropagationPolicy"] == "foreground"
    resources = stack_run(stack).resources
    (dep,) = [r for r in resources if r.type == "kubernetes:apps/v1:Deployment" and r.name.endswith("-deployment")]
    needed = {r.urn for r in resources if r.name.endswith(("-self-rolebinding", "-clusterrolebinding", "-sa"))}
    needed = {u for u in needed if "hotswap" in u}
    assert len(needed) == 3 and needed <= set(dep.dependencies)
    assert deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] >= 60


RUNG_SWITCH_RULES = [
    {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"], "verbs": ["patch"]},
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": ["delete"]},
]


def _rung_switch_rules(role: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in role["rules"] if set(r["verbs"]) & {"patch", "delete"} and r["apiGroups"] != [""]]


def test_the_ladder_stack_grants_the_rung_switch_exactly_its_two_writes() -> None:
    """Spot and queued-provisioning pools: the switch can happen, so JobSet patch and Workload delete are granted
    (besides the Workload patch every stack has); the other stacks have no such pair of rungs and grant neither."""
    ladder = _rung_switch_rules(find("ladder", "ClusterRole"))
    workload_patch = {
        "apiGroups": ["kueue.x-k8s.io"],
        "resources": ["workloads"],
        "verbs": ["get", "list", "watch", "patch"],
    }
    assert ladder == [workload_patch, *RUNG_SWITCH_RULES]
    assert _rung_switch_rules(find("dev", "ClusterRole")) == [workload_patch]


def test_spot_rung_switch_off_drops_its_permissions() -> None:
    cfg = parse_platform_config(platform(hotswap={"settings": {"spotRungSwitch": False}}))
    assert not objects.rung_switch_enabled(cfg)
    assert all(rule not in objects.cluster_role(cfg)["rules"] for rule in RUNG_SWITCH_RULES)
