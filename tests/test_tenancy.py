"""Teams: entitlements validated like every setting, written where every front end reads them, and a
least-privilege team role bound in the team namespaces. The prod stack declares two teams."""

from __future__ import annotations

from typing import Any

import pytest

from gke_tpu_priority.components.admission import admission_objects
from gke_tpu_priority.components.config import ConfigError, parse_platform_config
from gke_tpu_priority.components.queues.team_access import TEAM_ROLE, team_cluster_role
from gke_tpu_priority.components.reconciler.objects import reconciler_config
from gke_tpu_priority.components.workloads import TpuJobSetSpec, tpu_jobset
from gke_tpu_priority.policies.check import check_objects
from gke_tpu_priority.policies.rules.base import manifest_object
from gke_tpu_priority.policies.rules.tenancy import ALLOWED_TIERS_ANNOTATION, MAY_PROTECT_ANNOTATION
from testkit.mock_runtime import load_stack_config
from testkit.platform import platform
from testkit.stacks import stack_run
from tests.policies.admission_cel import evaluate
from tools.manifests import kubernetes_objects

QUEUES = {
    "clusterQueues": [{"name": "cq", "namespaces": ["ml-a", "ml-b"], "quotas": [{"flavor": "v6e-4x4", "chips": 32}]}],
    "localQueues": [
        {"name": "main", "namespace": "ml-a", "clusterQueue": "cq"},
        {"name": "main", "namespace": "ml-b", "clusterQueue": "cq"},
    ],
}
TEAMS = [
    {"name": "a", "namespaces": ["ml-a"], "maxTier": "training-high", "groups": ["a@example.com"]},
    {"name": "b", "namespaces": ["ml-b"], "maxTier": "training-low", "users": ["bob@example.com"]},
]


def problems_of(**overrides: Any) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_platform_config(platform(**overrides))
    return info.value.problems


def test_teams_are_validated_with_path_value_and_what_is_allowed() -> None:
    assert parse_platform_config(platform(queues=QUEUES, teams=TEAMS)).teams[1].max_tier == "training-low"
    bad = [
        {**TEAMS[0], "maxTier": "urgent"},
        {**TEAMS[1], "namespaces": ["ml-b", "ml-c", "ml-a"]},
        {"name": "a", "namespaces": ["ml-a"], "groups": ["two words"]},
    ]
    problems = problems_of(queues=QUEUES, teams=bad)
    assert (
        ".teams[0].maxTier: 'urgent' is not a priority tier of this stack (tiers: training-high, training-low, "
        "best-effort)"
    ) in str(problems)
    assert ".teams[1].namespaces[1]: 'ml-c' has no LocalQueue, so no TPU work can run there (namespaces with one: " in (
        str(problems)
    )
    assert ".teams[1].namespaces[2]: 'ml-a' already belongs to teams[0] ('a')" in str(problems)
    assert ".teams[2].name: 'a' is already used by teams[0]" in str(problems)
    assert ".teams[2].groups[0]: 'two words' is not a user or group name" in str(problems)


def test_once_teams_are_declared_every_queue_namespace_has_one() -> None:
    problems = problems_of(queues=QUEUES, teams=TEAMS[:1])
    assert any(
        ".queues.localQueues[1].namespace: 'ml-b' belongs to no team; once `teams` is set every namespace with a "
        "LocalQueue needs one" in p
        for p in problems
    ), problems


def test_a_team_namespace_cannot_be_exempt_from_the_admission_policy() -> None:
    problems = problems_of(queues=QUEUES, admissionPolicy={"exemptNamespaces": ["monitoring", "ml-a"]})
    assert any(".admissionPolicy.exemptNamespaces: 'ml-a' has a LocalQueue" in p for p in problems), problems


def test_exempt_namespaces_add_to_the_system_ones() -> None:
    """A namespace of one's own is added; GKE's and Kubernetes' stay exempt whatever the list says."""
    config = parse_platform_config(platform(queues=QUEUES, admissionPolicy={"exemptNamespaces": ["monitoring"]}))
    for _, _, binding in admission_objects(config):
        (selector,) = binding["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"]
        assert {"monitoring", "kube-system", "gmp-system", "gke-managed-system"} <= set(selector["values"])
        assert not {"ml-a", "ml-b"} & set(selector["values"])


def test_the_reconciler_gets_the_same_entitlements() -> None:
    data = reconciler_config(parse_platform_config(platform(queues=QUEUES, teams=TEAMS)))
    assert data["maxPreemptorPriority"] == {"ml-a": 2_000_000, "ml-b": 1_000_000}
    assert data["protectNamespaces"] == []
    assert "maxPreemptorPriority" not in reconciler_config(parse_platform_config(platform(queues=QUEUES)))
    with pytest.raises(ConfigError):
        parse_platform_config(platform(hotswap={"settings": {"protectNamespaces": ["ml-b"]}}))


def prod_objects() -> list[dict[str, Any]]:
    return kubernetes_objects(stack_run("prod").resources)


def test_prod_writes_each_teams_entitlement_on_its_local_queue() -> None:
    queues = {o["metadata"]["namespace"]: o for o in prod_objects() if o["kind"] == "LocalQueue"}
    annotations = {ns: q["metadata"]["annotations"] for ns, q in queues.items()}
    assert annotations == {
        "team-a": {ALLOWED_TIERS_ANNOTATION: "training-high,training-low,best-effort", MAY_PROTECT_ANNOTATION: "false"},
        "team-b": {ALLOWED_TIERS_ANNOTATION: "training-low,best-effort", MAY_PROTECT_ANNOTATION: "false"},
    }
    config = load_stack_config("prod")["gke-tpu-priority:platform"]
    assert [t["maxTier"] for t in config["teams"]] == ["training-high", "training-low"]


def test_prod_binds_each_team_to_the_team_role_in_its_namespaces_only() -> None:
    objects = prod_objects()
    (role,) = [o for o in objects if o["kind"] == "ClusterRole" and o["metadata"]["name"] == TEAM_ROLE]
    assert role == team_cluster_role()
    bindings = {
        o["metadata"]["namespace"]: o
        for o in objects
        if o["kind"] == "RoleBinding" and TEAM_ROLE in o["metadata"]["name"]
    }
    assert sorted(bindings) == ["team-a", "team-b"]
    assert bindings["team-b"]["subjects"] == [
        {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "tpu-team-b@example.com"}
    ]
    assert not [o for o in objects if o["kind"] == "ClusterRoleBinding" and o["roleRef"]["name"] == TEAM_ROLE]


def test_the_team_role_grants_no_route_around_kueue() -> None:
    granted = {
        (group, resource, verb)
        for rule in team_cluster_role()["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    writes = {(g, r) for g, r, v in granted if v in ("create", "update", "patch", "delete")}
    assert writes == {("jobset.x-k8s.io", "jobsets"), ("batch", "jobs")}
    assert not {r for _, r, _ in granted} & {"secrets", "pods/exec", "roles", "rolebindings", "deployments"}
    # The pack's least-privilege rules hold for it.
    assert not check_objects([manifest_object(team_cluster_role())])


def test_prod_admission_policy_refuses_the_routes_around_entitlements() -> None:
    """The prod stack's own policies (its CEL, evaluated offline) on what a team-b member would try."""
    config = parse_platform_config(load_stack_config("prod")["gke-tpu-priority:platform"])
    objects = admission_objects(config)
    policies, bindings = [p for _, p, _ in objects], [b for _, _, b in objects]

    def jobset(namespace: str, tier: str, **annotations: str) -> dict[str, Any]:
        spec = {
            "name": "llm",
            "namespace": namespace,
            "queue": "training",
            "priority": tier,
            "topology": "4x4",
            "slices": 2,
            "image": "trainer:1",
            "command": ["python", "train.py"],
        }
        obj = tpu_jobset(TpuJobSetSpec.model_validate(spec))
        obj["metadata"]["annotations"].update(annotations)
        return obj

    assert evaluate(policies, bindings, jobset("team-a", "training-high")).failures == []
    assert evaluate(policies, bindings, jobset("team-b", "training-low")).failures == []
    assert evaluate(policies, bindings, jobset("team-b", "training-high")).rules == {"tpu-workload-tier-entitled"}
    protected = jobset("team-a", "training-high", **{"hotswap.gke-tpu-priority.io/protect": "true"})
    assert evaluate(policies, bindings, protected).rules == {"hotswap-protect-entitled"}
    tpu_pods = jobset("team-b", "training-low")["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "namespace": "team-b"},
        "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": tpu_pods},
    }
    assert evaluate(policies, bindings, deployment).rules == {"tpu-only-through-kueue"}
    elsewhere = jobset("team-b", "training-low")
    elsewhere["metadata"]["namespace"] = "scratch"
    assert evaluate(policies, bindings, elsewhere).rules == {"tpu-workload-queue-declared"}
