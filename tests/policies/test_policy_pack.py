"""The pack as a whole: files, metadata of every policy, and evaluate_resources over a resources.json list."""

from __future__ import annotations

import ast
import copy
import re
from pathlib import Path
from typing import Any

import yaml
from pulumi_policy import EnforcementLevel, ResourceValidationPolicy, StackValidationPolicy

from tests.policies.policy_testing import LOWER_KEBAB, rules
from tests.policies.test_policy_gke import CLUSTER_PROPS, TPU_POOL
from tests.policies.test_policy_kueue_jobset import CLUSTER_QUEUE, LOCAL_QUEUE, jobset
from tests.policies.test_policy_workload_security import CLUSTER_ROLE, DEPLOYMENT

PACK = Path(__file__).resolve().parents[2] / "policies"
SECRET_KEY, SECRET_VALUE = rules.PULUMI_SECRET_SIGNATURE


def test_pulumi_policy_yaml() -> None:
    project = yaml.safe_load((PACK / "PulumiPolicy.yaml").read_text())
    assert project["runtime"] == {"name": "python", "options": {"virtualenv": "venv"}}
    assert re.fullmatch(r"\d+\.\d+\.\d+", project["version"])
    assert project["description"]
    assert "pulumi-policy" in (PACK / "requirements.txt").read_text()
    assert {"venv/", "__pycache__/"} <= set((PACK / ".gitignore").read_text().split())


def test_main_only_builds_the_pack() -> None:
    tree = ast.parse((PACK / "__main__.py").read_text())
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "PolicyPack"]
    assert len(calls) == 1
    keywords = {k.arg: k.value for k in calls[0].keywords}
    assert ast.literal_eval(keywords["name"]) == "gke-tpu-priority"
    assert ast.unparse(keywords["policies"]) == "rules.ALL"
    assert not [n for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)]


def test_every_policy_has_good_metadata() -> None:
    names = [p.name for p in rules.ALL]
    assert len(names) == len(set(names)), "policy names must be unique"
    for policy in rules.ALL:
        assert LOWER_KEBAB.match(policy.name) and len(policy.name) <= 100, policy.name
        assert policy.description[0].isupper() and policy.description.endswith("."), policy.name
        assert policy.enforcement_level in (EnforcementLevel.MANDATORY, EnforcementLevel.ADVISORY)
        assert policy.severity is not None and policy.tags
        if policy.config_schema:
            for key, spec in policy.config_schema.properties.items():
                assert "default" in spec and spec.get("description"), f"{policy.name}.{key}"
    priority = [p for p in rules.ALL if "priority" in (p.tags or [])]
    assert len(priority) >= 4 and all(p.enforcement_level is EnforcementLevel.MANDATORY for p in priority)
    assert {type(p) for p in rules.ALL} == {ResourceValidationPolicy, StackValidationPolicy}


def resource(resource_type: str, name: str, inputs: dict[str, Any], stack: str = "dev") -> dict[str, Any]:
    return {
        "urn": f"urn:pulumi:{stack}::gke-tpu-priority::{resource_type}::{name}",
        "type": resource_type,
        "name": name,
        "parent": None,
        "inputs": copy.deepcopy(inputs),
    }


def compliant_stack(stack: str = "dev") -> list[dict[str, Any]]:
    pc = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "high-priority-job"},
        "value": 2000000.0,
    }
    wpc = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": "high-priority-job"},
        "value": 2000000,
    }
    return [
        resource("gcp:container/cluster:Cluster", "tpu-cluster", CLUSTER_PROPS, stack),
        resource("gcp:container/nodePool:NodePool", "tpu-pool", TPU_POOL, stack),
        resource("kubernetes:scheduling.k8s.io/v1:PriorityClass", "high-priority-job", pc, stack),
        resource("kubernetes:yaml/v2:ConfigGroup", "workload-priorities", {"objs": [wpc]}, stack),
        resource("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue", "tpu-training-cq", CLUSTER_QUEUE, stack),
        resource("kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue", "tpu-training", LOCAL_QUEUE, stack),
        resource("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet", "llm", jobset(), stack),
        resource("kubernetes:apps/v1:Deployment", "hotswap-reconciler", DEPLOYMENT, stack),
        resource("kubernetes:rbac.authorization.k8s.io/v1:ClusterRole", "hotswap-reconciler", CLUSTER_ROLE, stack),
    ]


def test_compliant_stack_has_no_violations() -> None:
    assert rules.evaluate_resources(compliant_stack("prod")) == []


def test_violations_name_policy_resource_and_level() -> None:
    resources = compliant_stack()
    resources[1]["inputs"]["nodeConfig"]["workloadMetadataConfig"] = {"mode": "GCE_METADATA"}
    resources[4]["inputs"]["spec"]["cohort"] = "legacy"
    resources[5]["inputs"]["spec"]["clusterQueue"] = "missing-cq"
    violations = rules.evaluate_resources(resources)
    by_policy = {v.policy: v for v in violations}
    assert set(by_policy) == {
        "gcp-container-nodepool-require-gke-metadata-server",
        "kueue-v1beta2-clusterqueue-valid-spec",
        "kueue-v1beta2-localqueue-targets-existing-clusterqueue",
    }
    metadata = by_policy["gcp-container-nodepool-require-gke-metadata-server"]
    assert metadata.resource_urn == resources[1]["urn"] and metadata.blocking
    assert "Node pool 'tpu-pool'" in metadata.message
    assert by_policy["kueue-v1beta2-localqueue-targets-existing-clusterqueue"].resource_urn is None


def test_secrets_are_unwrapped() -> None:
    resources = compliant_stack()
    account = resources[1]["inputs"]["nodeConfig"]["serviceAccount"]
    resources[1]["inputs"]["nodeConfig"]["serviceAccount"] = {SECRET_KEY: SECRET_VALUE, "value": account}
    resources[3]["inputs"] = {SECRET_KEY: SECRET_VALUE, "value": resources[3]["inputs"]}
    assert rules.evaluate_resources(resources) == []
    resources[1]["inputs"]["nodeConfig"]["serviceAccount"]["value"] = "default"
    assert [v.policy for v in rules.evaluate_resources(resources)] == [
        "gcp-container-nodepool-disallow-default-service-account"
    ]


def test_pack_config_levels_and_properties() -> None:
    resources = compliant_stack("prod")
    resources[0]["inputs"]["deletionProtection"] = False
    (violation,) = rules.evaluate_resources(resources)
    assert violation.policy == "gcp-container-cluster-enable-deletion-protection"
    assert rules.evaluate_resources(resources, {violation.policy: "disabled"}) == []
    assert rules.evaluate_resources(resources, {violation.policy: {"production": False}}) == []
    (advisory,) = rules.evaluate_resources(resources, {"all": "advisory"})
    assert advisory.enforcement_level is EnforcementLevel.ADVISORY and not advisory.blocking
    dev = compliant_stack("dev")
    dev[0]["inputs"]["deletionProtection"] = False
    assert rules.evaluate_resources(dev) == []
    assert len(rules.evaluate_resources(dev, stack_tags={"environment": "production"})) == 1


def test_unknown_values_elsewhere_do_not_stop_a_policy() -> None:
    from pulumi_policy.proxy import UNKNOWN_STRING_VALUE

    from tests.policies.policy_testing import resource_args, run_policy

    props = copy.deepcopy(TPU_POOL)
    props["cluster"] = UNKNOWN_STRING_VALUE  # the cluster name is an output during preview
    args = resource_args("gcp:container/nodePool:NodePool", props, name="tpu-pool")  # proxied, as the engine does
    for policy in rules.RESOURCE_POLICIES:
        assert run_policy(policy, args) == [], policy.name
