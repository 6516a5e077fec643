"""The offline CRD validator accepts valid Kueue/JobSet objects and rejects each kind of mistake."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from testkit.stacks import FLEET_STACKS
from tests.support import crd_validation as cv
from tests.support import kube_schemas
from tests.support.upstream_data import KUEUE_CRDS, KUEUE_V015_CRDS, reference_files
from tests.test_fleet import fleet_cluster_objects

REPO = Path(__file__).resolve().parents[1]
KUEUE_V1BETA2 = "kueue.x-k8s.io/v1beta2"

RESOURCE_FLAVOR: dict[str, Any] = {
    "apiVersion": KUEUE_V1BETA2,
    "kind": "ResourceFlavor",
    "metadata": {"name": "tpu-v6e-slice"},
    "spec": {
        "nodeLabels": {
            "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
            "cloud.google.com/gke-tpu-topology": "4x4",
        },
        "tolerations": [{"key": "google.com/tpu", "operator": "Exists", "effect": "NoSchedule"}],
    },
}

CLUSTER_QUEUE: dict[str, Any] = {
    "apiVersion": KUEUE_V1BETA2,
    "kind": "ClusterQueue",
    "metadata": {"name": "tpu-training-cq"},
    "spec": {
        "namespaceSelector": {},
        "cohortName": "tpu-cohort",
        "queueingStrategy": "BestEffortFIFO",
        "preemption": {
            "withinClusterQueue": "LowerPriority",
            "reclaimWithinCohort": "Any",
            "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 100},
        },
        "resourceGroups": [
            {
                "coveredResources": ["google.com/tpu"],
                "flavors": [{"name": "tpu-v6e-slice", "resources": [{"name": "google.com/tpu", "nominalQuota": 32}]}],
            }
        ],
    },
}

LOCAL_QUEUE: dict[str, Any] = {
    "apiVersion": KUEUE_V1BETA2,
    "kind": "LocalQueue",
    "metadata": {"name": "tpu-training", "namespace": "team-a"},
    "spec": {"clusterQueue": "tpu-training-cq"},
}

WORKLOAD_PRIORITY_CLASS: dict[str, Any] = {
    "apiVersion": KUEUE_V1BETA2,
    "kind": "WorkloadPriorityClass",
    "metadata": {"name": "high-priority-job"},
    "value": 2000000,
    "description": "Production training that may preempt research jobs.",
}

COHORT: dict[str, Any] = {
    "apiVersion": KUEUE_V1BETA2,
    "kind": "Cohort",
    "metadata": {"name": "tpu-cohort"},
    "spec": {
        "resourceGroups": [
            {
                "coveredResources": ["google.com/tpu"],
                "flavors": [{"name": "tpu-v6e-slice", "resources": [{"name": "google.com/tpu", "nominalQuota": 16}]}],
            }
        ]
    },
}


def tpu_jobset() -> dict[str, Any]:
    """A hotswap-style TPU JobSet: one v6e 4x4 slice (4 hosts x 4 chips) per replica."""
    pod_spec = {
        "priorityClassName": "high-priority-job",
        "nodeSelector": {
            "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
            "cloud.google.com/gke-tpu-topology": "4x4",
        },
        "restartPolicy": "Never",
        "containers": [
            {
                "name": "trainer",
                "image": "us-docker.pkg.dev/example/train@sha256:" + "a" * 64,
                "resources": {"limits": {"google.com/tpu": 4}, "requests": {"google.com/tpu": "4"}},
                "ports": [{"containerPort": 8471}],
            }
        ],
    }
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {
            "name": "llm-pretrain",
            "namespace": "team-a",
            "labels": {
                "kueue.x-k8s.io/queue-name": "tpu-training",
                "kueue.x-k8s.io/priority-class": "high-priority-job",
            },
            "annotations": {"alpha.jobset.sigs.k8s.io/exclusive-topology": "cloud.google.com/gke-nodepool"},
        },
        "spec": {
            "failurePolicy": {
                "maxRestarts": 10,
                "restartStrategy": "BlockingRecreate",
                "rules": [
                    {
                        "name": "preemptedOrEvicted",
                        "action": "RestartJobSetAndIgnoreMaxRestarts",
                        "onJobFailureReasons": ["PodFailurePolicy"],
                    }
                ],
            },
            "replicatedJobs": [
                {
                    "name": "slice",
                    "replicas": 2,
                    "template": {
                        "spec": {
                            "parallelism": 4,
                            "completions": 4,
                            "backoffLimit": 0,
                            "template": {"metadata": {"labels": {"app": "llm"}}, "spec": pod_spec},
                        }
                    },
                }
            ],
        },
    }


def errors_at(result: cv.ValidationResult, path: str) -> list[cv.FieldError]:
    return [e for e in result.errors if e.path == path]


def mutated(obj: dict[str, Any], **dotted: Any) -> dict[str, Any]:
    """Deep copy with `a__b__0__c=value` paths set (value `DELETE` removes the key)."""
    out = copy.deepcopy(obj)
    for dotted_path, value in dotted.items():
        parts: list[Any] = [int(p) if p.isdigit() else p for p in dotted_path.split("__")]
        target = out
        for part in parts[:-1]:
            target = target[part]
        if value is DELETE:
            del target[parts[-1]]
        else:
            target[parts[-1]] = value
    return out


DELETE = object()


# ----- valid objects pass --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "obj",
    [RESOURCE_FLAVOR, CLUSTER_QUEUE, LOCAL_QUEUE, WORKLOAD_PRIORITY_CLASS, COHORT, tpu_jobset()],
    ids=lambda o: o["kind"],
)
def test_valid_objects_pass(obj: dict[str, Any]) -> None:
    result = cv.assert_valid(obj)
    assert result.errors == () and result.pruned == ()


def test_valid_tpu_jobset_keeps_pod_template_metadata() -> None:
    # Embedded ObjectMeta in JobSet templates is declared (labels/annotations), so nothing is pruned.
    result = cv.validate(tpu_jobset())
    assert result.ok, result.describe()
    assert result.kind == "JobSet" and result.name == "llm-pretrain"


# ----- each class of mistake is rejected at the right path -----------------------------------------------


def test_unknown_field_is_reported_as_pruned() -> None:
    result = cv.validate(mutated(LOCAL_QUEUE, spec__clusterQeue="typo"))
    assert result.pruned_paths == ["spec.clusterQeue"]
    assert not result.ok


def test_wrong_type_is_rejected_and_blocks_cel() -> None:
    result = cv.validate(mutated(WORKLOAD_PRIORITY_CLASS, value="high"))
    assert [e.type for e in errors_at(result, "value")] == [cv.ErrorType.TYPE_INVALID]
    assert any("validation rules were not checked" in e.detail for e in result.errors)


def test_missing_required_field_is_rejected() -> None:
    result = cv.validate(mutated(WORKLOAD_PRIORITY_CLASS, value=DELETE))
    assert [e.type for e in errors_at(result, "value")] == [cv.ErrorType.REQUIRED]
    nested = cv.validate(mutated(CLUSTER_QUEUE, spec__resourceGroups__0__flavors__0__resources__0__nominalQuota=DELETE))
    assert [e.type for e in errors_at(nested, "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota")] == [
        cv.ErrorType.REQUIRED
    ]


def test_enum_violation_is_rejected() -> None:
    result = cv.validate(mutated(CLUSTER_QUEUE, spec__preemption__withinClusterQueue="Always"))
    (error,) = errors_at(result, "spec.preemption.withinClusterQueue")
    assert error.type is cv.ErrorType.NOT_SUPPORTED and "'LowerPriority'" in error.detail


def test_int32_overflow_is_rejected() -> None:
    result = cv.validate(mutated(WORKLOAD_PRIORITY_CLASS, value=2**31))
    assert [e.type for e in errors_at(result, "value")] == [cv.ErrorType.INVALID]


def test_pattern_and_quantity_checks() -> None:
    result = cv.validate(mutated(CLUSTER_QUEUE, spec__resourceGroups__0__flavors__0__resources__0__nominalQuota="lots"))
    assert errors_at(result, "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota")
    ok = cv.validate(mutated(CLUSTER_QUEUE, spec__resourceGroups__0__flavors__0__resources__0__nominalQuota="32"))
    assert ok.ok, ok.describe()


def test_integral_float_counts_as_integer_but_fraction_does_not() -> None:
    # Pulumi delivers numbers as floats; 2000000.0 reaches the API server as 2000000.
    assert cv.validate(mutated(WORKLOAD_PRIORITY_CLASS, value=2000000.0)).ok
    assert errors_at(cv.validate(mutated(WORKLOAD_PRIORITY_CLASS, value=2.5)), "value")


def test_list_map_duplicate_keys_are_rejected() -> None:
    doubled = copy.deepcopy(CLUSTER_QUEUE)
    doubled["spec"]["resourceGroups"][0]["flavors"].append(
        copy.deepcopy(doubled["spec"]["resourceGroups"][0]["flavors"][0])
    )
    result = cv.validate(doubled)
    assert [e.type for e in errors_at(result, "spec.resourceGroups[0].flavors[1]")] == [cv.ErrorType.DUPLICATE]


def test_list_set_duplicates_are_rejected() -> None:
    strategy = {"admissionChecks": [{"name": "dws", "onFlavors": ["tpu-v6e-slice", "tpu-v6e-slice"]}]}
    result = cv.validate(mutated(CLUSTER_QUEUE, spec__admissionChecksStrategy=strategy))
    path = "spec.admissionChecksStrategy.admissionChecks[0].onFlavors[1]"
    assert [e.type for e in errors_at(result, path)] == [cv.ErrorType.DUPLICATE]


def test_max_items_is_enforced() -> None:
    group = CLUSTER_QUEUE["spec"]["resourceGroups"][0]
    result = cv.validate(mutated(CLUSTER_QUEUE, spec__resourceGroups=[group] * 17))
    assert [e.type for e in errors_at(result, "spec.resourceGroups")] == [cv.ErrorType.TOO_MANY]


def test_cel_topology_levels_unique_and_hostname_last() -> None:
    def topology(*labels: str) -> dict[str, Any]:
        return {
            "apiVersion": KUEUE_V1BETA2,
            "kind": "Topology",
            "metadata": {"name": "tpu-topology"},
            "spec": {"levels": [{"nodeLabel": label} for label in labels]},
        }

    cv.assert_valid(topology("cloud.google.com/gke-nodepool", "kubernetes.io/hostname"))
    hostname_first = cv.validate(topology("kubernetes.io/hostname", "cloud.google.com/gke-nodepool"))
    assert [e.detail for e in errors_at(hostname_first, "spec.levels")] == [
        "the kubernetes.io/hostname label can only be used at the lowest level of topology"
    ]
    repeated = cv.validate(topology("cloud.google.com/gke-nodepool", "cloud.google.com/gke-nodepool"))
    assert [e.detail for e in errors_at(repeated, "spec.levels")] == ["must be unique"]


def test_null_in_non_nullable_field_is_pruned() -> None:
    result = cv.validate(mutated(LOCAL_QUEUE, spec__stopPolicy=None))
    assert result.pruned_paths == ["spec.stopPolicy"]


def test_defaults_are_applied_before_cel() -> None:
    # reclaimWithinCohort defaults to Never, so borrowWithinCohort.policy=LowerPriority breaks the CEL rule
    # only after defaulting; an implementation without defaulting would error with "no such key" instead.
    cq = mutated(CLUSTER_QUEUE, spec__preemption={"borrowWithinCohort": {"policy": "LowerPriority"}})
    (error,) = errors_at(cv.validate(cq), "spec.preemption")
    assert error.detail == "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never"


# ----- metadata -----------------------------------------------------------------------------------------


def test_metadata_name_must_be_dns_subdomain() -> None:
    result = cv.validate(mutated(RESOURCE_FLAVOR, metadata__name="TPU_v6e"))
    assert [e.type for e in errors_at(result, "metadata.name")] == [cv.ErrorType.INVALID]


def test_metadata_name_is_required() -> None:
    result = cv.validate(mutated(RESOURCE_FLAVOR, metadata={}))
    assert [e.type for e in errors_at(result, "metadata.name")] == [cv.ErrorType.REQUIRED]


def test_namespaced_kind_needs_namespace() -> None:
    result = cv.validate(mutated(LOCAL_QUEUE, metadata__namespace=DELETE))
    assert [e.type for e in errors_at(result, "metadata.namespace")] == [cv.ErrorType.REQUIRED]


def test_namespace_on_cluster_scoped_kind_is_dropped() -> None:
    result = cv.validate(mutated(CLUSTER_QUEUE, metadata__namespace="team-a"))
    assert result.pruned_paths == ["metadata.namespace"]


def test_bad_label_key_and_unknown_metadata_field() -> None:
    result = cv.validate(mutated(LOCAL_QUEUE, metadata__labels={"bad key": "v"}, metadata__lables={"a": "b"}))
    assert errors_at(result, "metadata.labels[bad key]")
    assert result.pruned_paths == ["metadata.lables"]


# ----- CEL rules from the real CRDs ----------------------------------------------------------------------


def test_cel_flavors_must_cover_every_resource() -> None:
    cq = copy.deepcopy(CLUSTER_QUEUE)
    cq["spec"]["resourceGroups"][0]["coveredResources"].append("cpu")
    (error,) = errors_at(cv.validate(cq), "spec.resourceGroups[0]")
    assert error.detail == "flavors must have the same number of resources as the coveredResources"


def test_cel_borrowing_limit_needs_cohort() -> None:
    cq = mutated(CLUSTER_QUEUE, spec__cohortName=DELETE)
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["borrowingLimit"] = 8
    (error,) = errors_at(cv.validate(cq), "spec")
    assert error.detail == "borrowingLimit must be nil when cohort is empty"


def test_cel_flavor_fungibility_preference() -> None:
    cq = mutated(CLUSTER_QUEUE, spec__flavorFungibility={"preference": "BorrowingOverPreemption"})
    (error,) = errors_at(cv.validate(cq), "spec.flavorFungibility")
    assert "preference can only be set" in error.detail


def test_cel_cohort_resource_groups() -> None:
    cohort = copy.deepcopy(COHORT)
    cohort["spec"]["resourceGroups"][0]["flavors"][0]["resources"].append({"name": "cpu", "nominalQuota": 1})
    assert errors_at(cv.validate(cohort), "spec.resourceGroups[0]")


@pytest.mark.parametrize(
    ("toleration", "message"),
    [
        ({"operator": "Equal", "value": "x"}, "operator must be Exists when 'key' is empty"),
        (
            {"key": "k", "operator": "Exists", "value": "x"},
            "a value must be empty when 'operator' is 'Exists'",
        ),
        ({"key": "k", "tolerationSeconds": 5, "effect": "NoSchedule"}, "effect must be 'NoExecute'"),
        ({"key": "k", "operator": "Maybe"}, "supported toleration values"),
    ],
)
def test_cel_resource_flavor_tolerations(toleration: dict[str, Any], message: str) -> None:
    flavor = mutated(RESOURCE_FLAVOR, spec__tolerations=[toleration])
    errors = errors_at(cv.validate(flavor), "spec.tolerations")
    assert any(message in e.detail for e in errors), errors


def test_cel_resource_flavor_topology_needs_node_labels() -> None:
    flavor = mutated(RESOURCE_FLAVOR, spec={"topologyName": "tpu-topology", "nodeLabels": {}})
    (error,) = errors_at(cv.validate(flavor), "spec")
    assert error.detail == "at least one nodeLabel is required when topology is set"


def test_cel_transition_rules_run_only_on_update() -> None:
    # LocalQueue.spec.clusterQueue is immutable (`self == oldSelf`): irrelevant on create, enforced on update.
    catalog = cv.default_catalog()
    moved = mutated(LOCAL_QUEUE, spec__clusterQueue="other-cq")
    assert catalog.validate(moved).ok
    (error,) = errors_at(catalog.validate(moved, old=LOCAL_QUEUE), "spec.clusterQueue")
    assert error.detail == "field is immutable"
    assert catalog.validate(LOCAL_QUEUE, old=LOCAL_QUEUE).ok


def test_cel_jobset_startup_policy_and_depends_on_are_exclusive() -> None:
    jobset = tpu_jobset()
    jobset["spec"]["startupPolicy"] = {"startupPolicyOrder": "InOrder"}
    jobset["spec"]["replicatedJobs"].append(
        {
            "name": "workers",
            "dependsOn": [{"name": "slice", "status": "Ready"}],
            "template": copy.deepcopy(jobset["spec"]["replicatedJobs"][0]["template"]),
        }
    )
    (error,) = errors_at(cv.validate(jobset), "spec")
    assert error.detail == "StartupPolicy and DependsOn APIs are mutually exclusive"


def test_jobset_failure_policy_rule_needs_name_and_known_action() -> None:
    jobset = tpu_jobset()
    jobset["spec"]["failurePolicy"]["rules"] = [{"action": "RestartEverything"}]
    result = cv.validate(jobset)
    assert [e.type for e in errors_at(result, "spec.failurePolicy.rules[0].name")] == [cv.ErrorType.REQUIRED]
    assert [e.type for e in errors_at(result, "spec.failurePolicy.rules[0].action")] == [cv.ErrorType.NOT_SUPPORTED]


def test_unsupported_cel_function_is_an_explicit_error() -> None:
    with pytest.raises(cv.UnsupportedCelFunctionError, match="isQuantity"):
        cv.compile_rule("isQuantity(self.x)")
    assert cv.compile_rule("self.l.isSorted() && self.l.all(x, x > 0)").uses_old_self is False


def test_kubernetes_list_functions_evaluate() -> None:
    schema = {"type": "object", "properties": {"l": {"type": "array", "items": {"type": "integer"}}}}
    findings = cv.Findings()
    validator = cv._CelValidator(findings)
    rules = {"x-kubernetes-validations": [{"rule": "self.l.isSorted() && self.l.sum() == 6 && self.l.max() == 3"}]}
    validator.walk({"l": [1, 2, 3]}, None, {**schema, **rules}, ())
    assert findings.errors == []
    validator.walk({"l": [3, 2, 1]}, None, {**schema, **rules}, ())
    assert len(findings.errors) == 1


# ----- Kueue API-version mistakes the seed made ----------------------------------------------------------


def test_v1beta1_cohort_field_is_pruned_on_v1beta2() -> None:
    cq = mutated(CLUSTER_QUEUE, spec__cohortName=DELETE, spec__cohort="tpu-cohort")
    assert cv.validate(cq).pruned_paths == ["spec.cohort"]


def test_cohort_field_is_valid_on_v1beta1() -> None:
    cq = mutated(CLUSTER_QUEUE, apiVersion="kueue.x-k8s.io/v1beta1", spec__cohortName=DELETE, spec__cohort="c")
    assert cv.validate(cq).ok


def test_resource_group_without_covered_resources_is_rejected() -> None:
    cq = mutated(CLUSTER_QUEUE, spec__resourceGroups__0__coveredResources=DELETE)
    result = cv.validate(cq)
    assert [e.type for e in errors_at(result, "spec.resourceGroups[0].coveredResources")] == [cv.ErrorType.REQUIRED]


def test_reclaim_out_of_cohort_does_not_exist() -> None:
    cq = mutated(CLUSTER_QUEUE, spec__preemption__reclaimOutOfCohort="LowerPriority")
    assert cv.validate(cq).pruned_paths == ["spec.preemption.reclaimOutOfCohort"]


def test_unserved_version_is_an_explicit_error() -> None:
    with pytest.raises(cv.UnknownKindError, match="served: v1beta1, v1beta2"):
        cv.validate(mutated(CLUSTER_QUEUE, apiVersion="kueue.x-k8s.io/v1alpha1"))


# GKE's TPU best-practice Kueue sample as its page describes it: one flavor, 32 chips, no coveredResources, and a
# preemption field Kueue has never had, written against v1beta1.
GKE_DOCS_SAMPLE = """
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata:
  name: tpu-v6e-slice
spec:
  nodeLabels:
    cloud.google.com/gke-tpu-accelerator: tpu-v6e-slice
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata:
  name: tpu-training-cq
spec:
  namespaceSelector: {}
  preemption:
    reclaimWithinCohort: Any
    reclaimOutOfCohort: Any
    withinClusterQueue: LowerPriority
  resourceGroups:
  - flavors:
    - name: tpu-v6e-slice
      resources:
      - name: google.com/tpu
        nominalQuota: 32
"""


def test_gke_docs_sample_is_rejected_and_corrected_version_passes() -> None:
    flavor, queue = yaml.safe_load_all(GKE_DOCS_SAMPLE)
    assert cv.validate(flavor).ok
    result = cv.validate(queue)
    assert errors_at(result, "spec.resourceGroups[0].coveredResources")
    assert result.pruned_paths == ["spec.preemption.reclaimOutOfCohort"]

    corrected = mutated(queue, apiVersion=KUEUE_V1BETA2, spec__preemption__reclaimOutOfCohort=DELETE)
    corrected["spec"]["resourceGroups"][0]["coveredResources"] = ["google.com/tpu"]
    cv.assert_valid(corrected)
    cv.assert_valid(mutated(flavor, apiVersion=KUEUE_V1BETA2))


def test_assert_valid_lists_every_problem() -> None:
    broken = mutated(CLUSTER_QUEUE, spec__cohort="x", spec__resourceGroups__0__coveredResources=DELETE)
    with pytest.raises(AssertionError) as failure:
        cv.assert_valid(broken)
    assert "spec.cohort: pruned" in str(failure.value)
    assert "spec.resourceGroups[0].coveredResources: Required value" in str(failure.value)


# ----- catalog loading ------------------------------------------------------------------------------------


def test_catalog_parses_only_requested_schemas() -> None:
    catalog = cv.CrdCatalog(files=cv.default_crd_files())
    assert ("kueue.x-k8s.io", "Workload") in catalog.group_kinds()
    catalog.validate(LOCAL_QUEUE)
    assert [p.name for p in catalog.parsed_files] == ["kueue.x-k8s.io_localqueues.yaml"]


def test_two_kueue_releases_in_one_catalog_are_refused(tmp_path: Path) -> None:
    both = [*reference_files(KUEUE_CRDS), *reference_files(KUEUE_V015_CRDS)]
    with pytest.raises(ValueError, match="defined twice"):
        cv.CrdCatalog(files=both)


def test_kueue_v0_15_lacks_concurrent_admission_policy() -> None:
    old = cv.CrdCatalog(files=reference_files(KUEUE_V015_CRDS))
    assert old.validate(CLUSTER_QUEUE).ok
    field_new_in_019 = mutated(CLUSTER_QUEUE, spec__concurrentAdmissionPolicy={})
    assert "spec.concurrentAdmissionPolicy" in old.validate(field_new_in_019).pruned_paths


# ----- built-in kinds and CLI -----------------------------------------------------------------------------


PRIORITY_CLASS: dict[str, Any] = {
    "apiVersion": "scheduling.k8s.io/v1",
    "kind": "PriorityClass",
    "metadata": {"name": "high-priority-job"},
    "value": 2000000,
    "preemptionPolicy": "PreemptLowerPriority",
}


def test_builtin_kinds_validate_strictly() -> None:
    kube_schemas.assert_valid_builtin(PRIORITY_CLASS)
    typo = kube_schemas.validate_builtin({**PRIORITY_CLASS, "globalDefualt": True})
    assert typo.errors and "globalDefualt" in typo.errors[0].detail
    wrong_type = kube_schemas.validate_builtin({**PRIORITY_CLASS, "value": "high"})
    assert [e.path for e in wrong_type.errors] == ["value"]


def test_builtin_metadata_scope_checks() -> None:
    deployment: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "hotswap"},
        "spec": {
            "selector": {"matchLabels": {"app": "hotswap"}},
            "template": {
                "metadata": {"labels": {"app": "hotswap"}},
                "spec": {"containers": [{"name": "c", "image": "x"}]},
            },
        },
    }
    assert [e.path for e in kube_schemas.validate_builtin(deployment).errors] == ["metadata.namespace"]
    deployment["metadata"]["namespace"] = "hotswap-system"
    kube_schemas.assert_valid_builtin(deployment)
    assert cv.validate_manifest(deployment).ok


def test_unknown_builtin_schema_is_an_error() -> None:
    with pytest.raises(kube_schemas.SchemaNotFoundError):
        kube_schemas.validate_builtin({"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g"}})


def test_cli_validates_multi_document_yaml(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(yaml.safe_dump_all([RESOURCE_FLAVOR, CLUSTER_QUEUE, PRIORITY_CLASS]))
    bad = tmp_path / "bad.yaml"
    bad.write_text(GKE_DOCS_SAMPLE)
    assert cv.main([str(good), "--kube-version", "1.33", "-q"]) == 0
    assert cv.main([str(good)]) == 1  # PriorityClass has no CRD and no --kube-version
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.support.crd_validation",
            "--crds",
            str(reference_files(KUEUE_CRDS)[0].parent),
            str(bad),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 1, run.stderr
    assert "FAIL" in run.stdout and "spec.preemption.reclaimOutOfCohort: pruned" in run.stdout


# ----- every object of every cluster of a fleet stack -----------------------------------------------------


# The reconciler's PodMonitoring and Rules (GKE Managed Prometheus) have no CRD in the pinned reference data.
UNPINNED_GROUP = "monitoring.googleapis.com"


@pytest.mark.parametrize("stack", FLEET_STACKS)
def test_every_fleet_object_of_every_cluster_is_valid_with_nothing_pruned(stack: str) -> None:
    failures = []
    for cluster, objs in fleet_cluster_objects(stack).items():
        for obj in objs:
            if str(obj.get("apiVersion", "")).startswith(f"{UNPINNED_GROUP}/"):
                continue  # GKE Managed Prometheus: no pinned CRD; tests/test_monitoring.py checks these objects
            result = cv.validate_manifest(obj)
            if not result.ok or result.pruned:
                failures.append(f"{cluster}: {obj['kind']}/{obj['metadata']['name']}: {result.describe()}")
    assert not failures, "\n".join(failures)
    manager = {o["kind"] for o in fleet_cluster_objects(stack)["manager"]}
    assert {"MultiKueueCluster", "MultiKueueConfig", "AdmissionCheck", "ClusterQueue", "LocalQueue"} <= manager
