"""The TPU JobSet template: correct for every v6e shape, accepted by the JobSet v0.12.0 CRD, policy-clean."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from gke_tpu_priority.components import tpu_shapes
from gke_tpu_priority.components.workloads import TpuJobSetSpec, tpu_jobset
from gke_tpu_priority.components.workloads.__main__ import main as render_main
from gke_tpu_priority.policies.rules import evaluate_resources
from tests.support.crd_validation import assert_valid


def spec(**overrides: Any) -> TpuJobSetSpec:
    raw: dict[str, Any] = {
        "name": "train",
        "namespace": "team-a",
        "queue": "training",
        "priority": "training-high",
        "topology": "4x4",
        "slices": 2,
        "image": "us-docker.pkg.dev/p/r/train:1",
        "command": ["python", "train.py"],
    }
    raw.update(overrides)
    return TpuJobSetSpec.model_validate(raw)


@pytest.mark.parametrize("shape", tpu_shapes.SHAPES, ids=lambda s: s.key)
def test_every_shape_gives_a_valid_jobset_with_matching_pod_counts(shape: tpu_shapes.SliceShape) -> None:
    obj = tpu_jobset(spec(topology=shape.topology, machineType=shape.machine_type, slices=3))
    assert_valid(obj)  # JobSet v0.12.0 CRD: schema, CEL rules, nothing pruned
    (rjob,) = obj["spec"]["replicatedJobs"]
    job = rjob["template"]["spec"]
    assert rjob["replicas"] == 3
    assert job["parallelism"] == job["completions"] == shape.vms
    container = job["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"]["google.com/tpu"] == str(shape.chips_per_vm)
    selector = job["template"]["spec"]["nodeSelector"]
    assert selector["cloud.google.com/gke-tpu-accelerator"] == "tpu-v6e-slice"
    assert selector["cloud.google.com/gke-tpu-topology"] == shape.topology
    if shape.topology == "2x4":
        assert selector["node.kubernetes.io/instance-type"] == shape.machine_type


def test_queue_priority_and_exclusive_placement() -> None:
    obj = tpu_jobset(spec())
    meta = obj["metadata"]
    assert meta["labels"] == {"kueue.x-k8s.io/queue-name": "training", "kueue.x-k8s.io/priority-class": "training-high"}
    assert meta["annotations"]["alpha.jobset.sigs.k8s.io/exclusive-topology"] == "cloud.google.com/gke-nodepool"
    pod = obj["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert pod["priorityClassName"] == meta["labels"]["kueue.x-k8s.io/priority-class"]
    assert {"key": "google.com/tpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    assert pod["restartPolicy"] == "Never"


def test_infrastructure_disruptions_do_not_burn_the_restart_budget() -> None:
    obj = tpu_jobset(spec(maxRestarts=5))
    policy = obj["spec"]["failurePolicy"]
    assert policy["maxRestarts"] == 5 and policy["restartStrategy"] == "BlockingRecreate"
    assert policy["rules"] == [
        {
            "name": "restartOnInfrastructureDisruption",
            "action": "RestartJobSetAndIgnoreMaxRestarts",
            "onJobFailureReasons": ["PodFailurePolicy"],
        }
    ]
    job = obj["spec"]["replicatedJobs"][0]["template"]["spec"]
    assert job["podFailurePolicy"]["rules"][0] == {
        "action": "FailJob",
        "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
    }
    assert job["backoffLimit"] == 0


def test_hotswap_opt_ins_are_annotations() -> None:
    annotations = tpu_jobset(spec(fastFail=True, protect=True))["metadata"]["annotations"]
    assert annotations["hotswap.gke-tpu-priority.io/fast-fail"] == "true"
    assert annotations["hotswap.gke-tpu-priority.io/protect"] == "true"
    assert "hotswap.gke-tpu-priority.io/fast-fail" not in tpu_jobset(spec())["metadata"]["annotations"]


def test_bad_workload_input_names_the_field() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="needs an explicit machineType"):
        spec(topology="2x4")
    with pytest.raises(ValidationError, match="slices"):
        spec(slices=0)


def test_policy_pack_accepts_the_template() -> None:
    obj = tpu_jobset(spec())
    resource = {
        "urn": "urn:pulumi:s::p::kubernetes:jobset.x-k8s.io/v1alpha2:JobSet::train",
        "type": "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet",
        "name": "train",
        "parent": None,
        "inputs": obj,
    }
    assert [v for v in evaluate_resources([resource]) if "jobset" in v.policy] == []
    del obj["metadata"]["annotations"]["alpha.jobset.sigs.k8s.io/exclusive-topology"]
    assert any("jobset" in v.policy for v in evaluate_resources([resource]))  # the policy did look


def test_cli_renders_yaml(capsys: pytest.CaptureFixture[str]) -> None:
    code = render_main(
        [
            "--name",
            "t",
            "--namespace",
            "ns",
            "--queue",
            "q",
            "--priority",
            "training-low",
            "--topology",
            "2x4",
            "--machine-type",
            "ct6e-standard-8t",
            "--image",
            "img",
            "--",
            "run",
        ]
    )
    assert code == 0
    obj = yaml.safe_load(capsys.readouterr().out)
    assert obj["kind"] == "JobSet" and obj["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"] == 1
    assert (
        render_main(
            [
                "--name",
                "t",
                "--namespace",
                "ns",
                "--queue",
                "q",
                "--priority",
                "p",
                "--topology",
                "9x9",
                "--image",
                "img",
            ]
        )
        == 2
    )
    assert "jobset.topology" in capsys.readouterr().err


@pytest.mark.parametrize("shape", tpu_shapes.SHAPES, ids=lambda s: s.key)
def test_each_slice_is_exclusive_without_locking_a_pool_of_single_host_vms(shape: tpu_shapes.SliceShape) -> None:
    # JobSet keeps every other exclusive Job out of the whole topology domain: per node pool for a multi-host slice
    # (the pool is the slice), per VM for single-host shapes, whose pool holds many independent slices.
    obj = tpu_jobset(spec(topology=shape.topology, machine_type=shape.machine_type, slices=2))
    expected = "cloud.google.com/gke-nodepool" if shape.vms > 1 else "kubernetes.io/hostname"
    assert obj["metadata"]["annotations"]["alpha.jobset.sigs.k8s.io/exclusive-topology"] == expected


def test_pods_know_their_jobset_for_mark_checkpoint() -> None:
    def env_of(obj: dict[str, Any]) -> list[dict[str, Any]]:
        pod = obj["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        return list(pod["containers"][0]["env"])

    obj = tpu_jobset(spec(env={"STEPS": "10"}))
    assert_valid(obj)
    assert env_of(obj) == [
        {"name": "STEPS", "value": "10"},
        {
            "name": "JOBSET_NAME",
            "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['jobset.sigs.k8s.io/jobset-name']"}},
        },
        {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
    ]
    # A value the user sets wins; the downward-API entry is not added twice.
    overridden = env_of(tpu_jobset(spec(env={"JOBSET_NAME": "mine"})))
    assert [e["name"] for e in overridden] == ["JOBSET_NAME", "POD_NAMESPACE"]
    assert overridden[0] == {"name": "JOBSET_NAME", "value": "mine"}


def test_allow_spot_false_excludes_both_spot_labels_and_stays_valid_and_policy_clean() -> None:
    def pod_spec(obj: dict[str, Any]) -> dict[str, Any]:
        spec_: dict[str, Any] = obj["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        return spec_

    assert "affinity" not in pod_spec(tpu_jobset(spec()))  # default: every rung, spot included
    obj = tpu_jobset(spec(allowSpot=False))
    terms = pod_spec(obj)["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    # One term, so both expressions must hold: off the package's spot pools and off GKE-labelled spot nodes.
    assert terms["nodeSelectorTerms"] == [
        {
            "matchExpressions": [
                {"key": "gke-tpu-priority.io/capacity", "operator": "NotIn", "values": ["spot"]},
                {"key": "cloud.google.com/gke-spot", "operator": "NotIn", "values": ["true"]},
            ]
        }
    ]
    assert pod_spec(obj)["nodeSelector"] == pod_spec(tpu_jobset(spec()))["nodeSelector"]
    assert_valid(obj)

    def violations(inputs: dict[str, Any]) -> list[str]:
        resource = {
            "urn": "urn:pulumi:s::p::kubernetes:jobset.x-k8s.io/v1alpha2:JobSet::train",
            "type": "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet",
            "name": "train",
            "parent": None,
            "inputs": inputs,
        }
        return sorted(v.policy for v in evaluate_resources([resource]))

    # The rule set says of it what it says of the default template (here: only that no stack declares its queue).
    assert violations(obj) == violations(tpu_jobset(spec()))


def test_cli_no_spot_sets_the_affinity(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--name", "t", "--namespace", "ns", "--queue", "q", "--priority", "p", "--topology", "4x4", "--image", "i"]
    assert render_main([*argv, "--no-spot"]) == 0
    rendered = yaml.safe_load(capsys.readouterr().out)
    pod = rendered["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert pod["affinity"]["nodeAffinity"]
    assert render_main(argv) == 0
    assert (
        "affinity"
        not in yaml.safe_load(capsys.readouterr().out)["spec"]["replicatedJobs"][0]["template"]["spec"]["template"][
            "spec"
        ]
    )
