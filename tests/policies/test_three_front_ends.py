"""One table of good and bad TPU workloads through all three front ends: the Pulumi pack, the CLI and the
in-cluster admission policy (its CEL evaluated offline). They must refuse the same objects for the same rules.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from gke_tpu_priority.policies import rules
from gke_tpu_priority.policies.admission import (
    AdmissionSettings,
    validating_admission_policies,
    validating_admission_policy_bindings,
)
from gke_tpu_priority.policies.check import check_objects
from gke_tpu_priority.policies.rules.base import AdmissionContext, manifest_object, pod_templates
from gke_tpu_priority.policies.rules.spot_tiers import ALLOW_SPOT_ANNOTATION
from gke_tpu_priority.policies.rules.tenancy import ALLOWED_TIERS_ANNOTATION, MAY_PROTECT_ANNOTATION
from tests.policies.admission_cel import Outcome, evaluate
from tests.support.admission_rules import admission_problems as jobset_webhook_problems
from tests.support.crd_validation import assert_valid
from tests.support.kube_schemas import assert_valid_builtin

TIERS = {"training-critical": 3_000_000, "training-high": 2_000_000, "training-low": 1_000_000}
OFF_SPOT = "training-critical"  # the tier the platform keeps off spot capacity
NAMESPACE, QUEUE = "team-a", "training"
ENTITLEMENTS = {NAMESPACE: ("training-critical", "training-high", "training-low"), "team-b": ("training-low",)}
WORKLOAD_RULES = {r.name for r in rules.ADMISSION_RULES}

PLATFORM: list[dict[str, Any]] = [
    *(
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": n}, "value": v}
        for n, v in TIERS.items()
    ),
    *(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": n, **({"annotations": {ALLOW_SPOT_ANNOTATION: "false"}} if n == OFF_SPOT else {})},
            "value": v,
        }
        for n, v in TIERS.items()
    ),
    {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "tpu-training"},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["google.com/tpu"],
                    "flavors": [{"name": "v6e", "resources": [{"name": "google.com/tpu", "nominalQuota": 64}]}],
                }
            ],
        },
    },
    # Two teams, as the stack declares them: team-a entitled to every tier, team-b only to training-low; neither
    # may protect its JobSets from hotswap.
    *(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {
                "name": QUEUE,
                "namespace": ns,
                "annotations": {ALLOWED_TIERS_ANNOTATION: ",".join(allowed), MAY_PROTECT_ANNOTATION: "false"},
            },
            "spec": {"clusterQueue": "tpu-training"},
        }
        for ns, allowed in ENTITLEMENTS.items()
    ),
]
SETTINGS = AdmissionSettings(
    AdmissionContext(
        tiers=tuple(TIERS),
        local_queues={ns: (QUEUE,) for ns in ENTITLEMENTS},
        hotswap_tiers=("training-high",),
        entitlements=ENTITLEMENTS,
        protecting_namespaces=(),
        spot_free_tiers=(OFF_SPOT,),
    ),
    controller_namespaces=("kueue-system", "jobset-system"),
)
POLICIES = validating_admission_policies(SETTINGS)
BINDINGS = validating_admission_policy_bindings(SETTINGS)


def admit(obj: dict[str, Any], **request: Any) -> Outcome:
    """The in-cluster verdict: every policy, on ``obj`` after the server's defaulting, in this cluster."""
    classes = [o for o in PLATFORM if o["kind"] == "PriorityClass"]
    return evaluate(
        POLICIES, BINDINGS, obj, priority_classes=classes, local_queues=SETTINGS.context.local_queues, **request
    )


def pod_spec(topology: str = "4x4", chips: Any = "4", machine: str | None = None) -> dict[str, Any]:
    selector = {"cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice", "cloud.google.com/gke-tpu-topology": topology}
    if machine:
        selector["node.kubernetes.io/instance-type"] = machine
    return {
        "priorityClassName": "training-high",
        "nodeSelector": selector,
        "restartPolicy": "Never",
        "containers": [
            {
                "name": "trainer",
                "image": "trainer:1",
                "resources": {"limits": {"google.com/tpu": chips}, "requests": {"google.com/tpu": chips}},
            }
        ],
    }


def metadata(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": NAMESPACE,
        "labels": {"kueue.x-k8s.io/queue-name": QUEUE, "kueue.x-k8s.io/priority-class": "training-high"},
    }


def jobset(topology: str = "4x4", chips: Any = 4, vms: int = 4, machine: str | None = None) -> dict[str, Any]:
    meta = metadata("llm")
    meta["annotations"] = {"alpha.jobset.sigs.k8s.io/exclusive-topology": "cloud.google.com/gke-nodepool"}
    job = {
        "parallelism": vms,
        "completions": vms,
        "backoffLimit": 0,
        "template": {"spec": pod_spec(topology, chips, machine)},
    }
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": meta,
        "spec": {
            "failurePolicy": {"maxRestarts": 3},
            "replicatedJobs": [{"name": "slice", "replicas": 2, "template": {"spec": job}}],
        },
    }


def job(topology: str = "2x2", chips: str = "4", vms: int = 1) -> dict[str, Any]:
    spec = {"parallelism": vms, "completions": vms, "template": {"spec": pod_spec(topology, chips)}}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata("train"), "spec": spec}


def pod(topology: str = "1x1", chips: str = "1") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata("probe"), "spec": pod_spec(topology, chips)}


def edit(obj: dict[str, Any], change: Callable[[dict[str, Any]], Any]) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    change(obj)
    return obj


def js_pod(obj: dict[str, Any]) -> dict[str, Any]:
    return obj["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]


def js_job(obj: dict[str, Any]) -> dict[str, Any]:
    return obj["spec"]["replicatedJobs"][0]["template"]["spec"]


def owned_by(kind: str) -> Callable[[dict[str, Any]], Any]:
    def change(obj: dict[str, Any]) -> None:
        obj["metadata"] = {"name": "llm-slice-0", "namespace": NAMESPACE}  # what a controller copies: no labels
        obj["metadata"]["ownerReferences"] = [
            {"apiVersion": "v1", "kind": kind, "name": "owner", "uid": "0000", "controller": True}
        ]

    return change


CPU_POD = {"containers": [{"name": "c", "image": "c:1", "resources": {"limits": {"cpu": "1"}}}]}


def in_team_b(obj: dict[str, Any]) -> None:
    obj["metadata"]["namespace"] = "team-b"


def tier(name: str) -> Callable[[dict[str, Any]], Any]:
    def change(obj: dict[str, Any]) -> None:
        obj["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = name
        for _, template in pod_templates(manifest_object(obj)):
            template["spec"]["priorityClassName"] = name  # type: ignore[index]

    return change


def tolerating(obj: dict[str, Any]) -> None:
    for _, template in pod_templates(manifest_object(obj)):
        template["spec"]["tolerations"] = [{"key": "google.com/tpu", "operator": "Exists", "effect": "NoSchedule"}]  # type: ignore[index]


def workload_of(kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    """A Deployment-like object (or CronJob) running ``spec`` as its pods. Their pods must restart Always (a CronJob's
    must not): the real API server refuses anything else before any admission policy sees it (found by make e2e)."""
    spec = {**spec, "restartPolicy": "Never" if kind == "CronJob" else "Always"}
    template = {"metadata": {"labels": {"app": "x"}}, "spec": spec}
    body: dict[str, Any] = {"selector": {"matchLabels": {"app": "x"}}, "template": template}
    if kind == "StatefulSet":
        body["serviceName"] = "x"
    if kind == "DaemonSet":
        body.pop("selector")
        body = {"selector": {"matchLabels": {"app": "x"}}, "template": template}
    if kind == "CronJob":
        body = {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": template}}}
    group = "batch/v1" if kind == "CronJob" else "apps/v1"
    return {"apiVersion": group, "kind": kind, "metadata": metadata("sidecar"), "spec": body}


TPU_POD_SPEC = pod_spec("2x2", "4")
CPU_TOLERATING_TPU = {
    **CPU_POD,
    "tolerations": [{"key": "google.com/tpu", "operator": "Exists", "effect": "NoSchedule"}],
}
CPU_TOLERATING_ALL = {**CPU_POD, "tolerations": [{"operator": "Exists"}]}
CPU_ON_A_NODE = {**CPU_POD, "nodeName": "gke-tpu-prod-resv-4x4-0-abcd"}

# What a member of one team with namespace-level rights would try, to get more TPU than entitled or to avoid
# being evicted. Each must be refused by every front end, for the rule named.
ATTACKS: list[tuple[str, dict[str, Any], set[str]]] = [
    ("attack-tier-above-entitlement", edit(jobset(), in_team_b), {"tpu-workload-tier-entitled"}),
    (
        "attack-tier-above-entitlement-on-pods-only",
        edit(
            jobset(),
            lambda o: (in_team_b(o), o["metadata"]["labels"].update({"kueue.x-k8s.io/priority-class": "training-low"})),
        ),
        {"tpu-workload-tier-entitled", "tpu-workload-priority-label-matches-pods"},
    ),
    ("good-team-b-within-entitlement", edit(jobset(), lambda o: (in_team_b(o), tier("training-low")(o))), set()),
    (
        "attack-protect-annotation",
        edit(jobset(), lambda o: o["metadata"]["annotations"].update({"hotswap.gke-tpu-priority.io/protect": "true"})),
        {"hotswap-protect-entitled"},
    ),
    (
        "attack-jobset-pinned-to-a-node",
        edit(jobset(), lambda o: js_pod(o).update(nodeName="n1")),
        {"tpu-workload-no-node-name"},
    ),
    (
        "attack-job-pinned-to-a-node",
        edit(job(), lambda o: o["spec"]["template"]["spec"].update(nodeName="n1")),
        {"tpu-workload-no-node-name"},
    ),
    *(
        (f"attack-{kind.lower()}-with-tpu-pods", workload_of(kind, TPU_POD_SPEC), {"tpu-only-through-kueue"})
        for kind in ("Deployment", "StatefulSet", "ReplicaSet", "DaemonSet", "CronJob")
    ),
    (
        "attack-deployment-tolerating-every-taint",
        workload_of("Deployment", CPU_TOLERATING_ALL),
        {"tpu-only-through-kueue"},
    ),
    ("attack-pod-on-a-named-node", {**pod(), "spec": CPU_ON_A_NODE}, {"tpu-only-through-kueue"}),
    ("attack-pod-tolerating-the-tpu-taint", {**pod(), "spec": CPU_TOLERATING_TPU}, {"tpu-only-through-kueue"}),
    ("good-cpu-deployment", workload_of("Deployment", CPU_POD), set()),
    ("good-cpu-pod", {**pod(), "spec": CPU_POD}, set()),
    (
        "attack-cpu-jobset-tolerating-tpu",
        edit(
            jobset(),
            lambda o: js_job(o)["template"].update(spec={**CPU_TOLERATING_TPU, "priorityClassName": "training-high"}),
        ),
        {"tpu-workload-fits-v6e-shape"},
    ),
]


# (id, object, rules it breaks)
def affinity(*terms: list[dict[str, Any]]) -> Callable[[dict[str, Any]], Any]:
    """Every pod template gets a required node affinity with these terms (each a list of matchExpressions)."""

    def change(obj: dict[str, Any]) -> None:
        required = {"nodeSelectorTerms": [{"matchExpressions": t} for t in terms]}
        for _, template in pod_templates(manifest_object(obj)):
            template["spec"]["affinity"] = {
                "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}
            }  # type: ignore[index]

    return change


NOT_SPOT = [{"key": "gke-tpu-priority.io/capacity", "operator": "NotIn", "values": ["spot"]}]
ONLY_RESERVATION = [{"key": "gke-tpu-priority.io/capacity", "operator": "In", "values": ["reservation"]}]
ZONE = [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east5-b"]}]
OFF_SPOT_CASES: list[tuple[str, dict[str, Any], set[str]]] = [
    ("off-spot-tier-on-any-capacity", edit(jobset(), tier(OFF_SPOT)), {"tpu-workload-off-spot"}),
    ("off-spot-tier-job-on-any-capacity", edit(job(), tier(OFF_SPOT)), {"tpu-workload-off-spot"}),
    ("good-off-spot-tier-excluding-spot", edit(edit(jobset(), tier(OFF_SPOT)), affinity(NOT_SPOT)), set()),
    ("good-off-spot-tier-only-reservation", edit(edit(job(), tier(OFF_SPOT)), affinity(ONLY_RESERVATION)), set()),
    (
        "good-off-spot-tier-pinned-by-selector",
        edit(
            edit(jobset(), tier(OFF_SPOT)),
            lambda o: js_pod(o)["nodeSelector"].update({"gke-tpu-priority.io/capacity": "reservation"}),
        ),
        set(),
    ),
    (
        "off-spot-tier-one-term-allows-spot",
        edit(edit(jobset(), tier(OFF_SPOT)), affinity(NOT_SPOT, ZONE)),
        {"tpu-workload-off-spot"},
    ),
    (
        "off-spot-tier-zone-affinity-only",
        edit(edit(jobset(), tier(OFF_SPOT)), affinity(ZONE)),
        {"tpu-workload-off-spot"},
    ),
    ("good-other-tier-on-any-capacity", edit(jobset(), tier("training-low")), set()),
]
CASES: list[tuple[str, dict[str, Any], set[str]]] = [
    *OFF_SPOT_CASES,
    ("good-jobset-4x4", jobset(), set()),
    ("good-jobset-quantity-string", jobset(chips="4"), set()),
    (
        "good-jobset-2x2-single-host-needs-no-exclusive",
        edit(jobset("2x2", 4, 1), lambda o: o["metadata"].pop("annotations")),
        set(),
    ),
    (
        "good-jobset-2x4-one-8-chip-vm",
        edit(jobset("2x4", 8, 1, "ct6e-standard-8t"), lambda o: o["metadata"].pop("annotations")),
        set(),
    ),
    ("good-jobset-2x4-two-vms", jobset("2x4", 4, 2, "ct6e-standard-4t"), set()),
    (
        "good-jobset-exclusive-on-replicated-job",
        edit(
            jobset(),
            lambda o: (
                o["metadata"].pop("annotations"),
                o["spec"]["replicatedJobs"][0]["template"].update(
                    metadata={
                        "annotations": {"alpha.jobset.sigs.k8s.io/exclusive-topology": "cloud.google.com/gke-nodepool"}
                    }
                ),
            ),
        ),
        set(),
    ),
    (
        "good-jobset-with-cpu-coordinator",
        edit(
            jobset(),
            lambda o: o["spec"]["replicatedJobs"].append(
                {
                    "name": "coord",
                    "replicas": 1,
                    "template": {"spec": {"template": {"spec": {**CPU_POD, "priorityClassName": "training-high"}}}},
                }
            ),
        ),
        set(),
    ),
    ("good-job-2x2", job(), set()),
    ("good-job-4x4", job("4x4", "4", 4), set()),
    ("bare-pod-with-queue-label", pod(), {"tpu-only-through-kueue"}),
    ("skipped-cpu-jobset", edit(jobset(), lambda o: js_job(o)["template"].update(spec=CPU_POD)), set()),
    # ownerReferences are written by whoever creates the object: claiming a controller owner exempts nothing.
    (
        "job-claiming-a-jobset-owner",
        edit(job("4x4", "4", 4), owned_by("JobSet")),
        {"tpu-workload-require-queue-name", "tpu-workload-priority-label-matches-pods"},
    ),
    ("pod-claiming-a-job-owner", edit(pod("4x4", "4"), owned_by("Job")), {"tpu-only-through-kueue"}),
    (
        "no-queue",
        edit(jobset(), lambda o: o["metadata"]["labels"].pop("kueue.x-k8s.io/queue-name")),
        {"tpu-workload-require-queue-name"},
    ),
    (
        "queue-not-declared",
        edit(jobset(), lambda o: o["metadata"]["labels"].update({"kueue.x-k8s.io/queue-name": "gpu"})),
        {"tpu-workload-queue-declared"},
    ),
    (
        "tier-not-declared",
        edit(
            jobset(),
            lambda o: (
                o["metadata"]["labels"].update({"kueue.x-k8s.io/priority-class": "urgent"}),
                js_pod(o).update(priorityClassName="urgent"),
            ),
        ),
        {"tpu-workload-priority-tier-declared"},
    ),
    (
        "label-disagrees-with-pods",
        edit(jobset(), lambda o: o["metadata"]["labels"].update({"kueue.x-k8s.io/priority-class": "training-low"})),
        {"tpu-workload-priority-label-matches-pods"},
    ),
    (
        "no-priority-label",
        edit(job(), lambda o: o["metadata"]["labels"].pop("kueue.x-k8s.io/priority-class")),
        {"tpu-workload-priority-label-matches-pods"},
    ),
    (
        "pods-without-priority",
        edit(job(), lambda o: o["spec"]["template"]["spec"].pop("priorityClassName")),
        {"tpu-workload-priority-label-matches-pods"},
    ),
    (
        "multi-host-without-exclusive",
        edit(jobset(), lambda o: o["metadata"].pop("annotations")),
        {"jobset-v1alpha2-tpu-multi-host-exclusive-topology"},
    ),
    (
        "2x4-two-vms-without-exclusive",
        edit(jobset("2x4", 4, 2, "ct6e-standard-4t"), lambda o: o["metadata"].pop("annotations")),
        {"jobset-v1alpha2-tpu-multi-host-exclusive-topology"},
    ),
    (
        "exclusive-on-the-wrong-label",
        edit(
            jobset(),
            lambda o: o["metadata"]["annotations"].update(
                {"alpha.jobset.sigs.k8s.io/exclusive-topology": "kubernetes.io/hostname"}
            ),
        ),
        {"jobset-v1alpha2-tpu-multi-host-exclusive-topology"},
    ),
    ("chips-not-one-vm", jobset(chips=8), {"tpu-workload-fits-v6e-shape"}),
    ("chips-not-a-whole-number", jobset(chips="4500m"), {"tpu-workload-fits-v6e-shape"}),
    # The server writes 4000m as 4 before admission (the real API server and JobSet's webhook, seen in make e2e).
    ("good-jobset-chips-in-milli-units", jobset(chips="4000m"), set()),
    ("machine-type-does-not-fit", jobset("2x4", 4, 2, "ct6e-standard-8t"), {"tpu-workload-fits-v6e-shape"}),
    ("not-a-v6e-topology", jobset("3x3"), {"tpu-workload-fits-v6e-shape"}),
    ("2x4-without-instance-type", jobset("2x4", 4, 2), {"tpu-workload-fits-v6e-shape"}),
    (
        "no-accelerator-selector",
        edit(job(), lambda o: o["spec"]["template"]["spec"].pop("nodeSelector")),
        {"tpu-workload-fits-v6e-shape"},
    ),
    ("parallelism-not-vms", edit(jobset(), lambda o: js_job(o).update(parallelism=2)), {"tpu-workload-fits-v6e-shape"}),
    (
        "completions-unset-on-multi-host",
        edit(job("4x4", "4", 4), lambda o: o["spec"].pop("completions")),
        {"tpu-workload-fits-v6e-shape"},
    ),
    ("job-asks-too-many-chips", job("2x2", "8"), {"tpu-workload-fits-v6e-shape"}),
    (
        "high-jobset-without-failure-policy",
        edit(jobset(), lambda o: o["spec"].pop("failurePolicy")),
        {"jobset-v1alpha2-tpu-hotswap-restartable"},
    ),
    (
        "high-jobset-max-restarts-0",
        edit(jobset(), lambda o: o["spec"]["failurePolicy"].update(maxRestarts=0)),
        {"jobset-v1alpha2-tpu-hotswap-restartable"},
    ),
    (
        "high-jobset-max-restarts-unset-counting-rules-only",
        edit(
            jobset(),
            lambda o: o["spec"].update(
                failurePolicy={
                    "rules": [{"name": "app", "action": "FailJobSet", "onJobFailureReasons": ["BackoffLimitExceeded"]}]
                }
            ),
        ),
        {"jobset-v1alpha2-tpu-hotswap-restartable"},
    ),
    (
        "good-high-jobset-max-restarts-0-infra-uncounted",
        edit(
            jobset(),
            lambda o: o["spec"].update(
                failurePolicy={
                    "maxRestarts": 0,
                    "rules": [
                        {
                            "name": "infra",
                            "action": "RestartJobSetAndIgnoreMaxRestarts",
                            "onJobFailureReasons": ["PodFailurePolicy"],
                        }
                    ],
                }
            ),
        ),
        set(),
    ),
    (
        "good-low-jobset-max-restarts-0-is-not-protected",
        edit(
            jobset(),
            lambda o: (
                o["spec"].pop("failurePolicy"),
                o["metadata"]["labels"].update({"kueue.x-k8s.io/priority-class": "training-low"}),
                js_pod(o).update(priorityClassName="training-low"),
            ),
        ),
        set(),
    ),
    *ATTACKS,
    (
        "everything-wrong",
        edit(jobset(chips=2), lambda o: (o["metadata"].update(labels={}), o["metadata"].pop("annotations"))),
        {
            "tpu-workload-require-queue-name",
            "tpu-workload-priority-label-matches-pods",
            "jobset-v1alpha2-tpu-multi-host-exclusive-topology",
            "tpu-workload-fits-v6e-shape",
        },
    ),
]


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
    """Valid but for the rules they break: the schema, and JobSet's own webhook (a JobSet it refuses would never
    reach the policy on a real server; `make e2e` found one, a failure-policy reason JobSet does not know)."""
    for _, obj, _ in CASES:
        if obj["kind"] == "JobSet":
            assert_valid(obj)
            assert [p for p in jobset_webhook_problems(obj) if "failurePolicy" in p.path] == []
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
