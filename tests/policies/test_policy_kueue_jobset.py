"""Kueue object shape (v1beta2, ClusterQueue spec, LocalQueue targets) and TPU JobSet conventions."""

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
    run_policy,
    stack_args,
)
from tests.support import crd_validation

CQ_TYPE = "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue"
LQ_TYPE = "kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue"
JOBSET_TYPE = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"

CLUSTER_QUEUE: dict[str, Any] = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "ClusterQueue",
    "metadata": {"name": "tpu-training-cq"},
    "spec": {
        "namespaceSelector": {},
        "cohortName": "tpu",
        "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"},
        "resourceGroups": [
            {
                "coveredResources": ["google.com/tpu"],
                "flavors": [{"name": "tpu-v6e-slice", "resources": [{"name": "google.com/tpu", "nominalQuota": 32}]}],
            }
        ],
    },
}
LOCAL_QUEUE: dict[str, Any] = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "LocalQueue",
    "metadata": {"name": "tpu-training", "namespace": "team-a"},
    "spec": {"clusterQueue": "tpu-training-cq"},
}


def jobset() -> dict[str, Any]:
    pod = {
        "priorityClassName": "high-priority-job",
        "nodeSelector": {
            "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
            "cloud.google.com/gke-tpu-topology": "4x4",
        },
        "restartPolicy": "Never",
        "containers": [{"name": "trainer", "image": "trainer:1", "resources": {"limits": {"google.com/tpu": 4}}}],
    }
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {
            "name": "llm",
            "namespace": "team-a",
            "labels": {
                "kueue.x-k8s.io/queue-name": "tpu-training",
                "kueue.x-k8s.io/priority-class": "high-priority-job",
            },
            "annotations": {"alpha.jobset.sigs.k8s.io/exclusive-topology": "cloud.google.com/gke-nodepool"},
        },
        "spec": {
            "failurePolicy": {"maxRestarts": 10, "restartStrategy": "BlockingRecreate"},
            "replicatedJobs": [
                {
                    "name": "slice",
                    "replicas": 2,
                    "template": {
                        "spec": {"parallelism": 4, "completions": 4, "backoffLimit": 0, "template": {"spec": pod}}
                    },
                }
            ],
        },
    }


def test_fixtures_are_valid_for_the_real_crds() -> None:
    for obj in (CLUSTER_QUEUE, LOCAL_QUEUE, jobset()):
        crd_validation.assert_valid(obj)


def test_metadata() -> None:
    for policy in (
        rules.KUEUE_REQUIRE_V1BETA2,
        rules.KUEUE_CLUSTER_QUEUE_SHAPE,
        rules.KUEUE_LOCAL_QUEUE_TARGETS_EXISTING_CLUSTER_QUEUE,
        rules.TPU_WORKLOAD_REQUIRE_QUEUE_NAME,
        rules.TPU_WORKLOAD_QUEUE_DECLARED,
        rules.JOBSET_EXCLUSIVE_TOPOLOGY,
        rules.TPU_WORKLOAD_FITS_V6E_SHAPE,
    ):
        assert_policy_metadata(policy, EnforcementLevel.MANDATORY)


# ----- v1beta2 -----


def test_v1beta2_passes() -> None:
    assert_no_violations(rules.KUEUE_REQUIRE_V1BETA2, resource_args(CQ_TYPE, CLUSTER_QUEUE, name="cq"))


def test_v1beta1_custom_resource_is_rejected() -> None:
    props = {**CLUSTER_QUEUE, "apiVersion": "kueue.x-k8s.io/v1beta1"}
    args = resource_args("kubernetes:kueue.x-k8s.io/v1beta1:ClusterQueue", props, name="tpu-training-cq")
    assert_has_violation(
        rules.KUEUE_REQUIRE_V1BETA2, args, "ClusterQueue 'tpu-training-cq' uses kueue.x-k8s.io/v1beta1"
    )


def test_v1beta1_inside_config_group_is_rejected() -> None:
    wpc = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": "p"},
        "value": 1,
    }
    args = resource_args("kubernetes:yaml/v2:ConfigGroup", {"objs": [wpc]}, name="priorities")
    assert_has_violation(rules.KUEUE_REQUIRE_V1BETA2, args, "WorkloadPriorityClass 'p' (Pulumi resource 'priorities')")


# ----- ClusterQueue shape -----


def test_compliant_cluster_queue_passes() -> None:
    assert_no_violations(rules.KUEUE_CLUSTER_QUEUE_SHAPE, resource_args(CQ_TYPE, CLUSTER_QUEUE))


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda s: s.pop("namespaceSelector"), "has no spec.namespaceSelector"),
        (lambda s: s.update(cohort=s.pop("cohortName")), "sets spec.cohort, which v1beta2 drops; use spec.cohortName"),
        (
            lambda s: s["resourceGroups"][0].pop("coveredResources"),
            "spec.resourceGroups[0] has no coveredResources; list the resources its flavors cover (google.com/tpu)",
        ),
        (lambda s: s["preemption"].update(reclaimOutOfCohort="Any"), "sets spec.preemption.reclaimOutOfCohort"),
    ],
    ids=["no-namespace-selector", "cohort", "no-covered-resources", "reclaim-out-of-cohort"],
)
def test_cluster_queue_mistakes_are_rejected(mutate: Any, message: str) -> None:
    props = copy.deepcopy(CLUSTER_QUEUE)
    mutate(props["spec"])
    messages = assert_has_violation(rules.KUEUE_CLUSTER_QUEUE_SHAPE, resource_args(CQ_TYPE, props), message)
    assert all("ClusterQueue 'tpu-training-cq'" in m for m in messages)
    if "namespaceSelector" in props["spec"]:  # a missing selector is schema-valid: it just admits nothing
        assert not crd_validation.validate(props).ok  # the API server would not take it as written either


# ----- LocalQueue targets -----


def test_local_queue_with_existing_cluster_queue_passes() -> None:
    stack = [(CQ_TYPE, CLUSTER_QUEUE, "cq"), (LQ_TYPE, LOCAL_QUEUE, "lq")]
    assert_no_violations(rules.KUEUE_LOCAL_QUEUE_TARGETS_EXISTING_CLUSTER_QUEUE, stack_args(stack))


def test_local_queue_with_missing_cluster_queue_is_rejected() -> None:
    stack = [(CQ_TYPE, CLUSTER_QUEUE, "cq"), (LQ_TYPE, {**LOCAL_QUEUE, "spec": {"clusterQueue": "gpu-cq"}}, "lq")]
    policy = rules.KUEUE_LOCAL_QUEUE_TARGETS_EXISTING_CLUSTER_QUEUE
    assert_has_violation(
        policy, stack_args(stack), "LocalQueue 'tpu-training' (Pulumi resource 'lq') points to ClusterQueue 'gpu-cq'"
    )
    assert_no_violations(policy, stack_args(stack, {"externalClusterQueues": ["gpu-cq"]}))


# ----- TPU JobSets (the table in test_three_front_ends.py covers every rule; these pin the pack's messages) -----

WORKLOAD_POLICIES = (
    "TPU_WORKLOAD_REQUIRE_QUEUE_NAME",
    "TPU_WORKLOAD_PRIORITY_MATCHES",
    "JOBSET_EXCLUSIVE_TOPOLOGY",
    "TPU_WORKLOAD_FITS_V6E_SHAPE",
)


def workload_messages(props: dict[str, Any]) -> list[str]:
    args = resource_args(JOBSET_TYPE, props, name="llm")
    return [m for name in WORKLOAD_POLICIES for m in run_policy(getattr(rules, name), args)]


def test_compliant_tpu_jobset_passes() -> None:
    assert workload_messages(jobset()) == []


def test_non_tpu_jobset_is_not_checked() -> None:
    cpu = jobset()
    cpu["metadata"] = {"name": "cpu-only"}
    pod = cpu["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    pod["nodeSelector"] = {}
    pod["containers"][0]["resources"] = {"limits": {"cpu": "1"}}
    assert workload_messages(cpu) == []


def test_tpu_detected_from_resources_alone() -> None:
    tpu = jobset()
    tpu["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["nodeSelector"] = {}
    assert_has_violation(rules.TPU_WORKLOAD_FITS_V6E_SHAPE, resource_args(JOBSET_TYPE, tpu), "fit no v6e slice")


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (("metadata", "annotations"), {}, "lacks annotation alpha.jobset.sigs.k8s.io/exclusive-topology"),
        (
            ("metadata", "annotations"),
            {"alpha.jobset.sigs.k8s.io/exclusive-topology": "kubernetes.io/hostname"},
            "lacks annotation alpha.jobset.sigs.k8s.io/exclusive-topology: cloud.google.com/gke-nodepool",
        ),
        (("metadata", "labels", "kueue.x-k8s.io/queue-name"), None, "has no label kueue.x-k8s.io/queue-name"),
        (
            ("metadata", "labels", "kueue.x-k8s.io/priority-class"),
            None,
            "has no label kueue.x-k8s.io/priority-class; set it to 'high-priority-job'",
        ),
        (
            ("metadata", "labels", "kueue.x-k8s.io/priority-class"),
            "low-priority-job",
            "priorityClassName 'high-priority-job' but label kueue.x-k8s.io/priority-class is 'low-priority-job'",
        ),
    ],
    ids=["no-annotation", "wrong-topology-key", "no-queue", "no-kueue-priority", "priority-mismatch"],
)
def test_tpu_jobset_mistakes_are_rejected(path: tuple[str, ...], value: Any, message: str) -> None:
    props = jobset()
    target = props
    for key in path[:-1]:
        target = target[key]
    if value is None:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    messages = workload_messages(props)
    assert any(message in m for m in messages), messages
    assert all("TPU JobSet team-a/llm" in m for m in messages)


def test_pods_without_priority_class_are_rejected() -> None:
    props = jobset()
    del props["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["priorityClassName"]
    assert workload_messages(props) == [
        "TPU JobSet team-a/llm replicatedJobs[slice] pods have no priorityClassName; set it to 'high-priority-job', "
        "the kueue.x-k8s.io/priority-class label."
    ]
