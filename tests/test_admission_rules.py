"""Admission webhooks beyond the CRD schema: everything the package emits passes the pinned releases' webhooks.

The rules live in tests/support/admission_rules.py; here they run over every stack's objects and over the
workload template for every v6e shape and slice count, each rule is shown to fire, and the constants the rules
mirror are checked against the locked upstream Go source so a version bump that changes them fails here.
"""

from __future__ import annotations

import copy
import itertools
import json
import re
from typing import Any

import pytest
from pydantic import ValidationError

from gke_tpu_priority.components import tpu_shapes
from gke_tpu_priority.components.fleet.credentials import token_kubeconfig
from gke_tpu_priority.components.workloads import TpuJobSetSpec, tpu_jobset
from tests.conftest import FLEET_STACKS, STACKS, stack_run
from tests.support import admission_rules as ar
from tests.support.crd_validation import assert_valid
from tests.support.upstream_data import JOBSET, KUEUE, reference_text
from tests.test_fleet import fleet_cluster_objects
from tools.manifests import kubernetes_objects

MAX_SLICES = TpuJobSetSpec.model_fields["slices"].metadata[1].le  # 256: the model's maximum
DNS1035_LABEL_MAX = 63


def longest_generated_pod_name(name: str, rjob: str, slices: int, completions: int) -> str:
    return ar.gen_pod_name(name, rjob, str(slices - 1), str(completions - 1)) + ar.POD_NAME_SUFFIX


def workload(**overrides: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "name": "train",
        "namespace": "team-a",
        "queue": "training",
        "priority": "training-high",
        "topology": "4x4",
        "slices": 2,
        "image": "us-docker.pkg.dev/p/r/train:1",
    }
    raw.update(overrides)
    return tpu_jobset(TpuJobSetSpec.model_validate(raw))


def longest_name(shape: tpu_shapes.SliceShape, slices: int) -> str:
    """The longest JobSet name the builder accepts for this shape and slice count."""
    spare = DNS1035_LABEL_MAX - len(longest_generated_pod_name("", "slice", slices, shape.vms))
    return ("a" * spare)[:DNS1035_LABEL_MAX]


# --- everything the package emits -----------------------------------------------------------------------------------


@pytest.mark.parametrize("stack", STACKS)
def test_every_stack_object_passes_the_webhooks(stack: str) -> None:
    objs = kubernetes_objects(stack_run(stack).resources)
    guarded = [o for o in objs if str(o["apiVersion"]).rpartition("/")[0] in ar.WEBHOOK_GROUPS]
    assert {o["kind"] for o in guarded} >= {"ClusterQueue", "ResourceFlavor", "LocalQueue", "WorkloadPriorityClass"}
    assert ar.problems_in(objs) == []
    # Re-applying the same objects (a no-op `pulumi up`) is an update the webhooks accept too.
    assert [str(p) for o in guarded for p in ar.admission_problems(o, old=o)] == []


@pytest.mark.parametrize("stack", FLEET_STACKS)
def test_every_fleet_object_of_every_cluster_passes_the_webhooks_and_the_multikueue_checks(stack: str) -> None:
    clusters = fleet_cluster_objects(stack)
    for cluster, objs in clusters.items():
        assert ar.problems_in(objs) == [], cluster
        guarded = [o for o in objs if str(o["apiVersion"]).rpartition("/")[0] in ar.WEBHOOK_GROUPS]
        assert [str(p) for o in guarded for p in ar.admission_problems(o, old=o)] == [], cluster
        assert ar.multikueue_problems(objs) == [], cluster
    kinds = {o["kind"] for o in clusters["manager"]}
    assert {"MultiKueueCluster", "MultiKueueConfig", "AdmissionCheck", "ClusterQueue", "Secret"} <= kinds
    # The workers run no MultiKueue objects of their own: they are plain platforms.
    assert all(
        not {"MultiKueueCluster", "MultiKueueConfig"} & {o["kind"] for o in objs}
        for c, objs in clusters.items()
        if c != "manager"
    )


def test_the_rendered_worker_kubeconfig_passes_validate_kubeconfig() -> None:
    text = token_kubeconfig("east5", "https://203.0.113.10", "Q0E=", "a-token")
    assert ar.kubeconfig_problems(text) == []
    dns = token_kubeconfig("east5", "https://gke-abc.us-east5.gke.goog:443", None, "a-token")
    assert ar.kubeconfig_problems(dns) == []


# --- MultiKueue: each controller check fires ----------------------------------------------------------------

MK_CHECK = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "AdmissionCheck",
    "metadata": {"name": "multikueue"},
    "spec": {
        "controllerName": "kueue.x-k8s.io/multikueue",
        "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "multikueue"},
    },
}
MK_CLUSTER = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "MultiKueueCluster",
    "metadata": {"name": "east5"},
    "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret", "location": "multikueue-east5"}}},
}


@pytest.mark.parametrize(
    ("mutation", "paths"),
    [
        (lambda o: o["spec"].pop("parameters"), ["spec.parameters"]),
        (lambda o: o["spec"]["parameters"].update(name=""), ["spec.parameters.name"]),
        (lambda o: o["spec"]["parameters"].update(apiGroup="example.com"), ["spec.parameters.apiGroup"]),
        # A ProvisioningRequestConfig is no MultiKueueConfig (and the reverse for the provisioning controller).
        (lambda o: o["spec"]["parameters"].update(kind="ProvisioningRequestConfig"), ["spec.parameters.kind"]),
        (lambda o: o["spec"].update(controllerName="kueue.x-k8s.io/provisioning-request"), ["spec.parameters.kind"]),
        (lambda o: o["spec"].update(controllerName="example.com/other"), []),  # not Kueue's: not judged
    ],
)
def test_each_multikueue_admission_check_rule_fires(mutation: Any, paths: list[str]) -> None:
    assert ar.admission_problems(MK_CHECK) == []
    bad = _mutate(MK_CHECK, mutation)
    problems = ar.admission_problems(bad)
    assert [p.path for p in problems] == paths
    assert all(p.rule.endswith("admissioncheck.go refValidForGK") for p in problems)


@pytest.mark.parametrize(
    ("mutation", "path", "rule"),
    [
        (
            lambda o: o["spec"].update(clusterSource={"clusterProfileRef": {"name": "east5"}}),
            "spec.clusterSource.clusterProfileRef",
            "clustersReconciler.loadClientConfig",
        ),
        (lambda o: o["spec"].update(clusterSource={}), "spec.clusterSource.kubeConfig", "getKubeConfig"),
        (
            lambda o: o["spec"]["clusterSource"]["kubeConfig"].update(locationType="Path", location="/tmp/kc"),
            "spec.clusterSource.kubeConfig.locationType",
            "getKubeConfigFromPath",
        ),
        (
            lambda o: o["spec"]["clusterSource"]["kubeConfig"].update(location="Multikueue_East5"),
            "spec.clusterSource.kubeConfig.location",
            "getKubeConfigFromSecret",
        ),
    ],
)
def test_each_multikueue_cluster_rule_fires(mutation: Any, path: str, rule: str) -> None:
    assert ar.admission_problems(MK_CLUSTER) == []
    (problem,) = ar.admission_problems(_mutate(MK_CLUSTER, mutation))
    assert problem.path == path and problem.rule.endswith(rule), problem


@pytest.mark.parametrize(
    ("mutation", "path", "detail"),
    [
        (lambda d: d["users"][0]["user"].update(tokenFile="/var/run/t"), "users[0].user.tokenFile", "tokenFile"),
        (lambda d: d["users"][0]["user"].update(username="u", password="p"), "users[0].user", "basic auth"),
        (
            lambda d: d["users"][0]["user"].update(exec={"command": "gke-gcloud-auth-plugin"}),
            "users[0].user.exec",
            "exec",
        ),
        (
            lambda d: d["users"][0]["user"].update({"auth-provider": {"name": "gcp"}}),
            "users[0].user.auth-provider",
            "auth providers",
        ),
        (
            lambda d: d["clusters"][0]["cluster"].update({"insecure-skip-tls-verify": True}),
            "clusters[0].cluster.insecure-skip-tls-verify",
            "insecure TLS",
        ),
        (
            lambda d: d["clusters"][0]["cluster"].update({"certificate-authority": "/ca.crt"}),
            "clusters[0].cluster.certificate-authority",
            "file paths",
        ),
        (
            lambda d: d["clusters"][0]["cluster"].update(server=""),
            "clusters[0].cluster.server",
            "server URL is required",
        ),
        (
            lambda d: d["clusters"][0]["cluster"].update(server="https://bad_host!"),
            "clusters[0].cluster.server",
            "untrusted server endpoint",
        ),
    ],
)
def test_each_kubeconfig_rule_fires(mutation: Any, path: str, detail: str) -> None:
    doc = json.loads(token_kubeconfig("east5", "https://203.0.113.10", "Q0E=", "a-token"))
    mutation(doc)
    problems = ar.kubeconfig_problems(json.dumps(doc))
    assert [(p.path, detail in p.detail) for p in problems] == [(path, True)], problems
    assert ar.kubeconfig_problems("{not: [yaml") and ar.kubeconfig_problems("[]")


def test_kubeconfig_must_be_usable() -> None:
    doc = json.loads(token_kubeconfig("east5", "https://203.0.113.10", "Q0E=", "a-token"))
    for mutation, path in (
        (lambda d: d.update(clusters=[]), "kubeconfig"),
        (lambda d: d.update({"current-context": "west4"}), "current-context"),
        (lambda d: d["contexts"][0]["context"].update(cluster="west4"), "current-context"),
    ):
        bad = copy.deepcopy(doc)
        mutation(bad)
        assert [p.path for p in ar.kubeconfig_problems(json.dumps(bad))] == [path]


def _manager_objects() -> list[dict[str, Any]]:
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "multikueue-east5", "namespace": "kueue-system"},
        "stringData": {"kubeconfig": token_kubeconfig("east5", "https://203.0.113.10", "Q0E=", "t")},
    }
    config = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "MultiKueueConfig",
        "metadata": {"name": "multikueue"},
        "spec": {"clusters": ["east5"]},
    }
    cq = copy.deepcopy(CQ)
    cq["spec"]["resourceGroups"][0]["flavors"].append(
        {"name": "g2", "resources": [{"name": "google.com/tpu", "nominalQuota": 8}]}
    )
    cq["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": "multikueue"}]}
    return [copy.deepcopy(MK_CHECK), config, copy.deepcopy(MK_CLUSTER), secret, cq]


def _by_kind(objs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (obj,) = [o for o in objs if o["kind"] == kind]
    return obj


@pytest.mark.parametrize(
    ("mutation", "needle"),
    [
        (lambda objs: objs.remove(_by_kind(objs, "MultiKueueConfig")), "MultiKueueConfig 'multikueue' not found"),
        (
            lambda objs: _by_kind(objs, "MultiKueueConfig")["spec"].update(clusters=["east5", "west1"]),
            "Missing clusters: ['west1']",
        ),
        (lambda objs: objs.remove(_by_kind(objs, "Secret")), "Secret kueue-system/multikueue-east5 not found"),
        (lambda objs: _by_kind(objs, "Secret")["metadata"].update(namespace="default"), "not found"),
        (lambda objs: _by_kind(objs, "Secret").update(stringData={"config": "x"}), "key 'kubeconfig' not found"),
        (
            lambda objs: _by_kind(objs, "Secret").update(
                stringData={"kubeconfig": token_kubeconfig("east5", "https://bad_host!", None, "t")}
            ),
            "untrusted server endpoint",
        ),
        (
            lambda objs: _by_kind(objs, "ClusterQueue")["spec"].update(
                admissionChecksStrategy={"admissionChecks": [{"name": "multikueue", "onFlavors": ["g"]}]}
            ),
            "MultiKueueAdmissionCheckAppliedPerFlavor",
        ),
        (
            lambda objs: (
                objs.append({**copy.deepcopy(MK_CHECK), "metadata": {"name": "mk2"}}),
                _by_kind(objs, "ClusterQueue")["spec"].update(
                    admissionChecksStrategy={"admissionChecks": [{"name": "multikueue"}, {"name": "mk2"}]}
                ),
            ),
            "MultipleMultiKueueAdmissionChecks",
        ),
        (
            lambda objs: (
                objs.append(
                    {
                        "apiVersion": "kueue.x-k8s.io/v1beta2",
                        "kind": "AdmissionCheck",
                        "metadata": {"name": "dws"},
                        "spec": {"controllerName": "kueue.x-k8s.io/provisioning-request"},
                    }
                ),
                _by_kind(objs, "ClusterQueue")["spec"].update(
                    admissionChecksStrategy={"admissionChecks": [{"name": "multikueue"}, {"name": "dws"}]}
                ),
            ),
            "MultiKueueWithProvisioningRequest",
        ),
        (
            lambda objs: _by_kind(objs, "ClusterQueue")["spec"].update(
                admissionChecksStrategy={"admissionChecks": [{"name": "nope"}]}
            ),
            "references missing AdmissionCheck 'nope'",
        ),
    ],
)
def test_each_multikueue_cross_object_rule_fires(mutation: Any, needle: str) -> None:
    objs = _manager_objects()
    assert ar.multikueue_problems(objs) == []
    mutation(objs)
    problems = ar.multikueue_problems(objs)
    assert len(problems) == 1 and needle in problems[0], problems


def test_fleet_component_output_was_refused_by_the_scheduler_cache_rule() -> None:
    """The per-flavor checks TpuFleet emitted before this rule was mirrored: two MultiKueue checks with onFlavors."""
    objs = _manager_objects()
    objs.append({**copy.deepcopy(MK_CHECK), "metadata": {"name": "mk2"}})
    _by_kind(objs, "ClusterQueue")["spec"]["admissionChecksStrategy"] = {
        "admissionChecks": [{"name": "multikueue", "onFlavors": ["g"]}, {"name": "mk2", "onFlavors": ["g2"]}]
    }
    problems = ar.multikueue_problems(objs)
    assert sum("AppliedPerFlavor" in p for p in problems) == 2
    assert sum("MultipleMultiKueueAdmissionChecks" in p for p in problems) == 1


@pytest.mark.parametrize("shape", tpu_shapes.SHAPES, ids=lambda s: s.key)
def test_workload_template_passes_the_webhooks_for_every_shape_and_slice_count(shape: tpu_shapes.SliceShape) -> None:
    for slices, name in itertools.product(range(1, MAX_SLICES + 1), ("t", "train", "LONGEST")):
        name = longest_name(shape, slices) if name == "LONGEST" else name
        obj = workload(name=name, topology=shape.topology, machineType=shape.machine_type, slices=slices)
        assert ar.admission_problems(obj) == [], (name, slices)
        job_names = [ar.gen_job_name(name, "slice", i) for i in range(slices)]
        assert all(ar.dns1035_label_problem(n) is None for n in job_names)
        # Kueue suspends and resumes the JobSet and rewrites its pod template's nodeSelector/tolerations.
        resumed = copy.deepcopy(obj)
        resumed["spec"]["suspend"] = True
        pod = resumed["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        pod["nodeSelector"] = {**pod["nodeSelector"], "cloud.google.com/gke-nodepool": "tpu-pool-0"}
        assert ar.admission_problems(resumed, old={**obj, "spec": {**obj["spec"], "suspend": True}}) == []


@pytest.mark.parametrize("shape", tpu_shapes.SHAPES, ids=lambda s: s.key)
def test_longest_accepted_names_are_also_schema_valid(shape: tpu_shapes.SliceShape) -> None:
    for slices in (1, 256):
        assert_valid(
            workload(
                name=longest_name(shape, slices), topology=shape.topology, machineType=shape.machine_type, slices=slices
            )
        )


@pytest.mark.parametrize("shape", tpu_shapes.SHAPES, ids=lambda s: s.key)
@pytest.mark.parametrize("slices", (1, 10, 256))
def test_builder_refuses_a_name_one_character_too_long(shape: tpu_shapes.SliceShape, slices: int) -> None:
    name = longest_name(shape, slices) + "b"
    longest = longest_generated_pod_name(name, "slice", slices, shape.vms)
    assert len(longest) == 64
    with pytest.raises(ValidationError) as info:
        workload(name=name, topology=shape.topology, machineType=shape.machine_type, slices=slices)
    message = str(info.value)
    assert "name" in message and repr(name) in message and "64 characters" in message and "at most 63" in message
    assert f"at most {len(name) - 1} characters" in message
    # ... and the webhook mirror agrees that such an object would be refused.
    forced = workload(name="x", topology=shape.topology, machineType=shape.machine_type, slices=slices)
    forced["metadata"]["name"] = name
    assert any("generated pod name" in p.detail for p in ar.admission_problems(forced))


def test_builder_refuses_names_the_generated_job_names_cannot_start_with() -> None:
    # A DNS-1123 label, but Jobs named "1train-slice-0" are not DNS-1035 labels.
    with pytest.raises(ValidationError, match=r"name\n.*'1train' is not a DNS-1035 label: .* starting with a letter"):
        workload(name="1train")
    assert ar.dns1035_label_problem(ar.gen_job_name("1train", "slice", 0)) is not None


def test_old_rule_name_is_refused_by_the_jobset_webhook_and_the_new_one_accepted() -> None:
    obj = workload()
    assert obj["spec"]["failurePolicy"]["rules"][0]["name"] == "restartOnInfrastructureDisruption"
    obj["spec"]["failurePolicy"]["rules"][0]["name"] = "restart-on-infrastructure-disruption"  # the hyphenated spelling
    (problem,) = ar.admission_problems(obj)
    assert problem.rule.endswith("validateFailurePolicy") and problem.path == "spec.failurePolicy.rules[0].name"
    assert_valid(obj)  # the CRD schema alone accepts it: that is the gap these rules close


# --- each rule can fail -------------------------------------------------------------------------------------


def _problem_paths(obj: dict[str, Any], old: dict[str, Any] | None = None) -> list[str]:
    return [p.path for p in ar.admission_problems(obj, old)]


def _mutate(obj: dict[str, Any], fn: Any) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    fn(out)
    return out


def _rule(obj: dict[str, Any]) -> dict[str, Any]:
    rules: list[dict[str, Any]] = obj["spec"]["failurePolicy"]["rules"]
    return rules[0]


def _job(obj: dict[str, Any]) -> dict[str, Any]:
    job: dict[str, Any] = obj["spec"]["replicatedJobs"][0]["template"]["spec"]
    return job


@pytest.mark.parametrize(
    ("mutation", "path"),
    [
        (lambda o: _rule(o).update(name="a" * 129), "spec.failurePolicy.rules[0].name"),
        (lambda o: _rule(o).update(name="ends:"), "spec.failurePolicy.rules[0].name"),
        (lambda o: o["spec"]["failurePolicy"]["rules"].append(dict(_rule(o))), "spec.failurePolicy.rules"),
        (lambda o: _rule(o).update(onJobFailureReasons=["Evicted"]), "spec.failurePolicy.rules[0].onJobFailureReasons"),
        (lambda o: _rule(o).update(targetReplicatedJobs=["nope"]), "spec.failurePolicy.rules[0].targetReplicatedJobs"),
        (lambda o: _rule(o).update(action="RestartJob"), "spec.failurePolicy.rules"),
        (
            lambda o: o["spec"]["failurePolicy"].update(restartStrategy="InPlaceRestart"),
            "spec.failurePolicy.restartStrategy",
        ),
        (lambda o: o["metadata"].update(name="n" * 50), "spec.replicatedJobs[0].name"),
        (lambda o: o["spec"]["replicatedJobs"][0].update(groupName="Group"), "spec.replicatedJobs[0].groupName"),
        (
            lambda o: o["spec"]["replicatedJobs"][0].update(dependsOn=[{"name": "x", "status": "Ready"}]),
            "spec.replicatedJobs[0].dependsOn",
        ),
        (lambda o: o["spec"].update(network={"subdomain": "1abc"}), "spec.network.subdomain"),
        (lambda o: o["spec"].update(managedBy="kueue"), "spec.managedBy"),
        (
            lambda o: o["spec"].update(successPolicy={"operator": "All", "targetReplicatedJobs": ["x"]}),
            "spec.successPolicy",
        ),
        (lambda o: _job(o).update(parallelism=2**31 - 1), "spec.replicatedJobs[0]"),
        (
            lambda o: o["metadata"]["labels"].update({ar.QUEUE_LABEL: "Team_A"}),
            "metadata.labels[kueue.x-k8s.io/queue-name]",
        ),
        (
            lambda o: o["metadata"]["labels"].update({ar.MAX_EXEC_TIME_LABEL: "0"}),
            f"metadata.labels[{ar.MAX_EXEC_TIME_LABEL}]",
        ),
        (
            lambda o: o["metadata"]["labels"].update({ar.PREBUILT_WORKLOAD_LABEL: "A"}),
            f"metadata.labels[{ar.PREBUILT_WORKLOAD_LABEL}]",
        ),
    ],
)
def test_each_jobset_create_rule_fires(mutation: Any, path: str) -> None:
    assert path in _problem_paths(_mutate(workload(), mutation))


def test_jobset_update_rules() -> None:
    running = workload()
    # A running JobSet's pod template is immutable, and so is its queue.
    moved = _mutate(running, lambda o: _job(o)["template"]["spec"].update(nodeSelector={"a": "b"}))
    assert "spec.replicatedJobs" in _problem_paths(moved, running)
    requeued = _mutate(running, lambda o: o["metadata"]["labels"].update({ar.QUEUE_LABEL: "other"}))
    assert f"metadata.labels[{ar.QUEUE_LABEL}]" in _problem_paths(requeued, running)
    unprioritised = _mutate(running, lambda o: o["metadata"]["labels"].pop(ar.PRIORITY_CLASS_LABEL))
    assert f"metadata.labels[{ar.PRIORITY_CLASS_LABEL}]" in _problem_paths(unprioritised, running)
    managed = _mutate(running, lambda o: o["spec"].update(managedBy="kueue.x-k8s.io/multikueue"))
    assert "spec.managedBy" in _problem_paths(managed, running)
    # While suspended, Kueue may change the queue and the pod template's scheduling fields.
    suspended = _mutate(running, lambda o: o["spec"].update(suspend=True))
    both = _mutate(
        suspended,
        lambda o: (
            o["metadata"]["labels"].update({ar.QUEUE_LABEL: "other"}),
            _job(o)["template"]["spec"].update(nodeSelector={"a": "b"}),
        ),
    )
    assert _problem_paths(both, suspended) == []
    # ... but not the containers.
    recoded = _mutate(suspended, lambda o: _job(o)["template"]["spec"]["containers"][0].update(image="other"))
    assert "spec.replicatedJobs" in _problem_paths(recoded, suspended)


CQ: dict[str, Any] = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "ClusterQueue",
    "metadata": {"name": "cq"},
    "spec": {
        "namespaceSelector": {},
        "cohortName": "c",
        "resourceGroups": [
            {
                "coveredResources": ["google.com/tpu"],
                "flavors": [
                    {"name": "f", "resources": [{"name": "google.com/tpu", "nominalQuota": 16, "lendingLimit": 8}]}
                ],
            }
        ],
    },
}


def _quota(o: dict[str, Any]) -> dict[str, Any]:
    quota: dict[str, Any] = o["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]
    return quota


@pytest.mark.parametrize(
    ("mutation", "path"),
    [
        (lambda o: o["spec"].pop("cohortName"), "spec.resourceGroups[0].flavors[0].resources[0].lendingLimit"),
        (lambda o: _quota(o).update(lendingLimit="17"), "spec.resourceGroups[0].flavors[0].resources[0].lendingLimit"),
        (lambda o: _quota(o).update(nominalQuota="-1"), "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota"),
        (lambda o: _quota(o).update(name="cpu"), "spec.resourceGroups[0].flavors[0].resources[0].name"),
        (
            lambda o: o["spec"]["resourceGroups"].append(copy.deepcopy(o["spec"]["resourceGroups"][0])),
            "spec.resourceGroups[1].coveredResources[0]",
        ),
        (
            lambda o: o["spec"]["resourceGroups"][0]["coveredResources"].__setitem__(0, "Bad Name"),
            "spec.resourceGroups[0].coveredResources[0]",
        ),
        (
            lambda o: o["spec"].update(
                preemption={"reclaimWithinCohort": "Never", "borrowWithinCohort": {"policy": "LowerPriority"}}
            ),
            "spec.preemption",
        ),
        (
            lambda o: o["spec"].update(flavorFungibility={"preference": "BorrowingOverPreemption"}),
            "spec.flavorFungibility.preference",
        ),
        (lambda o: o["spec"].update(fairSharing={"weight": "1n"}), "spec.fairSharing"),
        (
            lambda o: o["spec"].update(namespaceSelector={"matchExpressions": [{"key": "a", "operator": "In"}]}),
            "spec.namespaceSelector.matchExpressions[0].values",
        ),
        (
            lambda o: o["spec"].update(
                admissionChecksStrategy={"admissionChecks": [{"name": "ac", "onFlavors": ["g"]}]}
            ),
            "spec.admissionChecksStrategy.admissionChecks[0].onFlavors[0]",
        ),
    ],
)
def test_each_cluster_queue_rule_fires(mutation: Any, path: str) -> None:
    assert _problem_paths(CQ) == []
    assert path in _problem_paths(_mutate(CQ, mutation))


def test_cluster_queue_concurrent_admission_policy_is_immutable() -> None:
    changed = _mutate(CQ, lambda o: o["spec"].update(concurrentAdmissionPolicy={"migration": {}}))
    assert _problem_paths(changed, old=CQ) == ["spec.concurrentAdmissionPolicy"]


def test_cohort_and_resource_flavor_rules_fire() -> None:
    cohort = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Cohort",
        "metadata": {"name": "c"},
        "spec": {"resourceGroups": copy.deepcopy(CQ["spec"]["resourceGroups"])},
    }
    # A root cohort (no parent) may not lend or borrow; a lendingLimit above nominal is fine for cohorts.
    assert _problem_paths(cohort) == ["spec.resourceGroups[0].flavors[0].resources[0].lendingLimit"]
    cohort["spec"]["parentName"] = "root"
    _quota(cohort).update(lendingLimit=32)
    assert _problem_paths(cohort) == []
    flavor = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": "f"},
        "spec": {
            "nodeLabels": {"cloud.google.com/gke-tpu-topology": "4x4"},
            "nodeTaints": [{"key": "k", "value": "v", "effect": "NoSchedule"}] * 2,
            "tolerations": [{"key": "bad key", "operator": "Exists"}],
        },
    }
    assert _problem_paths(flavor) == ["spec.nodeTaints[1]", "spec.tolerations[0].key"]


def test_an_unmirrored_kind_of_a_webhook_group_is_an_error_not_a_pass() -> None:
    with pytest.raises(ar.UnmirroredKindError, match="FancyQueue"):
        ar.admission_problems({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "FancyQueue", "metadata": {"name": "m"}})
    assert ar.admission_problems({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}}) == []


def test_quantities_parse_like_kubernetes() -> None:
    assert ar.parse_quantity("500m") == ar.parse_quantity("0.5")
    assert ar.parse_quantity("1Ki") == 1024 and ar.parse_quantity("1e3") == 1000 and ar.parse_quantity(16) == 16
    with pytest.raises(ValueError, match="not a quantity"):
        ar.parse_quantity("lots")


# --- the mirror matches the pinned upstream source --------------------------------------------------------


def test_jobset_rules_match_the_pinned_webhook_source() -> None:
    source = reference_text(f"{JOBSET}/pkg/webhooks/jobset_webhook.go")
    assert f'ruleNameFmt       = "{ar.FAILURE_RULE_NAME.pattern}"' in source
    low, high = ar.FAILURE_RULE_NAME_LENGTH
    assert f"minRuleNameLength = {low}" in source and f"maxRuleNameLength = {high}" in source
    reasons = re.search(r"validOnJobFailureReasons = \[\]string\{(.*?)\}", source, re.S)
    assert reasons is not None
    assert [
        r.removeprefix("batchv1.JobReason") for r in re.findall(r"batchv1\.JobReason\w+", reasons.group(1))
    ] == list(ar.JOB_FAILURE_REASONS)
    # The generated-name formulas: last Job index, last completion index, a 5-character stand-in suffix.
    assert "placement.GenJobName(js.Name, rJob.Name, int(rJob.Replicas-1))" in source
    assert "placement.GenPodName(js.Name, rJob.Name, maxJobIndex, maxPodIndex) + " + f'"{ar.POD_NAME_SUFFIX}"' in source
    assert 'defaultRuleNameFmt = "failurePolicyRule%v"' in source
    assert "RestartJob and RestartJobAndIgnoreMaxRestarts failure policy actions are not allowed" in source
    assert "Note that SucccessPolicy and failurePolicy are made immutable via CEL." in source


def test_kueue_rules_match_the_pinned_webhook_source() -> None:
    validation = reference_text(f"{KUEUE}/pkg/controller/jobframework/validation.go")
    assert "allErrs = append(allErrs, ValidateLabelAsCRDName(obj, constants.QueueLabel)...)" in validation
    assert "WorkloadPriorityClass cannot be removed from a workload" in validation
    jobset_hook = reference_text(f"{KUEUE}/pkg/controller/jobs/jobset/jobset_webhook.go")
    assert "jobframework.ValidateJobOnCreate(jobSet)" in jobset_hook
    cq = reference_text(f"{KUEUE}/pkg/webhooks/clusterqueue_webhook.go")
    for needle in ("must be ≤ 256", "must be ≤ 512", "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never"):
        assert needle in cq
    registered = reference_text(f"{KUEUE}/pkg/webhooks/webhooks.go")
    kinds = re.findall(r"setupWebhookFor(\w+)\(mgr", registered)
    assert sorted(set(kinds)) == ["ClusterQueue", "Cohort", "LocalQueue", "ResourceFlavor", "Workload"]
    # LocalQueue's webhook has no validator; any other kind the package emits must have a mirrored checker.
    assert "ctrl.NewWebhookManagedBy(mgr, &kueue.LocalQueue{}).\n\t\tWithLogConstructor" in registered


# --- what the reconciler writes at run time -----------------------------------------------------------------


def test_reconciler_workload_writes_pass_the_workload_webhook_and_schema() -> None:
    from datetime import UTC, datetime

    from gke_tpu_priority.hotswap.annotations import AnnotationKeys, OpRecord
    from gke_tpu_priority.hotswap.config import HotswapConfig
    from gke_tpu_priority.hotswap.kube.actuator import WorkloadChecks
    from gke_tpu_priority.hotswap.planner.actions import (
        ClearOp,
        HoldVictim,
        ObjectRef,
        RecordOp,
        ReleaseReason,
        ReleaseVictim,
    )
    from tests.fakes.apiserver import merge_patch
    from tests.hotswap_io import cluster
    from tests.support.crd_validation import validate

    keys = AnnotationKeys(HotswapConfig().annotation_domain)
    checks = WorkloadChecks(keys)
    js = cluster.jobset("victim", 2, "training-low")
    js["metadata"]["uid"] = "u-1"
    admitted = cluster.workload(js, 1_000_000)
    admitted["apiVersion"], admitted["kind"] = "kueue.x-k8s.io/v1beta2", "Workload"
    admitted["spec"]["podSets"][0]["template"] = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    admitted["status"]["admission"]["podSetAssignments"] = [
        {
            "name": "workers",
            "count": 4,
            "flavors": {"google.com/tpu": "v6e-4x4"},
            "resourceUsage": {"google.com/tpu": "16"},
        }
    ]
    for condition in admitted["status"]["conditions"]:
        condition["message"] = condition["reason"]
    assert validate(admitted).errors == (), validate(admitted).describe()
    ref = ObjectRef("Workload", "team-a", admitted["metadata"]["name"], "u-2")
    hold_annotations = {
        keys.held_by: "team-a/jobset-preemptor",
        keys.op_id: "op-1",
        keys.held_since: "2026-12-03T17:00:00Z",
    }
    bodies = [
        checks.hold(HoldVictim(ref, "op-1", ref, hold_annotations))[0],
        checks.release(
            ReleaseVictim(
                ref, "op-1", ReleaseReason.CAPACITY, keys.victim_hold_keys(), {keys.released_at: "2026-12-03T17:05:00Z"}
            )
        )[0],
        checks.record_op(
            RecordOp(ref, OpRecord("op-1", 0, ("a", "b"), ("ml/victim",), datetime(2026, 12, 3, tzinfo=UTC)), keys.op)
        )[0],
        checks.clear_op(ClearOp(ref, "op-1", (keys.op,)))[0],
    ]
    current = admitted
    for body in bodies:
        updated = merge_patch(current, body)
        assert ar.admission_problems(updated, old=current) == [], body
        assert validate(updated).errors == (), body  # annotation keys, spec.active: what the API server checks
        current = updated
    assert current["spec"]["active"] is True
    # The rule can fail: a write that touched podSets of an admitted Workload would be refused.
    resized = merge_patch(admitted, {"spec": {"podSets": [{"name": "workers", "count": 1}]}})
    assert [p.path for p in ar.admission_problems(resized, old=admitted)] == ["spec.podSets"]
