"""The MultiKueue objects the fleet emits pass what Kueue's MultiKueue and admission-check controllers check
(tests/support/multikueue_rules.py), and each of those checks can fire."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from gke_tpu_priority.components.fleet.credentials import token_kubeconfig
from testkit.stacks import FLEET_STACKS
from tests.support import multikueue_rules as mk
from tests.test_fleet import fleet_cluster_objects


def _mutate(obj: dict[str, Any], fn: Any) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    fn(out)
    return out


@pytest.mark.parametrize("stack", FLEET_STACKS)
def test_every_fleet_object_of_every_cluster_passes_the_multikueue_checks(stack: str) -> None:
    clusters = fleet_cluster_objects(stack)
    for cluster, objs in clusters.items():
        assert mk.object_problems(objs) == [], cluster
        assert mk.multikueue_problems(objs) == [], cluster
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
    assert mk.kubeconfig_problems(text) == []
    dns = token_kubeconfig("east5", "https://gke-abc.us-east5.gke.goog:443", None, "a-token")
    assert mk.kubeconfig_problems(dns) == []


# --- MultiKueue: each controller check fires ----------------------------------------------------------------

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
    assert mk.admission_check_problems(MK_CHECK) == []
    bad = _mutate(MK_CHECK, mutation)
    problems = mk.admission_check_problems(bad)
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
    assert mk.multikueue_cluster_problems(MK_CLUSTER) == []
    (problem,) = mk.multikueue_cluster_problems(_mutate(MK_CLUSTER, mutation))
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
    problems = mk.kubeconfig_problems(json.dumps(doc))
    assert [(p.path, detail in p.detail) for p in problems] == [(path, True)], problems
    assert mk.kubeconfig_problems("{not: [yaml") and mk.kubeconfig_problems("[]")


def test_kubeconfig_must_be_usable() -> None:
    doc = json.loads(token_kubeconfig("east5", "https://203.0.113.10", "Q0E=", "a-token"))
    for mutation, path in (
        (lambda d: d.update(clusters=[]), "kubeconfig"),
        (lambda d: d.update({"current-context": "west4"}), "current-context"),
        (lambda d: d["contexts"][0]["context"].update(cluster="west4"), "current-context"),
    ):
        bad = copy.deepcopy(doc)
        mutation(bad)
        assert [p.path for p in mk.kubeconfig_problems(json.dumps(bad))] == [path]


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
    assert mk.multikueue_problems(objs) == []
    mutation(objs)
    problems = mk.multikueue_problems(objs)
    assert len(problems) == 1 and needle in problems[0], problems


def test_fleet_component_output_was_refused_by_the_scheduler_cache_rule() -> None:
    """The per-flavor checks TpuFleet emitted before this rule was mirrored: two MultiKueue checks with onFlavors."""
    objs = _manager_objects()
    objs.append({**copy.deepcopy(MK_CHECK), "metadata": {"name": "mk2"}})
    _by_kind(objs, "ClusterQueue")["spec"]["admissionChecksStrategy"] = {
        "admissionChecks": [{"name": "multikueue", "onFlavors": ["g"]}, {"name": "mk2", "onFlavors": ["g2"]}]
    }
    problems = mk.multikueue_problems(objs)
    assert sum("AppliedPerFlavor" in p for p in problems) == 2
    assert sum("MultipleMultiKueueAdmissionChecks" in p for p in problems) == 1
