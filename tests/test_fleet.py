"""The fleet stack: MultiKueue objects valid against the pinned CRDs, least-privilege worker identity, secrets."""

from __future__ import annotations

import copy
import functools
import json
from typing import Any

import pytest

from gke_tpu_priority.components.config import ConfigError
from gke_tpu_priority.components.config.fleet import FLEET_CONFIG_PATH, check_groups, parse_fleet_config
from gke_tpu_priority.components.fleet.credentials import WORKER_RULES
from gke_tpu_priority.components.fleet.multikueue import manager_cluster_queue, manager_cluster_queues
from testkit import mock_runtime
from testkit.mock_runtime import load_stack_config
from testkit.resources import SECRET_SIG, ProgramRun
from testkit.stacks import FLEET_STACKS, stack_run
from tests.support.crd_validation import assert_valid
from tools.fleet_preview import CLUSTER_ANNOTATION, fleet_objects
from tools.manifests import kubernetes_objects, unwrap_secrets


def fleet_run() -> ProgramRun:
    return stack_run("fleet")


@functools.cache
def fleet_cluster_objects(stack: str) -> dict[str, list[dict[str, Any]]]:
    """Every Kubernetes object of a fleet stack by the cluster (``manager`` or a worker) it is applied to, as
    emitted (the preview's cluster annotation removed)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for obj in fleet_objects(stack_run(stack), stack):
        obj = copy.deepcopy(obj)
        annotations = obj["metadata"]["annotations"]
        cluster = annotations.pop(CLUSTER_ANNOTATION)
        if not annotations:
            del obj["metadata"]["annotations"]
        out.setdefault(cluster, []).append(obj)
    return out


def test_fleet_objects_cover_the_manager_and_every_worker() -> None:
    for stack in FLEET_STACKS:
        config = parse_fleet_config(load_stack_config(stack)[FLEET_CONFIG_PATH])
        clusters = fleet_cluster_objects(stack)
        assert set(clusters) == {"manager", *(w.name for w in config.workers)}
        assert all(clusters.values())


def raw_fleet() -> dict[str, Any]:
    return copy.deepcopy(load_stack_config("fleet")[FLEET_CONFIG_PATH])


def test_every_kueue_object_validates_against_the_pinned_crds() -> None:
    objs = [o for o in kubernetes_objects(fleet_run().resources) if o["apiVersion"].startswith("kueue.x-k8s.io/")]
    kinds = {o["kind"] for o in objs}
    assert {"MultiKueueCluster", "MultiKueueConfig", "AdmissionCheck", "ClusterQueue"} <= kinds
    for obj in objs:
        assert_valid(obj)  # nothing pruned, no pattern skipped


def test_manager_queue_is_the_fleet_sum_with_one_multikueue_check() -> None:
    objs = kubernetes_objects(fleet_run().resources)
    (mkc,) = [o for o in objs if o["kind"] == "MultiKueueConfig"]
    # 4x4 is on both workers and 2x2 on south1 only: the queue's one config lists both, in dispatch order.
    assert mkc["metadata"]["name"] == "multikueue" and mkc["spec"]["clusters"] == ["east5", "south1"]
    manager_cq = [o for o in objs if o["kind"] == "ClusterQueue" and "admissionChecksStrategy" in o["spec"]]
    (cq,) = manager_cq
    quotas = {f["name"]: int(f["resources"][0]["nominalQuota"]) for f in cq["spec"]["resourceGroups"][0]["flavors"]}
    assert quotas == {"v6e-4x4": 48, "v6e-2x2": 8}
    # Kueue v0.19.2 leaves a ClusterQueue with two MultiKueue checks, or one with onFlavors, inactive.
    assert cq["spec"]["admissionChecksStrategy"]["admissionChecks"] == [{"name": "multikueue"}]


def test_check_groups_split_by_cluster_queue_not_by_flavor() -> None:
    raw = raw_fleet()
    platform = raw["workers"][1]["platform"]
    # A second ClusterQueue on south1 only, for its 2x2 slices: its own check, listing south1 alone.
    local = [
        {"name": "training", "namespace": "team-a", "clusterQueue": "tpu-training"},
        {"name": "small", "namespace": "team-a", "clusterQueue": "tpu-small"},
    ]
    platform["queues"] = {
        "localQueues": local,
        "clusterQueues": [
            {"name": "tpu-training", "namespaces": ["team-a"], "quotas": [{"flavor": "v6e-4x4", "chips": 16}]},
            {"name": "tpu-small", "namespaces": ["team-a"], "quotas": [{"flavor": "v6e-2x2", "chips": 8}]},
        ],
    }
    raw["workers"][0]["platform"]["queues"] = {
        "localQueues": local,
        "clusterQueues": [
            {"name": "tpu-training", "namespaces": ["team-a"], "quotas": [{"flavor": "v6e-4x4", "chips": 32}]},
            {"name": "tpu-small", "namespaces": ["team-a"], "quotas": [{"flavor": "v6e-4x4", "chips": 0}]},
        ],
    }
    config = parse_fleet_config(raw)
    groups = check_groups(config)
    assert {g.cluster_queues: g.workers for g in groups} == {
        ("tpu-small",): ("south1",),
        ("tpu-training",): ("east5", "south1"),
    }
    for spec in manager_cluster_queues(config):
        checks = manager_cluster_queue(spec, groups)["spec"]["admissionChecksStrategy"]["admissionChecks"]
        assert len(checks) == 1 and "onFlavors" not in checks[0], (spec.name, checks)


def test_kubeconfig_secrets_are_pulumi_secrets_and_rbac_is_exact() -> None:
    run = fleet_run()
    secrets = [r for r in run.resources if r.type == "kubernetes:core/v1:Secret" and "-mk-kubeconfig-" in r.name]
    assert len(secrets) == 2
    for res in secrets:
        assert SECRET_SIG in res.inputs["stringData"]  # the whole stringData is sent as a secret
    roles = [o for o in kubernetes_objects(run.resources) if o["kind"] == "ClusterRole"]
    mk = [o for o in roles if o["metadata"]["name"] == "multikueue-manager"]
    assert len(mk) == 2 and all(o["rules"] == WORKER_RULES for o in mk)
    verbs = {(r["apiGroups"][0], r["resources"][0]): r["verbs"] for r in WORKER_RULES}
    assert verbs[("", "pods")] == ["get", "list", "watch"]
    assert verbs[("", "events")] == ["get", "list", "watch"]
    assert verbs[("jobset.x-k8s.io", "jobsets")] == ["create", "delete", "get", "list", "watch"]


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda f: f.update(workers=f["workers"][:1]), "fleet.workers: 1 worker(s) given; a fleet needs at least 2"),
        (lambda f: f["workers"][1].update(name="east5"), "fleet.workers[1].name: 'east5' is already used by"),
        (
            lambda f: f["workers"][1]["platform"].update(priorities=[{"name": "only", "value": 1, "description": "x"}]),
            "fleet.workers[1].platform.priorities:",
        ),
        (
            lambda f: f.update(managerQuotas=[{"clusterQueue": "tpu-training", "flavor": "v6e-4x4", "chips": 64}]),
            "fleet.managerQuotas[0].chips: 64 exceeds the 48 chips",
        ),
        (
            lambda f: (
                f["workers"][0]["platform"]["cluster"].update(name="tpu-fleet-manager")
                or f["workers"][0]["platform"].update(region="us-central1")
                or f["workers"][0]["platform"]["tpuPools"][0].update(zone="us-central1-b")
            ),
            "may not also be the manager",
        ),
        (
            lambda f: f["multiKueue"].update(dispatcher="AllAtOnce"),
            "fleet.multiKueue.incrementalStepSize: 1 is set but dispatcher is 'AllAtOnce'",
        ),
    ],
)
def test_validation_names_path_value_and_allowed(mutate: Any, message: str) -> None:
    raw = raw_fleet()
    mutate(raw)
    with pytest.raises(ConfigError) as err:
        parse_fleet_config(raw)
    assert message in str(err.value)


# --- the worker token read back: never an empty kubeconfig token ------------------------------------------


def test_an_empty_worker_token_fails_the_update_naming_the_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    real = mock_runtime._fake_outputs

    def token_not_yet_written(typ: str, name: str, inputs: dict[str, Any]) -> dict[str, Any]:
        out = real(typ, name, inputs)
        if typ == "kubernetes:core/v1:Secret" and name.endswith("-read"):
            out["data"] = {}  # the token controller has not filled the Secret in
        return out

    monkeypatch.setattr(mock_runtime, "_fake_outputs", token_not_yet_written)
    with pytest.raises(
        Exception,
        match=r"fleet\.workers\[\d+\] \(\w[\w-]*\): the MultiKueue token Secret "
        r"kueue-system/multikueue-manager-token-g\d+ has no token",
    ) as info:
        mock_runtime.run_program(FLEET_STACKS[0])
    assert "credentialsGeneration" in str(info.value)


def test_the_worker_token_read_back_is_the_one_in_the_kubeconfig() -> None:
    run = fleet_run()
    secrets = [r for r in run.resources if r.type == "kubernetes:core/v1:Secret" and "-mk-kubeconfig-" in r.name]
    assert secrets
    for res in secrets:
        kubeconfig = json.loads(unwrap_secrets(res.inputs["stringData"])["kubeconfig"])
        assert kubeconfig["users"][0]["user"] == {"token": mock_runtime.MOCK_SA_TOKEN}
