"""One table of good and bad TPU workloads through all three front ends: the Pulumi pack, the CLI and the
in-cluster admission policy (its CEL evaluated offline). They must refuse the same objects for the same rules.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from gke_tpu_priority.policies import rules
from gke_tpu_priority.policies.check import check_objects
from gke_tpu_priority.policies.rules.base import manifest_object
from testkit.admission_cases import (
    BINDINGS,
    CASES,
    CPU_POD,
    CPU_TOLERATING_ALL,
    CPU_TOLERATING_TPU,
    PLATFORM,
    POLICIES,
    SETTINGS,
    WORKLOAD_RULES,
    edit,
    in_team_b,
    job,
    jobset,
    owned_by,
    pod,
    tier,
    workload_of,
)
from tests.policies.admission_cel import Outcome, evaluate
from tests.support.crd_validation import assert_valid
from tests.support.kube_schemas import assert_valid_builtin


def admit(obj: dict[str, Any], **request: Any) -> Outcome:
    """The in-cluster verdict: every policy, on ``obj`` after the server's defaulting, in this cluster."""
    classes = [o for o in PLATFORM if o["kind"] == "PriorityClass"]
    return evaluate(
        POLICIES, BINDINGS, obj, priority_classes=classes, local_queues=SETTINGS.context.local_queues, **request
    )


def pack_rules(obj: dict[str, Any]) -> set[str]:
    """The pack's verdict on the in-cluster rules (its other rules, e.g. pod security, are not the table's)."""
    resources = []
    for manifest in [*PLATFORM, obj]:
        group_version = manifest["apiVersion"] if "/" in manifest["apiVersion"] else f"core/{manifest['apiVersion']}"
        resource_type = f"kubernetes:{group_version}:{manifest['kind']}"
        name = manifest["metadata"]["name"]
        resources.append(
            {
                "urn": f"urn:pulumi:dev::p::{resource_type}::{name}",
                "type": resource_type,
                "name": name,
                "inputs": manifest,
            }
        )
    return {v.policy for v in rules.evaluate_resources(resources)} & WORKLOAD_RULES


def cli_rules(obj: dict[str, Any]) -> set[str]:
    return {r.rule for r in check_objects([manifest_object(m) for m in [*PLATFORM, obj]])} & WORKLOAD_RULES


@pytest.mark.parametrize(("obj", "broken"), [pytest.param(o, b, id=i) for i, o, b in CASES])
def test_pack_cli_and_admission_policy_agree(obj: dict[str, Any], broken: set[str]) -> None:
    assert broken <= WORKLOAD_RULES
    assert pack_rules(obj) == broken
    assert cli_rules(obj) == broken
    outcome = admit(obj)
    assert outcome.rules == broken, outcome.failures
    for message in outcome.failures:
        assert message.startswith("[") and f" {obj['kind']} {obj['metadata']['namespace']}/" in message


def test_the_table_covers_every_in_cluster_rule_and_kind() -> None:
    assert set().union(*(b for _, _, b in CASES)) == WORKLOAD_RULES
    assert {o["kind"] for _, o, b in CASES if b} == {
        "JobSet",
        "Job",
        "Pod",
        "Deployment",
        "StatefulSet",
        "ReplicaSet",
        "DaemonSet",
        "CronJob",
    }


def test_table_objects_are_valid_for_the_api_server() -> None:
    """Valid but for the rules they break, for the schema. JobSet's own webhook judges them in e2e
    (e2e/test_admission_cases.py: with the bindings set to Warn, every table object must be accepted)."""
    for _, obj, _ in CASES:
        if obj["kind"] == "JobSet":
            assert_valid(obj)
        else:
            assert_valid_builtin(obj)


def test_platform_objects_are_clean() -> None:
    assert pack_rules(PLATFORM[0]) == set() and cli_rules(PLATFORM[0]) == set()


def test_a_namespace_without_a_local_queue_runs_no_tpu_work() -> None:
    """The bindings cover every namespace but the system ones: a TPU workload where the platform declares no
    LocalQueue is refused by all three front ends, not left unchecked."""
    elsewhere = edit(job(), lambda o: o["metadata"].update(namespace="scratch"))
    assert cli_rules(elsewhere) == pack_rules(elsewhere) == admit(elsewhere).rules == {"tpu-workload-queue-declared"}
    for system in ("kube-system", "gmp-system", "kueue-system"):
        gke_agent = workload_of("DaemonSet", CPU_TOLERATING_ALL)
        gke_agent["metadata"]["namespace"] = system
        assert not admit(gke_agent).matched


@pytest.mark.parametrize(
    "username",
    [
        "system:serviceaccount:kube-system:job-controller",
        "system:serviceaccount:kube-system:daemon-set-controller",
        "system:kube-controller-manager",
    ],
)
def test_what_a_controller_makes_is_told_by_who_sends_it(username: str) -> None:
    """A Job's pods, made by the job controller, are not checked; the same pod from a person is refused."""
    made = edit(pod("4x4", "4"), owned_by("Job"))
    assert admit(made, username=username) == Outcome(False)
    assert admit(made).rules == {"tpu-only-through-kueue"}


@pytest.mark.parametrize(
    "username",
    [
        "system:serviceaccount:kueue-system:kueue-controller-manager",
        "system:serviceaccount:jobset-system:jobset-controller",
        "system:serviceaccount:kube-system:generic-garbage-collector",
        "system:kube-controller-manager",
    ],
)
def test_platform_controllers_are_never_refused(username: str) -> None:
    broken = edit(jobset(), lambda o: o["metadata"].update(labels={}))
    assert admit(broken, operation="UPDATE", username=username, old=broken) == Outcome(False)
    assert admit(broken, operation="UPDATE", old=broken).rules  # a person is refused


def test_objects_being_deleted_can_lose_their_finalizers() -> None:
    broken = edit(jobset(), lambda o: o["metadata"].update(labels={}, deletionTimestamp="2026-01-01T00:00:00Z"))
    assert not admit(broken, operation="UPDATE", old=broken).matched


def test_a_pod_cannot_gain_a_route_to_tpu_by_an_update() -> None:
    """Tolerations can be added to a Pending pod: one that gains the TPU toleration is refused; a pod that already
    reached TPU (a Job's, made by the job controller) may still be updated, e.g. relabelled."""
    cpu = {**pod(), "spec": CPU_POD}
    gains = {**pod(), "spec": CPU_TOLERATING_TPU}
    assert admit(cpu, operation="UPDATE", old=cpu) == Outcome(False)
    assert admit(gains, operation="UPDATE", old=cpu).rules == {"tpu-only-through-kueue"}
    made = edit(pod("4x4", "4"), owned_by("Job"))
    relabelled = edit(made, lambda o: o["metadata"].update(labels={"team": "a"}))
    assert admit(relabelled, operation="UPDATE", old=made) == Outcome(True)
    assert admit(made).rules == {"tpu-only-through-kueue"}


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(tier("training-high"), id="tier"),
        pytest.param(
            lambda o: (
                o["metadata"].setdefault("annotations", {}).update({"hotswap.gke-tpu-priority.io/protect": "true"})
            ),
            id="protect",
        ),
    ],
)
def test_an_update_cannot_do_what_a_create_may_not(change: Callable[[dict[str, Any]], Any]) -> None:
    """Entitlement and protection are checked on update too: a team cannot raise its tier or opt out later."""
    created = edit(jobset(), lambda o: (in_team_b(o), tier("training-low")(o)))
    assert admit(created).rules == set()
    assert admit(edit(created, change), operation="UPDATE", old=created).rules


def test_refusals_say_what_to_set() -> None:
    outcome = admit(edit(jobset(), lambda o: o["metadata"]["labels"].update({"kueue.x-k8s.io/queue-name": "gpu"})))
    assert outcome.failures == [
        "[tpu-workload-queue-declared] TPU JobSet team-a/llm names LocalQueue 'gpu', which namespace 'team-a' does "
        "not have (declared there: training); set kueue.x-k8s.io/queue-name to one of them."
    ]
    generated = edit(
        job(), lambda o: (o["metadata"].pop("name"), o["metadata"].update(generateName="probe-", labels={}))
    )
    assert any("TPU Job team-a/probe-* has no label kueue.x-k8s.io/queue-name" in m for m in admit(generated).failures)
    (entitled,) = admit(edit(jobset(), in_team_b)).failures
    assert entitled == (
        "[tpu-workload-tier-entitled] TPU JobSet team-b/llm uses a tier above what namespace 'team-b' is entitled to "
        "(label or pod priorityClassName; allowed there: training-low); use one of them. The platform's "
        "`teams[].maxTier` decides a team's highest tier."
    )
    (bare,) = admit(pod()).failures
    assert bare.startswith("[tpu-only-through-kueue] Pod team-a/probe can reach TPU nodes; Kueue's pod integration")


def test_a_non_restartable_high_jobset_is_refused_with_what_to_set() -> None:
    (message,) = admit(edit(jobset(), lambda o: o["spec"]["failurePolicy"].update(maxRestarts=0))).failures
    assert message.startswith(
        "[jobset-v1alpha2-tpu-hotswap-restartable] TPU JobSet team-a/llm is in tier 'training-high', which hotswap "
        "protects by restarting it on healthy slices, but its spec.failurePolicy.maxRestarts is 0"
    )
    assert "set spec.failurePolicy.maxRestarts to at least 1" in message
    (missing,) = admit(edit(jobset(), lambda o: o["spec"].pop("failurePolicy"))).failures
    assert "it has no spec.failurePolicy, so its first failed Job fails it" in missing


def test_verdicts_are_on_the_defaulted_object() -> None:
    """A Job that leaves parallelism and completions unset runs one pod: right for a 1-VM slice only."""
    single = edit(job("2x2", "4", 1), lambda o: (o["spec"].pop("parallelism"), o["spec"].pop("completions")))
    assert admit(single).rules == cli_rules(single) == set()
    multi = edit(job("4x4", "4", 4), lambda o: (o["spec"].pop("parallelism"), o["spec"].pop("completions")))
    assert admit(multi).rules == cli_rules(multi) == {"tpu-workload-fits-v6e-shape"}
