"""A correct TPU v6e JobSet for a slice shape: exclusive slices, Kueue queue and priority, infra-tolerant restarts."""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field, field_validator, model_validator

from gke_tpu_priority.components import tpu_shapes
from gke_tpu_priority.components.config.base import ConfigModel, problems_error
from gke_tpu_priority.components.config.priorities import NAME_PATTERN
from gke_tpu_priority.components.config.tpu import CAPACITY_LABEL, CapacityMode

JOBSET_API = "jobset.x-k8s.io/v1alpha2"
EXCLUSIVE_TOPOLOGY = "alpha.jobset.sigs.k8s.io/exclusive-topology"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
HOTSWAP_DOMAIN = "hotswap.gke-tpu-priority.io"
FAST_FAIL_ANNOTATION = f"{HOTSWAP_DOMAIN}/fast-fail"
PROTECT_ANNOTATION = f"{HOTSWAP_DOMAIN}/protect"
# JobSet's webhook (validateFailurePolicy) wants rule names matching ^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$:
# no hyphens, although the CRD schema does not say so.
INFRA_RULE = "restartOnInfrastructureDisruption"
REPLICATED_JOB = "slice"
DOWNWARD_ENV = (
    ("JOBSET_NAME", "metadata.labels['jobset.sigs.k8s.io/jobset-name']"),
    ("POD_NAMESPACE", "metadata.namespace"),
)
# JobSet names its child Jobs and pods from the JobSet name, and its webhook refuses a JobSet whose longest
# generated pod name (plus the 5-character random suffix the Job controller appends) is not a DNS-1035 label.
DNS1035_LABEL_PATTERN = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"
DNS1035_LABEL_MAX = 63
POD_SUFFIX_PLACEHOLDER = "-abcde"
SPOT_NODE_LABELS = ((CAPACITY_LABEL, CapacityMode.SPOT.value), ("cloud.google.com/gke-spot", "true"))


def not_on_spot_affinity() -> dict[str, Any]:
    """A pod affinity that keeps pods off spot nodes (a new object each call: callers edit what they get).

    Kueue's flavor assigner matches a pod set's required node affinity against each flavor's nodeLabels (on the keys
    the ClusterQueue's flavors use), so one term excluding both spot labels rules out a spot flavor however it is
    labelled. NotIn also matches nodes without the label: reservation, on-demand and flex-start pools.
    """
    expressions = [{"key": k, "operator": "NotIn", "values": [v]} for k, v in SPOT_NODE_LABELS]
    required = {"nodeSelectorTerms": [{"matchExpressions": expressions}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}


def generated_job_name(jobset: str, replicated_job: str, job_index: int) -> str:
    """Child Job name, as JobSet's placement.GenJobName builds it."""
    return f"{jobset}-{replicated_job}-{job_index}"


def longest_generated_pod_name(jobset: str, replicated_job: str, replicas: int, completions: int) -> str:
    """The longest pod name JobSet's webhook checks: placement.GenPodName of the last Job and index, plus suffix."""
    return f"{generated_job_name(jobset, replicated_job, replicas - 1)}-{completions - 1}{POD_SUFFIX_PLACEHOLDER}"


class TpuJobSetSpec(ConfigModel):
    name: str = Field(
        max_length=DNS1035_LABEL_MAX,
        description="JobSet name: a DNS-1035 label short enough that every generated pod name fits 63 characters.",
    )
    namespace: str = Field(pattern=NAME_PATTERN, max_length=63, description="Namespace (holds the LocalQueue).")
    queue: str = Field(
        pattern=NAME_PATTERN, max_length=63, description="LocalQueue to submit to (`kueue.x-k8s.io/queue-name`)."
    )
    priority: str = Field(
        pattern=NAME_PATTERN, max_length=63, description="Priority tier: PriorityClass and WorkloadPriorityClass."
    )
    topology: str = Field(description=f"v6e slice topology: {', '.join(tpu_shapes.TOPOLOGIES)}.")
    machine_type: str | None = Field(default=None, description="Machine type; required for 2x4.")
    slices: int = Field(default=1, ge=1, le=256, description="Slices (one child Job per slice).")
    image: str = Field(min_length=1, description="Container image of the training program.")
    command: list[str] = Field(default_factory=list, description="Container command.")
    args: list[str] = Field(default_factory=list, description="Container arguments.")
    env: dict[str, str] = Field(
        default_factory=dict,
        description="Environment variables. JOBSET_NAME and POD_NAMESPACE are set from the downward API unless given "
        "here (`kubectl-hotswap mark-checkpoint` reads them).",
    )
    max_restarts: int = Field(
        default=3, ge=1, le=100, description="JobSet restarts for application failures (infra ones don't count)."
    )
    termination_grace_seconds: int = Field(
        default=30, ge=0, le=3600, description="Pod termination grace; bounds how fast a held victim frees slices."
    )
    fast_fail: bool = Field(
        default=False,
        description="Opt in to the reconciler failing this JobSet's pods stuck on unreachable nodes at once.",
    )
    protect: bool = Field(default=False, description="Never choose this JobSet as a hotswap victim.")
    allow_spot: bool = Field(
        default=True,
        description="False keeps the JobSet off spot capacity: a required node affinity excludes spot nodes "
        '(`gke-tpu-priority.io/capacity: spot`, GKE\'s `cloud.google.com/gke-spot: "true"`), so Kueue never assigns '
        "it a spot flavor and takes the next rung of the ladder instead. For long top-tier runs, which lose their "
        "progress since the last checkpoint each time GCP reclaims a spot VM.",
    )

    @field_validator("name")
    @classmethod
    def _dns1035(cls, value: str) -> str:
        if not re.fullmatch(DNS1035_LABEL_PATTERN, value):
            raise ValueError(
                f"{value!r} is not a DNS-1035 label: use lowercase letters, digits and '-', starting with a letter "
                "and ending with a letter or digit (JobSet names its child Jobs and Service after it)"
            )
        return value

    @model_validator(mode="after")
    def _shape(self) -> TpuJobSetSpec:
        try:
            tpu_shapes.resolve_shape(self.topology, self.machine_type)
        except ValueError as exc:
            raise problems_error([f".topology: {exc}"]) from None
        longest = longest_generated_pod_name(self.name, REPLICATED_JOB, self.slices, self.shape.vms)
        if len(longest) > DNS1035_LABEL_MAX:
            allowed = len(self.name) - (len(longest) - DNS1035_LABEL_MAX)
            raise problems_error(
                [
                    f".name: {self.name!r} ({len(self.name)} characters) gives pod names of {len(longest)} characters "
                    f"(e.g. {longest!r}) for {self.slices} slice(s) of {self.topology}; the JobSet webhook allows at "
                    f"most {DNS1035_LABEL_MAX}: use a name of at most {allowed} characters or fewer slices"
                ]
            )
        return self

    @property
    def shape(self) -> tpu_shapes.SliceShape:
        return tpu_shapes.resolve_shape(self.topology, self.machine_type)


def exclusive_topology_key(shape: tpu_shapes.SliceShape) -> str:
    """The domain each child Job (one slice) gets to itself: its node pool for a multi-host slice, its VM otherwise.

    JobSet keeps every other exclusive Job out of the whole domain, and a pool of single-host slices holds many
    VMs: exclusive on the node pool there would let one slice of one JobSet block every other VM of the pool.
    """
    return tpu_shapes.NODEPOOL_LABEL if shape.multi_host else tpu_shapes.HOSTNAME_LABEL


def tpu_jobset(spec: TpuJobSetSpec) -> dict[str, Any]:
    """The JobSet object (jobset.x-k8s.io/v1alpha2) for `spec`."""
    shape = spec.shape
    node_selector = {
        tpu_shapes.ACCELERATOR_LABEL: tpu_shapes.ACCELERATOR,
        tpu_shapes.TOPOLOGY_LABEL: shape.topology,
    }
    if len(tpu_shapes.shapes_for(shape.topology)) > 1:
        node_selector["node.kubernetes.io/instance-type"] = shape.machine_type
    container: dict[str, Any] = {
        "name": "worker",
        "image": spec.image,
        "resources": {
            "requests": {tpu_shapes.TPU_RESOURCE: str(shape.chips_per_vm)},
            "limits": {tpu_shapes.TPU_RESOURCE: str(shape.chips_per_vm)},
        },
        "ports": [{"containerPort": 8471, "name": "tpu-ici"}, {"containerPort": 8080, "name": "mxla"}],
        "securityContext": {"allowPrivilegeEscalation": False},
    }
    if spec.command:
        container["command"] = list(spec.command)
    if spec.args:
        container["args"] = list(spec.args)
    env: list[dict[str, Any]] = [{"name": k, "value": v} for k, v in sorted(spec.env.items())]
    # What `kubectl-hotswap mark-checkpoint` reads to find the JobSet to annotate (see docs/operations.md).
    env += [
        {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}
        for name, path in DOWNWARD_ENV
        if name not in spec.env
    ]
    container["env"] = env
    annotations = {EXCLUSIVE_TOPOLOGY: exclusive_topology_key(shape)}
    if spec.fast_fail:
        annotations[FAST_FAIL_ANNOTATION] = "true"
    if spec.protect:
        annotations[PROTECT_ANNOTATION] = "true"
    pod_spec: dict[str, Any] = {
        "priorityClassName": spec.priority,
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": spec.termination_grace_seconds,
        "nodeSelector": node_selector,
        "tolerations": [{"key": tpu_shapes.TPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [container],
    }
    if not spec.allow_spot:
        pod_spec["affinity"] = not_on_spot_affinity()
    return {
        "apiVersion": JOBSET_API,
        "kind": "JobSet",
        "metadata": {
            "name": spec.name,
            "namespace": spec.namespace,
            "labels": {QUEUE_LABEL: spec.queue, PRIORITY_LABEL: spec.priority},
            # One slice per child Job, and no two JobSets' Jobs on one node pool (priority-scoped since v0.7).
            "annotations": annotations,
        },
        "spec": {
            "failurePolicy": {
                "maxRestarts": spec.max_restarts,
                # Wait for every old pod to go before recreating, so a slice is never shared by two attempts.
                "restartStrategy": "BlockingRecreate",
                "rules": [
                    {
                        # Jobs failed by the pod failure policy below lost their node, not their program:
                        # restart without burning the application's restart budget.
                        "name": INFRA_RULE,
                        "action": "RestartJobSetAndIgnoreMaxRestarts",
                        "onJobFailureReasons": ["PodFailurePolicy"],
                    }
                ],
            },
            "replicatedJobs": [
                {
                    "name": REPLICATED_JOB,
                    "replicas": spec.slices,
                    "template": {
                        "spec": {
                            "parallelism": shape.vms,
                            "completions": shape.vms,
                            "completionMode": "Indexed",
                            "backoffLimit": 0,
                            "podFailurePolicy": {
                                "rules": [
                                    {
                                        "action": "FailJob",
                                        "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
                                    }
                                ]
                            },
                            "template": {"spec": pod_spec},
                        }
                    },
                }
            ],
        },
    }
