"""The admission case table: the platform objects of one cluster, its admission policy and bindings, and good and
bad TPU workloads, each with the in-cluster rules it breaks. The offline three-front-ends test and the e2e
admission cases judge the same table (the first with the pack, the CLI and the policy's CEL offline, the second with
the real API server)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from gke_tpu_priority.policies import rules
from gke_tpu_priority.policies.admission import (
    AdmissionSettings,
    validating_admission_policies,
    validating_admission_policy_bindings,
)
from gke_tpu_priority.policies.rules.base import AdmissionContext, manifest_object, pod_templates
from gke_tpu_priority.policies.rules.spot_tiers import ALLOW_SPOT_ANNOTATION
from gke_tpu_priority.policies.rules.tenancy import ALLOWED_TIERS_ANNOTATION, MAY_PROTECT_ANNOTATION

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
    spec: dict[str, Any] = obj["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    return spec


def js_job(obj: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = obj["spec"]["replicatedJobs"][0]["template"]["spec"]
    return spec


def owned_by(kind: str) -> Callable[[dict[str, Any]], Any]:
    def change(obj: dict[str, Any]) -> None:
        obj["metadata"] = {"name": "llm-slice-0", "namespace": NAMESPACE}  # what a controller copies: no labels
        obj["metadata"]["ownerReferences"] = [
            {"apiVersion": "v1", "kind": kind, "name": "owner", "uid": "0000", "controller": True}
        ]

    return change


CPU_POD = {"containers": [{"name": "c", "image": "c:1", "resources": {"limits": {"cpu": "1"}}}]}


def in_team_b(obj: dict[str, Any]) -> dict[str, Any]:
    obj["metadata"]["namespace"] = "team-b"
    return obj


def tier(name: str) -> Callable[[dict[str, Any]], Any]:
    def change(obj: dict[str, Any]) -> None:
        obj["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = name
        for _, template in pod_templates(manifest_object(obj)):
            template["spec"]["priorityClassName"] = name

    return change


def tolerating(obj: dict[str, Any]) -> None:
    for _, template in pod_templates(manifest_object(obj)):
        template["spec"]["tolerations"] = [{"key": "google.com/tpu", "operator": "Exists", "effect": "NoSchedule"}]


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
            }

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


def big_jobset(good: bool = True) -> dict[str, Any]:
    """The largest JobSet the admission cost must still judge: 16 replicated Jobs of 8 containers with 100 env
    variables each, 20 labels and annotations; `good=False` breaks two rules in its last Job."""
    obj = jobset("4x4", 4, 4)
    obj["metadata"]["labels"].update({f"team.example.com/l{i}": f"value-{i}" for i in range(20)})
    obj["metadata"]["annotations"].update({f"example.com/a{i}": "x" * 40 for i in range(20)})
    base = obj["spec"]["replicatedJobs"][0]
    jobs = []
    for j in range(16):
        rj = copy.deepcopy(base)
        rj["name"] = f"slice-{j}"
        spec = rj["template"]["spec"]["template"]["spec"]
        trainer = spec["containers"][0]
        containers = []
        for c in range(8):
            cont = copy.deepcopy(trainer)
            cont["name"] = f"c{c}"
            cont["env"] = [{"name": f"ENV_{i}", "value": f"value-{j}-{c}-{i}"} for i in range(100)]
            if c:
                cont["resources"] = {"limits": {"cpu": "1"}, "requests": {"cpu": "1"}}
            containers.append(cont)
        spec["containers"] = containers
        if not good and j == 15:
            spec["priorityClassName"] = "nope"
            spec["nodeSelector"]["cloud.google.com/gke-tpu-topology"] = "9x9"
        jobs.append(rj)
    obj["spec"]["replicatedJobs"] = jobs
    return obj
