"""The fleet (MultiKueue) and capacity-ladder (queued provisioning) rules, through the CLI and the Pulumi pack.

Each rule has a clean and a broken picture; both front ends must agree on the finding and its message. The fleet
and ladder stacks' previews must pass every rule, and a fleet stack's clusters are checked one picture each.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from gke_tpu_priority.policies.check import check_objects, load_objects
from gke_tpu_priority.policies.rules import evaluate_resources
from gke_tpu_priority.policies.rules.base import CLUSTER_ANNOTATION, manifest_object
from tools import preview

KUEUE = "kueue.x-k8s.io/v1beta2"
TPU = "google.com/tpu"


def meta(name: str, namespace: str | None = None) -> dict[str, Any]:
    return {"name": name, **({"namespace": namespace} if namespace else {})}


def flavor(name: str, capacity: str) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "nodeLabels": {"gke-tpu-priority.io/capacity": capacity, "cloud.google.com/gke-tpu-topology": "4x4"},
        "tolerations": [{"key": TPU, "operator": "Exists", "effect": "NoSchedule"}],
    }
    if capacity == "flex-start-queued":
        spec["tolerations"].append({"key": "cloud.google.com/gke-queued", "operator": "Exists", "effect": "NoSchedule"})
    return {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": meta(name), "spec": spec}


def cluster_queue(name: str, quotas: dict[str, Any], checks: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": [TPU],
                "flavors": [{"name": f, "resources": [{"name": TPU, "nominalQuota": q}]} for f, q in quotas.items()],
            }
        ],
    }
    if checks is not None:
        spec["admissionChecksStrategy"] = {"admissionChecks": checks}
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": meta(name), "spec": spec}


def admission_check(name: str, controller: str, kind: str, params: str | None = None) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE,
        "kind": "AdmissionCheck",
        "metadata": meta(name),
        "spec": {
            "controllerName": controller,
            "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": kind, "name": params or name},
        },
    }


def prc(name: str, max_run: Any = "86400") -> dict[str, Any]:
    return {
        "apiVersion": KUEUE,
        "kind": "ProvisioningRequestConfig",
        "metadata": meta(name),
        "spec": {
            "provisioningClassName": "queued-provisioning.gke.io",
            "managedResources": [TPU],
            "parameters": {"maxRunDurationSeconds": max_run},
        },
    }


PROVISIONING = "kueue.x-k8s.io/provisioning-request"
MULTIKUEUE = "kueue.x-k8s.io/multikueue"

LADDER: list[dict[str, Any]] = [
    flavor("v6e-4x4-spot", "spot"),
    flavor("v6e-4x4-queued", "flex-start-queued"),
    prc("dws"),
    admission_check("dws", PROVISIONING, "ProvisioningRequestConfig"),
    cluster_queue(
        "research", {"v6e-4x4-spot": 32, "v6e-4x4-queued": 64}, [{"name": "dws", "onFlavors": ["v6e-4x4-queued"]}]
    ),
]

MANAGER: list[dict[str, Any]] = [
    flavor("v6e-4x4", "spot"),
    {"apiVersion": KUEUE, "kind": "MultiKueueConfig", "metadata": meta("mk"), "spec": {"clusters": ["east5"]}},
    {
        "apiVersion": KUEUE,
        "kind": "MultiKueueCluster",
        "metadata": meta("east5"),
        "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret", "location": "multikueue-east5"}}},
    },
    {"apiVersion": "v1", "kind": "Secret", "metadata": meta("multikueue-east5", "kueue-system"), "type": "Opaque"},
    admission_check("mk", MULTIKUEUE, "MultiKueueConfig"),
    cluster_queue("tpu-training", {"v6e-4x4": 0}, [{"name": "mk"}]),
]


def edit(objects: list[dict[str, Any]], change: Callable[[dict[str, dict[str, Any]]], Any]) -> list[dict[str, Any]]:
    """A copy of ``objects`` changed by ``change``, which gets them by ``Kind/name``."""
    objects = copy.deepcopy(objects)
    change({f"{o['kind']}/{o['metadata']['name']}": o for o in objects})
    return objects


def cli_findings(objects: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(r.rule, r.message) for r in check_objects([manifest_object(o) for o in objects])]


def pack_findings(objects: list[dict[str, Any]]) -> list[tuple[str, str]]:
    resources = []
    for manifest in objects:
        group_version = manifest["apiVersion"] if "/" in manifest["apiVersion"] else f"core/{manifest['apiVersion']}"
        resource_type = f"kubernetes:{group_version}:{manifest['kind']}"
        name = manifest["metadata"]["name"]
        urn = f"urn:pulumi:dev::p::{resource_type}::{name}"
        resources.append({"urn": urn, "type": resource_type, "name": name, "inputs": manifest})
    return [(v.policy, v.message) for v in evaluate_resources(resources)]


def spec(obj: dict[str, Any]) -> dict[str, Any]:
    return obj["spec"]


# (id, objects, rule, message fragment: None when the rule must not fire)
CASES: list[tuple[str, list[dict[str, Any]], str, str | None]] = [
    ("ladder-check-kind-ok", LADDER, "kueue-v1beta2-admissioncheck-parameters-kind", None),
    (
        "provisioning-check-names-multikueue-config",
        edit(LADDER, lambda o: spec(o["AdmissionCheck/dws"])["parameters"].update(kind="MultiKueueConfig")),
        "kueue-v1beta2-admissioncheck-parameters-kind",
        "AdmissionCheck 'dws' has controllerName kueue.x-k8s.io/provisioning-request but spec.parameters "
        "{apiGroup: kueue.x-k8s.io, kind: MultiKueueConfig, name: dws}; that controller reads only a "
        "ProvisioningRequestConfig",
    ),
    ("manager-check-kind-ok", MANAGER, "kueue-v1beta2-admissioncheck-parameters-kind", None),
    (
        "multikueue-check-without-parameters",
        edit(MANAGER, lambda o: spec(o["AdmissionCheck/mk"]).pop("parameters")),
        "kueue-v1beta2-admissioncheck-parameters-kind",
        "AdmissionCheck 'mk' has controllerName kueue.x-k8s.io/multikueue but spec.parameters none; that controller "
        "reads only a MultiKueueConfig",
    ),
    ("ladder-references-ok", LADDER, "kueue-v1beta2-admission-check-references-exist", None),
    ("manager-references-ok", MANAGER, "kueue-v1beta2-admission-check-references-exist", None),
    (
        "parameters-object-missing",
        [o for o in LADDER if o["kind"] != "ProvisioningRequestConfig"],
        "kueue-v1beta2-admission-check-references-exist",
        "AdmissionCheck 'dws' names ProvisioningRequestConfig 'dws' in spec.parameters, which this stack does not "
        "declare (declared: none declared)",
    ),
    (
        "cluster-queue-check-undeclared",
        edit(
            MANAGER,
            lambda o: spec(o["ClusterQueue/tpu-training"])["admissionChecksStrategy"].update(
                admissionChecks=[{"name": "mk-typo"}]
            ),
        ),
        "kueue-v1beta2-admission-check-references-exist",
        "ClusterQueue 'tpu-training' uses admission check 'mk-typo', which is not a declared AdmissionCheck "
        "(declared: mk)",
    ),
    (
        "older-admission-checks-list-undeclared",
        edit(LADDER, lambda o: spec(o["ClusterQueue/research"]).update(admissionChecks=["other"])),
        "kueue-v1beta2-admission-check-references-exist",
        "ClusterQueue 'research' uses admission check 'other', which is not a declared AdmissionCheck",
    ),
    (
        "on-flavors-not-in-resource-groups",
        edit(
            LADDER,
            lambda o: spec(o["ClusterQueue/research"])["admissionChecksStrategy"]["admissionChecks"][0].update(
                onFlavors=["v6e-4x4-queued", "v6e-2x2-queued"]
            ),
        ),
        "kueue-v1beta2-admission-check-references-exist",
        "ClusterQueue 'research' applies admission check 'dws' onFlavors 'v6e-2x2-queued', which is not a flavor of "
        "its resourceGroups (flavors: v6e-4x4-spot, v6e-4x4-queued)",
    ),
    ("kubeconfig-secret-ok", MANAGER, "kueue-v1beta2-multikueue-cluster-kubeconfig-secret", None),
    (
        "kubeconfig-from-path",
        edit(
            MANAGER,
            lambda o: spec(o["MultiKueueCluster/east5"])["clusterSource"]["kubeConfig"].update(
                locationType="Path", location="/etc/kubeconfig"
            ),
        ),
        "kueue-v1beta2-multikueue-cluster-kubeconfig-secret",
        "MultiKueueCluster 'east5' reads its kubeconfig from Path '/etc/kubeconfig'; use locationType: Secret",
    ),
    (
        "kubeconfig-location-not-a-secret-name",
        edit(
            MANAGER,
            lambda o: spec(o["MultiKueueCluster/east5"])["clusterSource"]["kubeConfig"].update(
                location="kueue-system/multikueue-east5"
            ),
        ),
        "kueue-v1beta2-multikueue-cluster-kubeconfig-secret",
        "MultiKueueCluster 'east5' has kubeConfig location 'kueue-system/multikueue-east5', which is not a Secret name",
    ),
    ("kubeconfig-secret-namespace-ok", MANAGER, "kueue-v1beta2-multikueue-kubeconfig-secret-namespace", None),
    (
        "config-lists-undeclared-cluster",
        edit(MANAGER, lambda o: spec(o["MultiKueueConfig/mk"]).update(clusters=["east5", "south1"])),
        "kueue-v1beta2-admission-check-references-exist",
        "MultiKueueConfig 'mk' lists cluster 'south1', which is not a declared MultiKueueCluster (declared: east5)",
    ),
    (
        "kubeconfig-secret-outside-kueue-namespace",
        edit(MANAGER, lambda o: o["Secret/multikueue-east5"]["metadata"].update(namespace="default")),
        "kueue-v1beta2-multikueue-kubeconfig-secret-namespace",
        "MultiKueueCluster 'east5' reads kubeconfig Secret 'multikueue-east5', which is declared in namespace "
        "default, not in Kueue's namespace 'kueue-system'",
    ),
    (
        "kubeconfig-secret-not-given-is-not-checked",
        [o for o in MANAGER if o["kind"] != "Secret"],
        "kueue-v1beta2-multikueue-kubeconfig-secret-namespace",
        None,
    ),
    ("queued-flavor-checked", LADDER, "kueue-v1beta2-queued-flavor-provisioning-check", None),
    (
        "queued-flavor-without-check",
        edit(LADDER, lambda o: spec(o["ClusterQueue/research"]).pop("admissionChecksStrategy")),
        "kueue-v1beta2-queued-flavor-provisioning-check",
        "ClusterQueue 'research' has queued-provisioning flavor 'v6e-4x4-queued' but no "
        "kueue.x-k8s.io/provisioning-request admission check on it, so Kueue admits workloads to nodes that do not "
        "exist and they wait forever; add 'dws'",
    ),
    (
        "queued-by-gke-label-only",
        edit(
            [o for o in LADDER if o["kind"] != "AdmissionCheck"],
            lambda o: (
                spec(o["ClusterQueue/research"]).pop("admissionChecksStrategy"),
                spec(o["ResourceFlavor/v6e-4x4-queued"]).update(
                    nodeLabels={"cloud.google.com/gke-queued": "true"}, tolerations=[]
                ),
            ),
        ),
        "kueue-v1beta2-queued-flavor-provisioning-check",
        "has queued-provisioning flavor 'v6e-4x4-queued' but no kueue.x-k8s.io/provisioning-request admission check",
    ),
    (
        "provisioning-check-on-every-flavor",
        edit(
            LADDER,
            lambda o: spec(o["ClusterQueue/research"])["admissionChecksStrategy"]["admissionChecks"][0].pop(
                "onFlavors"
            ),
        ),
        "kueue-v1beta2-queued-flavor-provisioning-check",
        "ClusterQueue 'research' applies provisioning-request admission check 'dws' to flavor 'v6e-4x4-spot', which "
        "is not a queued-provisioning flavor",
    ),
    ("max-run-ok", LADDER, "kueue-v1beta2-provisioning-max-run-duration", None),
    (
        "max-run-7-days-ok",
        edit(
            LADDER,
            lambda o: spec(o["ProvisioningRequestConfig/dws"])["parameters"].update(maxRunDurationSeconds="604800"),
        ),
        "kueue-v1beta2-provisioning-max-run-duration",
        None,
    ),
    (
        "max-run-beyond-7-days",
        edit(
            LADDER,
            lambda o: spec(o["ProvisioningRequestConfig/dws"])["parameters"].update(maxRunDurationSeconds="604801"),
        ),
        "kueue-v1beta2-provisioning-max-run-duration",
        "ProvisioningRequestConfig 'dws' spec.parameters.maxRunDurationSeconds is '604801', beyond GKE's 604800 s "
        "(7 days) limit for queued provisioning",
    ),
    (
        "max-run-with-unit",
        edit(
            LADDER,
            lambda o: spec(o["ProvisioningRequestConfig/dws"])["parameters"].update(maxRunDurationSeconds="86400s"),
        ),
        "kueue-v1beta2-provisioning-max-run-duration",
        "ProvisioningRequestConfig 'dws' spec.parameters.maxRunDurationSeconds is '86400s'; set it to a positive "
        "whole number of seconds as a string",
    ),
    (
        "max-run-zero",
        edit(
            LADDER, lambda o: spec(o["ProvisioningRequestConfig/dws"])["parameters"].update(maxRunDurationSeconds="0")
        ),
        "kueue-v1beta2-provisioning-max-run-duration",
        "spec.parameters.maxRunDurationSeconds is '0'; set it to a positive whole number of seconds",
    ),
    ("worker-with-quota", LADDER, "kueue-v1beta2-worker-clusterqueue-has-quota", None),
    ("manager-queue-without-quota-ok", MANAGER, "kueue-v1beta2-worker-clusterqueue-has-quota", None),
    (
        "worker-all-zero-quota",
        edit(
            LADDER,
            lambda o: [
                r.update(nominalQuota="0")
                for f in spec(o["ClusterQueue/research"])["resourceGroups"][0]["flavors"]
                for r in f["resources"]
            ],
        ),
        "kueue-v1beta2-worker-clusterqueue-has-quota",
        "ClusterQueue 'research' has only zero nominalQuota, and it is not a MultiKueue manager queue (no "
        "kueue.x-k8s.io/multikueue admission check); a worker ClusterQueue needs real TPU quota",
    ),
    (
        "borrowing-only-queue-in-a-cohort",
        edit(
            LADDER,
            lambda o: (
                spec(o["ClusterQueue/research"]).update(cohortName="tpu"),
                [
                    r.update(nominalQuota="0")
                    for f in spec(o["ClusterQueue/research"])["resourceGroups"][0]["flavors"]
                    for r in f["resources"]
                ],
            ),
        ),
        "kueue-v1beta2-worker-clusterqueue-has-quota",
        None,
    ),
    (
        "worker-without-resource-groups",
        edit(
            MANAGER,
            lambda o: (
                spec(o["ClusterQueue/tpu-training"]).pop("admissionChecksStrategy"),
                spec(o["ClusterQueue/tpu-training"]).pop("resourceGroups"),
            ),
        ),
        "kueue-v1beta2-worker-clusterqueue-has-quota",
        "ClusterQueue 'tpu-training' has no resourceGroups, and it is not a MultiKueue manager queue",
    ),
]


@pytest.mark.parametrize(("objects", "rule", "fragment"), [pytest.param(o, r, f, id=i) for i, o, r, f in CASES])
def test_cli_and_pack_agree(objects: list[dict[str, Any]], rule: str, fragment: str | None) -> None:
    for front_end in (cli_findings, pack_findings):
        messages = [m for r, m in front_end(objects) if r == rule]
        if fragment is None:
            assert messages == [], f"{front_end.__name__}: {messages}"
        else:
            assert any(fragment in m for m in messages), f"{front_end.__name__}: {messages}"


def test_clean_pictures_are_clean_for_every_rule() -> None:
    for objects in (LADDER, MANAGER):
        assert cli_findings(objects) == [] and pack_findings(objects) == []


def test_every_new_rule_has_a_failing_case() -> None:
    from gke_tpu_priority.policies.rules import admission_checks

    new = {r.name for r in admission_checks.RULES}
    assert new == {r for _, _, r, f in CASES if f is not None}
    assert new == {r for _, _, r, f in CASES if f is None}


# --------------------------------------------------------------------------------------------------------
# The fleet and ladder stacks' previews


@pytest.fixture(scope="module")
def previews(tmp_path_factory: pytest.TempPathFactory) -> Path:
    build = tmp_path_factory.mktemp("build")
    for stack in ("fleet", "ladder"):
        assert preview.main(["--stack", stack, "--build-dir", str(build)]) == 0
    return build


def stack_resources(build: Path, stack: str) -> list[dict[str, Any]]:
    resources: list[dict[str, Any]] = json.loads((build / stack / "resources.json").read_text())["resources"]
    return resources


@pytest.mark.parametrize("stack", ["fleet", "ladder"])
def test_fleet_and_ladder_previews_have_no_findings(previews: Path, stack: str) -> None:
    violations = evaluate_resources(stack_resources(previews, stack), stack_tags={"environment": stack})
    assert violations == [], "\n".join(f"{v.policy}: {v.message}" for v in violations)
    reports = check_objects(load_objects([str(previews / stack / "manifests.yaml")]))
    assert reports == [], "\n".join(f"{r.rule}: {r.message}" for r in reports)


def test_the_ladder_preview_declares_what_the_rules_check(previews: Path) -> None:
    kinds = {r["type"].rsplit(":", 1)[-1] for r in stack_resources(previews, "ladder")}
    assert {"ProvisioningRequestConfig", "AdmissionCheck", "ResourceFlavor", "ClusterQueue"} <= kinds


def test_a_fleet_stack_is_checked_one_cluster_at_a_time(previews: Path) -> None:
    """The manager's ClusterQueue shares its name with the workers'; it is still seen, and only with its checks."""
    resources = stack_resources(previews, "fleet")
    manager_queues = [
        r for r in resources if r["type"].endswith(":ClusterQueue") and "admissionChecksStrategy" in r["inputs"]["spec"]
    ]
    assert len(manager_queues) == 1
    manager_queues[0]["inputs"]["spec"]["admissionChecksStrategy"]["admissionChecks"][0]["name"] = "gone"
    messages = [
        v.message for v in evaluate_resources(resources) if v.policy == "kueue-v1beta2-admission-check-references-exist"
    ]
    assert len(messages) == 1 and "uses admission check 'gone'" in messages[0]
    # A worker's ClusterQueue never sees the manager's AdmissionChecks: a worker queue without quota is refused.
    worker = next(r for r in resources if r["type"].endswith(":ClusterQueue") and r is not manager_queues[0])
    worker["inputs"]["spec"]["resourceGroups"] = []
    assert any(
        v.policy == "kueue-v1beta2-worker-clusterqueue-has-quota" and "needs real TPU quota" in v.message
        for v in evaluate_resources(resources)
    )


def fleet_jobset(queue: str, cluster: str | None) -> dict[str, Any]:
    pod = {
        "priorityClassName": "training-high",
        "nodeSelector": {
            "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
            "cloud.google.com/gke-tpu-topology": "2x2",
        },
        "restartPolicy": "Never",
        "containers": [{"name": "t", "image": "t:1", "resources": {"limits": {TPU: "4"}, "requests": {TPU: "4"}}}],
    }
    metadata: dict[str, Any] = {
        "name": "llm",
        "namespace": "tpu-training",
        "labels": {"kueue.x-k8s.io/queue-name": queue, "kueue.x-k8s.io/priority-class": "training-high"},
    }
    if cluster:
        metadata["annotations"] = {CLUSTER_ANNOTATION: cluster}
    job = {"parallelism": 1, "completions": 1, "template": {"spec": pod}}
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": metadata,
        "spec": {
            "failurePolicy": {"maxRestarts": 3},
            "replicatedJobs": [{"name": "s", "replicas": 1, "template": {"spec": job}}],
        },
    }


@pytest.mark.parametrize("cluster", [None, "manager"])
def test_a_manager_stacks_local_queues_count_for_jobsets(previews: Path, cluster: str | None, tmp_path: Path) -> None:
    """JobSets are submitted to the manager: its LocalQueues are the ones tpu-workload-queue-declared reads."""
    manifests = str(previews / "fleet" / "manifests.yaml")
    platform = [o for o in yaml.safe_load_all(Path(manifests).read_text()) if o]
    manager_queues = [
        o
        for o in platform
        if o["kind"] == "LocalQueue" and o["metadata"]["annotations"][CLUSTER_ANNOTATION] == "manager"
    ]
    assert [(q["metadata"]["namespace"], q["metadata"]["name"]) for q in manager_queues] == [
        ("tpu-training", "training")
    ]
    for queue, expected in (("training", []), ("elsewhere", ["tpu-workload-queue-declared"])):
        (tmp_path / "jobset.yaml").write_text(yaml.safe_dump(fleet_jobset(queue, cluster)))
        reports = check_objects(load_objects([manifests, str(tmp_path / "jobset.yaml")]))
        assert sorted({r.rule for r in reports}) == expected, [r.message for r in reports]
    # Only the manager's LocalQueues: with the workers' gone, the manager still has the queue.
    only_manager = [o for o in platform if not (o["kind"] == "LocalQueue" and o not in manager_queues)]
    (tmp_path / "platform.yaml").write_text(yaml.safe_dump_all(only_manager))
    (tmp_path / "jobset.yaml").write_text(yaml.safe_dump(fleet_jobset("training", "manager")))
    assert check_objects(load_objects([str(tmp_path / "platform.yaml"), str(tmp_path / "jobset.yaml")])) == []


def test_an_autopilot_manager_passes_the_workload_identity_rule() -> None:
    """Autopilot always runs Workload Identity Federation; a Standard cluster must still set the pool."""

    def violations(inputs: dict[str, Any]) -> list[str]:
        resource = {
            "urn": "urn:pulumi:fleet::p::gcp:container/cluster:Cluster::manager",
            "type": "gcp:container/cluster:Cluster",
            "name": "manager",
            "inputs": {
                "name": "manager",
                "location": "us-central1",
                "releaseChannel": {"channel": "REGULAR"},
                **inputs,
            },
        }
        return [
            v.message
            for v in evaluate_resources([resource])
            if v.policy == "gcp-container-cluster-enable-workload-identity"
        ]

    assert violations({"enableAutopilot": True}) == []
    assert any("has no workloadIdentityConfig.workloadPool" in m for m in violations({}))
