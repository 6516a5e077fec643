"""The object a ValidatingAdmissionPolicy sees: what the API server and the mutating admission in front of it
make of what a user submitted, for the kinds the TPU policies check.

Why it stays beside `make e2e`: the offline admission table needs the object as the server sees it.

The server validates after defaulting and after every mutating webhook, so a verdict computed on the submitted
object can differ from the real one. Restated, each from the function it mirrors:

- JobSet: the CRD's structural defaults (``tests.support.crd_validation``), then JobSet v0.12.0
  ``pkg/webhooks/jobset_webhook.go`` ``jobSetWebhook.Default``, then Kueue v0.19.2's ``JobSetWebhook.Default``:
  ``pkg/controller/jobframework/defaults.go`` ``ApplyDefaultLocalQueue`` (no queue label, and the namespace has a
  LocalQueue ``default``: the label is set to it) and ``ApplyDefaultForSuspend`` (a queued JobSet is suspended).
- Job: Kubernetes ``pkg/apis/batch/v1/defaults.go`` ``SetDefaults_Job`` and the pod template's
  ``pkg/apis/core/v1/defaults.go`` ``SetDefaults_PodSpec``, then Kueue's queue and suspend defaults.
- Pod: ``SetDefaults_Pod`` (requests copied from limits), ``SetDefaults_PodSpec``, ``SetDefaults_Container``
  and the ``Priority`` admission plugin (``plugin/pkg/admission/priority/admission.go``: a pod naming no class
  gets the global default's, and ``spec.priority`` from the class value).

Fields no TPU rule reads (probes, volumes, ports) are not defaulted.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from gke_tpu_priority.policies.rules.base import parse_quantity
from tests.support.crd_validation import _apply_defaults, default_catalog

QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
DEFAULT_LOCAL_QUEUE = "default"  # constants.DefaultLocalQueueName
JOB_DEFAULT_BACKOFF_LIMIT = 6
JOBSET_RULE_NAME = "failurePolicyRule{}"  # defaultRuleNameFmt
MAX_INT32 = 2**31 - 1


def server_view(
    obj: Mapping[str, Any],
    *,
    priority_classes: Sequence[Mapping[str, Any]] = (),
    local_queues: Mapping[str, Sequence[str]] | None = None,
) -> dict[str, Any]:
    """``obj`` as the admission policy receives it, in a cluster with these PriorityClasses and LocalQueues
    (namespace -> names)."""
    out = copy.deepcopy(dict(obj))
    kind = out.get("kind")
    if kind in ("JobSet", "Job"):
        namespace = str(out.get("metadata", {}).get("namespace", ""))
        if DEFAULT_LOCAL_QUEUE in (local_queues or {}).get(namespace, ()):
            _default_local_queue(out)
    if kind == "JobSet":
        _default_jobset(out)
    elif kind == "Job":
        _default_job(out)
    elif kind == "Pod":
        _default_pod(out, priority_classes)
    return out


def _default_local_queue(obj: dict[str, Any]) -> None:
    if _queued(obj) or any(ref.get("controller") for ref in obj.get("metadata", {}).get("ownerReferences", [])):
        return
    obj.setdefault("metadata", {}).setdefault("labels", {})[QUEUE_NAME_LABEL] = DEFAULT_LOCAL_QUEUE


def _queued(obj: Mapping[str, Any]) -> bool:
    return bool(obj.get("metadata", {}).get("labels", {}).get(QUEUE_NAME_LABEL))


def _suspend_if_queued(spec: dict[str, Any], obj: Mapping[str, Any]) -> None:
    # ApplyDefaultForSuspend: a job Kueue manages starts suspended until its Workload is admitted.
    if _queued(obj):
        spec["suspend"] = True


def _default_jobset(jobset: dict[str, Any]) -> None:
    crd = default_catalog().lookup(str(jobset["apiVersion"]), "JobSet")
    _apply_defaults(jobset, crd.schema)
    spec = jobset.setdefault("spec", {})
    spec.setdefault("successPolicy", {"operator": "All"})
    spec.setdefault("startupPolicy", {"startupPolicyOrder": "AnyOrder"})
    for replicated in spec.get("replicatedJobs", []):
        job = replicated.setdefault("template", {}).setdefault("spec", {})
        job.setdefault("completionMode", "Indexed")
        pod = job.setdefault("template", {}).setdefault("spec", {})
        _canonical_quantities(pod)
        if not pod.get("restartPolicy"):
            pod["restartPolicy"] = "OnFailure"
    network = spec.setdefault("network", {})
    network.setdefault("enableDNSHostnames", True)
    network.setdefault("publishNotReadyAddresses", True)
    for index, rule in enumerate((spec.get("failurePolicy") or {}).get("rules", [])):
        if not rule.get("name"):
            rule["name"] = JOBSET_RULE_NAME.format(index)
    _suspend_if_queued(spec, jobset)


def _default_job(job: dict[str, Any]) -> None:
    spec = job.setdefault("spec", {})
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
        spec["parallelism"] = 1
    spec.setdefault("parallelism", 1)
    if spec.get("backoffLimit") is None:
        spec["backoffLimit"] = MAX_INT32 if spec.get("backoffLimitPerIndex") is not None else JOB_DEFAULT_BACKOFF_LIMIT
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    spec.setdefault("podReplacementPolicy", "Failed" if spec.get("podFailurePolicy") else "TerminatingOrFailed")
    template = spec.setdefault("template", {}).setdefault("spec", {})
    _default_pod_spec(template)
    _suspend_if_queued(spec, job)


def _canonical_quantities(spec: dict[str, Any]) -> None:
    """Resource quantities as the server writes them before admission: a built-in object is decoded into Go types
    and a JobSet makes the same round trip through JobSet's mutating webhook, so `4000m` arrives as `4` (found by
    the real API server in `make e2e`; only whole values are rewritten here, the ones the policy's chip count
    reads)."""
    for container in [*spec.get("initContainers", []), *spec.get("containers", [])]:
        for part in ("limits", "requests"):
            values = container.get("resources", {}).get(part)
            for name, value in (values or {}).items():
                try:
                    number = parse_quantity(value)
                except ValueError:
                    continue
                if number == number.to_integral_value():
                    values[name] = str(int(number))


def _default_pod_spec(spec: dict[str, Any]) -> None:
    _canonical_quantities(spec)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("enableServiceLinks", True)
    for container in [*spec.get("initContainers", []), *spec.get("containers", [])]:
        container.setdefault("terminationMessagePath", "/dev/termination-log")
        container.setdefault("terminationMessagePolicy", "File")
        image = str(container.get("image", ""))
        latest = ":" not in image.rsplit("/", 1)[-1] or image.endswith(":latest")
        container.setdefault("imagePullPolicy", "Always" if latest and "@" not in image else "IfNotPresent")


def _requests_from_limits(container: dict[str, Any]) -> None:
    resources = container.get("resources") or {}
    limits = resources.get("limits") or {}
    if not limits:
        return
    requests = resources.setdefault("requests", {})
    for name, quantity in limits.items():
        requests.setdefault(name, quantity)
    container["resources"] = resources


def _default_pod(pod: dict[str, Any], priority_classes: Sequence[Mapping[str, Any]]) -> None:
    spec = pod.setdefault("spec", {})
    for container in [*spec.get("initContainers", []), *spec.get("containers", [])]:
        _requests_from_limits(container)
    _default_pod_spec(spec)
    classes = {str(c["metadata"]["name"]): c for c in priority_classes}
    if not spec.get("priorityClassName"):
        default = next((c for c in priority_classes if c.get("globalDefault")), None)
        if default is not None:
            spec["priorityClassName"] = default["metadata"]["name"]
    chosen = classes.get(str(spec.get("priorityClassName", "")))
    if chosen is not None:
        spec["priority"] = int(chosen["value"])
        spec.setdefault("preemptionPolicy", chosen.get("preemptionPolicy", "PreemptLowerPriority"))
