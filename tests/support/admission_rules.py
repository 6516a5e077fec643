"""Offline mirror of the admission webhooks the package's objects meet: the rules a CRD schema does not state.

kube-apiserver accepts a custom resource only after the CRD schema *and* every validating webhook agree. The
schema half is tests/support/crd_validation.py; this module is the webhook half, for the pinned releases:

* JobSet v0.12.0 ``pkg/webhooks/jobset_webhook.go`` (``jobSetWebhook.ValidateCreate``/``ValidateUpdate``,
  ``validateFailurePolicy``), with JobSet's default feature gates (InPlaceRestart, RestartJob, ElasticJobSet
  all off, ``pkg/features/features.go``).
* Kueue v0.19.2's JobSet integration webhook (``pkg/controller/jobs/jobset/jobset_webhook.go``) and the checks it
  delegates to (``pkg/controller/jobframework/validation.go``).
* Kueue v0.19.2 ``pkg/webhooks``: ClusterQueue, Cohort and ResourceFlavor validators, and the Workload update
  rule the reconciler's writes meet. LocalQueue has a webhook
  with no validator, and WorkloadPriorityClass, Topology, AdmissionCheck and ProvisioningRequestConfig have none
  (``pkg/webhooks/webhooks.go``). For AdmissionCheck the ProvisioningRequest controller's parameters check
  (``pkg/util/admissioncheck/admissioncheck.go`` ``refValidForGK``) is mirrored instead: it does not refuse the
  object, but leaves the check inactive, so nothing is admitted through it.
* Kueue v0.19.2 MultiKueue, which has no webhook either (MultiKueueCluster, MultiKueueConfig): the controllers'
  checks that leave a check, cluster or ClusterQueue inactive are mirrored instead --
  ``pkg/controller/admissionchecks/multikueue`` (ACReconciler.Reconcile, clustersReconciler.loadClientConfig,
  getKubeConfigFromSecret, validateKubeconfig/validateRestConfig) and the scheduler cache's MultiKueue
  constraints on a ClusterQueue (``pkg/cache/scheduler/clusterqueue.go`` updateWithAdmissionChecks). The
  cross-object ones run over one manager cluster's objects: :func:`multikueue_problems`.

Each check names the upstream function it mirrors in ``Problem.rule``. Rules that depend on cluster state
(existing PVCs, default LocalQueues) or on feature gates the platform does not enable are out of scope; they are
listed in :data:`NOT_MIRRORED` so the omission is explicit.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

import yaml

from gke_tpu_priority.policies.rules.base import parse_quantity as base_parse_quantity
from tests.support.crd_validation import (
    dns1123_label_problem,
    dns1123_subdomain_problem,
    label_value_problem,
    qualified_name_problem,
)

JOBSET_WEBHOOK = "jobset v0.12.0 pkg/webhooks/jobset_webhook.go"
KUEUE_JOBFRAMEWORK = "kueue v0.19.2 pkg/controller/jobframework/validation.go"
KUEUE_WEBHOOKS = "kueue v0.19.2 pkg/webhooks"

MAX_INT32 = 2**31 - 1
DNS1035_MAX = 63

# jobset_webhook.go: ruleNameFmt, minRuleNameLength, maxRuleNameLength, validOnJobFailureReasons,
# maxReplicasPerReplicatedJob. (tests/test_admission_rules.py checks these against the locked source.)
FAILURE_RULE_NAME = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
FAILURE_RULE_NAME_LENGTH = (1, 128)
JOB_FAILURE_REASONS = (
    "BackoffLimitExceeded",
    "DeadlineExceeded",
    "FailedIndexes",
    "MaxFailedIndexesExceeded",
    "PodFailurePolicy",
)
RESTART_JOB_ACTIONS = ("RestartJob", "RestartJobAndIgnoreMaxRestarts")
# The webhook appends this to the deterministic pod name to stand for the Job controller's random suffix.
POD_NAME_SUFFIX = "-abcde"

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
PREBUILT_WORKLOAD_LABEL = "kueue.x-k8s.io/prebuilt-workload-name"
MAX_EXEC_TIME_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"

NOT_MIRRORED = (
    "jobset validateVolumeClaimPolicies: reads existing PVCs (the package emits no volumeClaimPolicies)",
    "jobset validateCoordinator/validateCoordinatorLabelValue (the package sets no coordinator)",
    "kueue ApplyDefaultLocalQueue/validateUpdateForQueueName default-queue branch: needs cluster state",
    "kueue validateTopologyRequest: only with TopologyAwareScheduling annotations, which the package does not emit",
    "kueue ValidateElasticJobAnnotation, AdmissionGatedBy: annotations the package does not emit",
)

_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


@dataclass(frozen=True)
class Problem:
    """One refusal the real webhook would return."""

    rule: str
    path: str
    detail: str

    def __str__(self) -> str:
        return f"{self.path}: {self.detail} [{self.rule}]"


def dns1035_label_problem(value: str) -> str | None:
    """k8s.io/apimachinery validation.IsDNS1035Label."""
    if len(value) > DNS1035_MAX:
        return f"must be no more than {DNS1035_MAX} characters"
    if not _DNS1035_LABEL.match(value):
        return (
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
            "alphabetic character, and end with an alphanumeric character"
        )
    return None


def gen_job_name(jobset: str, replicated_job: str, job_index: int) -> str:
    """jobset pkg/util/placement.GenJobName."""
    return f"{jobset}-{replicated_job}-{job_index}"


def gen_pod_name(jobset: str, replicated_job: str, job_index: str, pod_index: str) -> str:
    """jobset pkg/util/placement.GenPodName."""
    return f"{jobset}-{replicated_job}-{job_index}-{pod_index}"


# Kubernetes quantities (for Kueue's quota checks): one parser, the package's (policies.rules.base).
parse_quantity = base_parse_quantity


# --------------------------------------------------------------------------------------------------------
# JobSet (JobSet's own webhook, then Kueue's JobSet integration)


def _rjob_spec(rjob: Mapping[str, Any]) -> Mapping[str, Any]:
    return rjob.get("template", {}).get("spec", {}) or {}


def jobset_create_problems(js: Mapping[str, Any]) -> list[Problem]:
    """jobSetWebhook.ValidateCreate (JobSet v0.12.0, default feature gates)."""
    rule = f"{JOBSET_WEBHOOK} ValidateCreate"
    out: list[Problem] = []
    name = str(js.get("metadata", {}).get("name", ""))
    spec = js.get("spec", {}) or {}
    failure_policy = spec.get("failurePolicy")
    if failure_policy and failure_policy.get("restartStrategy") == "InPlaceRestart":
        out.append(Problem(rule, "spec.failurePolicy.restartStrategy", "InPlaceRestart needs a feature gate"))
    rjobs = spec.get("replicatedJobs") or []
    if rjobs and rjobs[0].get("dependsOn") is not None:
        out.append(Problem(rule, "spec.replicatedJobs[0].dependsOn", "DependsOn can't be set for the first job"))
    subdomain = (spec.get("network") or {}).get("subdomain")
    if subdomain:
        for check in (dns1123_subdomain_problem, dns1035_label_problem):
            if (detail := check(subdomain)) is not None:
                out.append(Problem(rule, "spec.network.subdomain", f"{subdomain!r}: {detail}"))
    managed_by = spec.get("managedBy")
    if managed_by is not None:
        prefix, slash, rest = str(managed_by).partition("/")
        if not slash or not rest or dns1123_subdomain_problem(prefix) or len(managed_by) > 63:
            out.append(Problem(rule, "spec.managedBy", f"{managed_by!r}: a domain-prefixed path of <= 63 chars"))
    seen: set[str] = set()
    for index, rjob in enumerate(rjobs):
        path = f"spec.replicatedJobs[{index}]"
        rname = str(rjob.get("name", ""))
        seen.add(rname)
        replicas = int(rjob.get("replicas", 1))
        job = _rjob_spec(rjob)
        if int(job.get("parallelism", 1)) * replicas > MAX_INT32:
            out.append(Problem(rule, path, f"replicas x parallelism exceeds {MAX_INT32}"))
        group = str(rjob.get("groupName", "default"))  # the CRD defaults groupName before webhooks run
        if (detail := dns1035_label_problem(group)) is not None:
            out.append(Problem(rule, f"{path}.groupName", f"{group!r}: {detail}"))
        longest_job = gen_job_name(name, rname, replicas - 1)
        if (detail := dns1035_label_problem(longest_job)) is not None:
            out.append(Problem(rule, f"{path}.name", f"generated Job name {longest_job!r}: {detail}"))
        if job.get("completionMode") == "Indexed" and job.get("completions") is not None:
            pod = gen_pod_name(name, rname, str(replicas - 1), str(int(job["completions"]) - 1)) + POD_NAME_SUFFIX
            if (detail := dns1035_label_problem(pod)) is not None:
                out.append(Problem(rule, f"{path}.name", f"generated pod name {pod!r}: {detail}"))
        for dep in rjob.get("dependsOn") or []:
            if dep.get("name") not in seen - {rname}:
                out.append(Problem(rule, f"{path}.dependsOn", f"cannot depend on {dep.get('name')!r}"))
    for target in (spec.get("successPolicy") or {}).get("targetReplicatedJobs") or []:
        if target not in seen:
            out.append(Problem(rule, "spec.successPolicy", f"targetReplicatedJobs names unknown job {target!r}"))
    if failure_policy:
        out += failure_policy_problems(failure_policy, rjobs)
    return out


def failure_policy_problems(policy: Mapping[str, Any], rjobs: list[Mapping[str, Any]]) -> list[Problem]:
    """validateFailurePolicy."""
    rule = f"{JOBSET_WEBHOOK} validateFailurePolicy"
    rules = policy.get("rules") or []
    if any(r.get("action") in RESTART_JOB_ACTIONS for r in rules):
        return [Problem(rule, "spec.failurePolicy.rules", "RestartJob actions need the RestartJob feature gate")]
    out: list[Problem] = []
    names = {str(r.get("name", "")) for r in rjobs}
    seen: dict[str, list[int]] = {}
    low, high = FAILURE_RULE_NAME_LENGTH
    for index, item in enumerate(rules):
        path = f"spec.failurePolicy.rules[{index}]"
        # The mutating webhook names unnamed rules failurePolicyRule<i> before validation.
        rule_name = str(item.get("name") or f"failurePolicyRule{index}")
        if not low <= len(rule_name) <= high:
            out.append(Problem(rule, f"{path}.name", f"length {len(rule_name)} is outside {low}..{high}"))
        seen.setdefault(rule_name, []).append(index)
        if not FAILURE_RULE_NAME.match(rule_name):
            out.append(
                Problem(
                    rule,
                    f"{path}.name",
                    f"{rule_name!r} must start with a letter, then letters, digits or '_,:', "
                    "and end with a letter, digit or '_'",
                )
            )
        for target in item.get("targetReplicatedJobs") or []:
            if target not in names:
                out.append(Problem(rule, f"{path}.targetReplicatedJobs", f"unknown replicatedJob {target!r}"))
        for reason in item.get("onJobFailureReasons") or []:
            if reason not in JOB_FAILURE_REASONS:
                out.append(Problem(rule, f"{path}.onJobFailureReasons", f"{reason!r} is not a Job failure reason"))
    for rule_name, indices in seen.items():
        if len(indices) > 1:
            out.append(Problem(rule, "spec.failurePolicy.rules", f"rules {indices} share the name {rule_name!r}"))
    return out


def _suspended(obj: Mapping[str, Any]) -> bool:
    return bool((obj.get("spec") or {}).get("suspend", False))


def jobset_update_problems(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Problem]:
    """jobSetWebhook.ValidateUpdate: replicatedJobs and managedBy are immutable, except the pod template's
    labels, annotations, nodeSelector, tolerations and schedulingGates while the JobSet is (being) suspended."""
    rule = f"{JOBSET_WEBHOOK} ValidateUpdate"
    out: list[Problem] = []
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    mutable = ("nodeSelector", "tolerations", "schedulingGates")

    def munged(rjobs: list[Mapping[str, Any]], masked: bool) -> list[Any]:
        result = []
        for rjob in rjobs:
            copy = _deep_copy(rjob)
            template = copy.get("template", {}).get("spec", {}).get("template")
            if masked and isinstance(template, dict):
                template.get("metadata", {}).pop("labels", None)
                template.get("metadata", {}).pop("annotations", None)
                for key in mutable:
                    template.get("spec", {}).pop(key, None)
            result.append(copy)
        return result

    masked = _suspended(old) or _suspended(new)
    if munged(new_spec.get("replicatedJobs") or [], masked) != munged(old_spec.get("replicatedJobs") or [], masked):
        out.append(Problem(rule, "spec.replicatedJobs", "field is immutable"))
    if new_spec.get("managedBy") != old_spec.get("managedBy"):
        out.append(Problem(rule, "spec.managedBy", "field is immutable"))
    return out


def _deep_copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _deep_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep_copy(v) for v in value]
    return value


def _labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return obj.get("metadata", {}).get("labels") or {}


def kueue_job_create_problems(job: Mapping[str, Any]) -> list[Problem]:
    """jobframework.ValidateJobOnCreate, as Kueue's JobSet webhook runs it."""
    out: list[Problem] = []
    labels = _labels(job)
    for label, function in (
        (QUEUE_LABEL, "ValidateQueueName"),
        (PREBUILT_WORKLOAD_LABEL, "ValidatePrebuiltWorkloadName"),
    ):
        if label in labels and (detail := dns1123_subdomain_problem(labels[label])) is not None:
            out.append(Problem(f"{KUEUE_JOBFRAMEWORK} {function}", f"metadata.labels[{label}]", detail))
    if MAX_EXEC_TIME_LABEL in labels:
        raw = labels[MAX_EXEC_TIME_LABEL]
        if not re.fullmatch(r"[+-]?[0-9]+", raw) or int(raw) <= 0:
            out.append(
                Problem(
                    f"{KUEUE_JOBFRAMEWORK} validateCreateForMaxExecTime",
                    f"metadata.labels[{MAX_EXEC_TIME_LABEL}]",
                    f"{raw!r} must be an integer > 0",
                )
            )
    return out


def kueue_job_update_problems(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Problem]:
    """jobframework.ValidateJobOnUpdate (then ValidateJobOnCreate on the new object)."""
    out: list[Problem] = []
    old_labels, new_labels = _labels(old), _labels(new)
    suspended = _suspended(new)
    if not suspended and old_labels.get(QUEUE_LABEL, "") != new_labels.get(QUEUE_LABEL, ""):
        out.append(
            Problem(f"{KUEUE_JOBFRAMEWORK} validateUpdateForQueueName", f"metadata.labels[{QUEUE_LABEL}]", "immutable")
        )
    old_wpc, new_wpc = old_labels.get(PRIORITY_CLASS_LABEL, ""), new_labels.get(PRIORITY_CLASS_LABEL, "")
    rule = f"{KUEUE_JOBFRAMEWORK} ValidateUpdateForWorkloadPriorityClassName"
    if not suspended and not old_wpc and new_wpc:
        out.append(Problem(rule, f"metadata.labels[{PRIORITY_CLASS_LABEL}]", "cannot be added to a running workload"))
    if old_wpc and not new_wpc:
        out.append(Problem(rule, f"metadata.labels[{PRIORITY_CLASS_LABEL}]", "cannot be removed from a workload"))
    if (not suspended or not _suspended(old)) and old_labels.get(MAX_EXEC_TIME_LABEL) != new_labels.get(
        MAX_EXEC_TIME_LABEL
    ):
        out.append(
            Problem(
                f"{KUEUE_JOBFRAMEWORK} validateUpdateForMaxExecTime",
                f"metadata.labels[{MAX_EXEC_TIME_LABEL}]",
                "immutable",
            )
        )
    return out + kueue_job_create_problems(new)


# --------------------------------------------------------------------------------------------------------
# Kueue queues and flavors


def _label_selector_problems(selector: Any, path: str, rule: str) -> list[Problem]:
    """apimachinery metav1validation.ValidateLabelSelector."""
    out: list[Problem] = []
    if selector is None:
        return out
    for key, value in (selector.get("matchLabels") or {}).items():
        if (detail := qualified_name_problem(key)) is not None:
            out.append(Problem(rule, f"{path}.matchLabels", detail))
        if (detail := label_value_problem(str(value))) is not None:
            out.append(Problem(rule, f"{path}.matchLabels[{key}]", detail))
    for index, expr in enumerate(selector.get("matchExpressions") or []):
        epath = f"{path}.matchExpressions[{index}]"
        operator, values = expr.get("operator"), expr.get("values") or []
        if operator in ("In", "NotIn") and not values:
            out.append(Problem(rule, f"{epath}.values", f"must be specified when operator is {operator}"))
        elif operator in ("Exists", "DoesNotExist") and values:
            out.append(Problem(rule, f"{epath}.values", f"may not be specified when operator is {operator}"))
        elif operator not in ("In", "NotIn", "Exists", "DoesNotExist"):
            out.append(Problem(rule, f"{epath}.operator", f"{operator!r} is not a valid selector operator"))
        if (detail := qualified_name_problem(str(expr.get("key", "")))) is not None:
            out.append(Problem(rule, f"{epath}.key", detail))
    return out


def _resource_groups_problems(groups: list[Mapping[str, Any]], *, has_parent: bool, is_cohort: bool) -> list[Problem]:
    """validateResourceGroups / validateFlavorQuotas / validateLimit / validateLendingLimit (webhooks/clusterqueue)."""
    rule = f"{KUEUE_WEBHOOKS}/clusterqueue_webhook.go validateResourceGroups"
    out: list[Problem] = []
    seen_resources: set[str] = set()
    seen_flavors: set[str] = set()
    for gi, group in enumerate(groups):
        gpath = f"spec.resourceGroups[{gi}]"
        covered = [str(r) for r in group.get("coveredResources") or []]
        for ri, resource in enumerate(covered):
            if (detail := qualified_name_problem(resource)) is not None:
                out.append(
                    Problem(
                        f"{KUEUE_WEBHOOKS}/common.go validateResourceName", f"{gpath}.coveredResources[{ri}]", detail
                    )
                )
            if resource in seen_resources:
                out.append(Problem(rule, f"{gpath}.coveredResources[{ri}]", f"duplicate {resource!r}"))
            seen_resources.add(resource)
        for fi, flavor in enumerate(group.get("flavors") or []):
            fpath = f"{gpath}.flavors[{fi}]"
            if flavor.get("name") in seen_flavors:
                out.append(Problem(rule, f"{fpath}.name", f"duplicate {flavor.get('name')!r}"))
            seen_flavors.add(str(flavor.get("name")))
            for qi, quota in enumerate((flavor.get("resources") or [])[: len(covered)]):
                qpath = f"{fpath}.resources[{qi}]"
                if quota.get("name") != covered[qi]:
                    out.append(Problem(rule, f"{qpath}.name", "must match the name in coveredResources"))
                out += _quantity_problems(quota.get("nominalQuota", 0), f"{qpath}.nominalQuota", rule)
                for limit in ("borrowingLimit", "lendingLimit"):
                    if quota.get(limit) is None:
                        continue
                    out += _quantity_problems(quota[limit], f"{qpath}.{limit}", rule)
                    if not has_parent:
                        parent = "parent" if is_cohort else "cohort"
                        out.append(Problem(rule, f"{qpath}.{limit}", f"must be nil when {parent} is empty"))
                if quota.get("lendingLimit") is not None and not is_cohort:
                    try:
                        if parse_quantity(quota["lendingLimit"]) > parse_quantity(quota.get("nominalQuota", 0)):
                            out.append(Problem(rule, f"{qpath}.lendingLimit", "must be <= the nominalQuota"))
                    except ValueError:
                        pass  # reported as a malformed quantity already
    return out


def _quantity_problems(value: Any, path: str, rule: str) -> list[Problem]:
    try:
        if parse_quantity(value) < 0:
            return [Problem(rule, path, "must be greater than or equal to 0")]
    except ValueError as exc:
        return [Problem(rule, path, str(exc))]
    return []


def _fair_sharing_problems(fair_sharing: Any, path: str) -> list[Problem]:
    """validateFairSharing (webhooks/common.go)."""
    rule = f"{KUEUE_WEBHOOKS}/common.go validateFairSharing"
    if not fair_sharing or fair_sharing.get("weight") is None:
        return []
    weight = parse_quantity(fair_sharing["weight"])
    if weight < 0:
        return [Problem(rule, path, "weight must be greater than or equal to 0")]
    if 0 < weight <= Decimal("1e-9"):
        return [Problem(rule, path, "When not 0, weight must be > 10e-9")]
    return []


def cluster_queue_problems(cq: Mapping[str, Any], old: Mapping[str, Any] | None = None) -> list[Problem]:
    """ClusterQueueWebhook.ValidateCreate/ValidateUpdate (validateClusterQueueSpec and friends)."""
    rule = f"{KUEUE_WEBHOOKS}/clusterqueue_webhook.go"
    spec = cq.get("spec") or {}
    groups = spec.get("resourceGroups") or []
    out = _resource_groups_problems(groups, has_parent=bool(spec.get("cohortName")), is_cohort=False)
    out += _label_selector_problems(
        spec.get("namespaceSelector"), "spec.namespaceSelector", f"{rule} ValidateLabelSelector"
    )
    preemption = spec.get("preemption") or {}
    borrow = (preemption.get("borrowWithinCohort") or {}).get("policy")
    if preemption.get("reclaimWithinCohort") == "Never" and borrow is not None and borrow != "Never":
        out.append(
            Problem(
                f"{rule} validatePreemption",
                "spec.preemption",
                "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never",
            )
        )
    fungibility = spec.get("flavorFungibility") or {}
    if fungibility.get("preference") is not None and (
        fungibility.get("whenCanBorrow", "MayStopSearch") != "TryNextFlavor"
        or fungibility.get("whenCanPreempt", "TryNextFlavor") != "TryNextFlavor"
    ):
        out.append(
            Problem(
                f"{rule} validateFlavorFungibility",
                "spec.flavorFungibility.preference",
                "requires both whenCanBorrow and whenCanPreempt to be TryNextFlavor",
            )
        )
    out += _fair_sharing_problems(spec.get("fairSharing"), "spec.fairSharing")
    flavors = sum(len(g.get("flavors") or []) for g in groups)
    if flavors > 256:
        out.append(Problem(f"{rule} validateTotalFlavors", "spec.resourceGroups", f"{flavors} flavors > 256"))
    covered = sum(len(g.get("coveredResources") or []) for g in groups)
    if covered > 256:
        out.append(
            Problem(f"{rule} validateTotalCoveredResources", "spec.resourceGroups", f"{covered} resources > 256")
        )
    for gi, group in enumerate(groups):
        combos = sum(len(f.get("resources") or []) for f in group.get("flavors") or [])
        if combos > 512:
            out.append(
                Problem(f"{rule} validateFlavorResourceCombinations", f"spec.resourceGroups[{gi}]", f"{combos} > 512")
            )
    all_flavors = {str(f.get("name")) for g in groups for f in g.get("flavors") or []}
    for ci, check in enumerate((spec.get("admissionChecksStrategy") or {}).get("admissionChecks") or []):
        for fi, flavor in enumerate(check.get("onFlavors") or []):
            if flavor not in all_flavors:
                out.append(
                    Problem(
                        f"{rule} validateAdmissionCheckOnFlavors",
                        f"spec.admissionChecksStrategy.admissionChecks[{ci}].onFlavors[{fi}]",
                        f"{flavor!r} is not a flavor of this ClusterQueue",
                    )
                )
    if old is not None and (old.get("spec") or {}).get("concurrentAdmissionPolicy") != spec.get(
        "concurrentAdmissionPolicy"
    ):
        out.append(
            Problem(f"{rule} ValidateClusterQueueUpdate", "spec.concurrentAdmissionPolicy", "field is immutable")
        )
    return out


def cohort_problems(cohort: Mapping[str, Any], old: Mapping[str, Any] | None = None) -> list[Problem]:
    """CohortWebhook.ValidateCreate/ValidateUpdate (validateCohort)."""
    del old  # the update check is the create check
    spec = cohort.get("spec") or {}
    out = _fair_sharing_problems(spec.get("fairSharing"), "spec.fairSharing")
    return out + _resource_groups_problems(
        spec.get("resourceGroups") or [], has_parent=bool(spec.get("parentName")), is_cohort=True
    )


def resource_flavor_problems(rf: Mapping[str, Any], old: Mapping[str, Any] | None = None) -> list[Problem]:
    """ValidateResourceFlavor (nodeLabels, nodeTaints, tolerations)."""
    del old
    rule = f"{KUEUE_WEBHOOKS}/resourceflavor_webhook.go ValidateResourceFlavor"
    spec = rf.get("spec") or {}
    out: list[Problem] = []
    for key, value in (spec.get("nodeLabels") or {}).items():
        if (detail := qualified_name_problem(key)) is not None:
            out.append(Problem(rule, "spec.nodeLabels", detail))
        if (detail := label_value_problem(str(value))) is not None:
            out.append(Problem(rule, f"spec.nodeLabels[{key}]", detail))
    seen: set[tuple[str, str]] = set()
    for index, taint in enumerate(spec.get("nodeTaints") or []):
        path = f"spec.nodeTaints[{index}]"
        key = str(taint.get("key", ""))
        if (detail := qualified_name_problem(key)) is not None:
            out.append(Problem(rule, f"{path}.key", detail))
        if (detail := label_value_problem(str(taint.get("value", "")))) is not None:
            out.append(Problem(rule, f"{path}.value", detail))
        pair = (key, str(taint.get("effect", "")))
        if pair in seen:
            out.append(Problem(rule, path, "taints must be unique by key and effect pair"))
        seen.add(pair)
    for index, toleration in enumerate(spec.get("tolerations") or []):
        key = str(toleration.get("key") or "")
        if key and (detail := qualified_name_problem(key)) is not None:
            out.append(
                Problem(
                    f"{KUEUE_WEBHOOKS}/workload_webhook.go validateTolerations",
                    f"spec.tolerations[{index}].key",
                    detail,
                )
            )
    return out


KUEUE_ADMISSIONCHECK_UTIL = "kueue v0.19.2 pkg/util/admissioncheck/admissioncheck.go"
KUEUE_MULTIKUEUE = "kueue v0.19.2 pkg/controller/admissionchecks/multikueue"
KUEUE_SCHEDULER_CACHE = "kueue v0.19.2 pkg/cache/scheduler/clusterqueue.go"
PROVISIONING_CONTROLLER = "kueue.x-k8s.io/provisioning-request"
MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"
# AdmissionCheck controller -> the kind its ConfigHelper reads parameters as (refValidForGK's GroupKind).
PARAMETER_KINDS = {PROVISIONING_CONTROLLER: "ProvisioningRequestConfig", MULTIKUEUE_CONTROLLER: "MultiKueueConfig"}
# apis/kueue/v1beta2/multikueue_types.go MultiKueueConfigSecretKey: the Secret key holding the kubeconfig.
MULTIKUEUE_SECRET_KEY = "kubeconfig"
# pkg/features/kube_features.go defaults at v0.19: MultiKueueClusterProfile (alpha, off since 0.15) and
# MultiKueueKubeConfigPathValidation (alpha, off since 0.19). The platform enables neither (components/kueue).
MULTIKUEUE_FEATURE_GATES = {"MultiKueueClusterProfile": False, "MultiKueueKubeConfigPathValidation": False}


def _ref_problems(ref: Any, kind: str) -> list[Problem]:
    """refValidForGK: nil ref, empty name, wrong group, wrong kind (in that order; the first one fails)."""
    rule = f"{KUEUE_ADMISSIONCHECK_UTIL} refValidForGK"
    if ref is None:
        return [Problem(rule, "spec.parameters", "missing parameters reference")]
    out: list[Problem] = []
    if not ref.get("name"):
        out.append(Problem(rule, "spec.parameters.name", "empty name: bad parameters reference"))
    if ref.get("apiGroup") != "kueue.x-k8s.io":
        out.append(Problem(rule, "spec.parameters.apiGroup", f"wrong group {ref.get('apiGroup')!r}"))
    if ref.get("kind") != kind:
        out.append(Problem(rule, "spec.parameters.kind", f"wrong kind {ref.get('kind')!r}, expecting {kind!r}"))
    return out


def admission_check_problems(ac: Mapping[str, Any], old: Mapping[str, Any] | None = None) -> list[Problem]:
    """AdmissionCheck has no webhook in v0.19.2 (pkg/webhooks/webhooks.go registers none), so the API server takes
    any schema-valid one; but the controller named by ``controllerName`` leaves a check whose parameters it cannot
    load inactive, and no workload is ever admitted through an inactive check:

    * ProvisioningRequest (pkg/controller/admissionchecks/provisioning admissioncheck_reconciler.go
      acReconciler.Reconcile): Active=False, reason BadParametersRef;
    * MultiKueue (pkg/controller/admissionchecks/multikueue/admissioncheck.go ACReconciler.Reconcile):
      Active=False, reason BadConfig;

    both when ConfigHelper.ConfigFromRef -> refValidForGK refuses the reference. This mirrors that refusal for
    both controllers' checks (the schema already makes controllerName immutable). Whether the referenced
    MultiKueueConfig and its clusters exist is a cross-object rule: :func:`multikueue_problems`."""
    del old
    spec = ac.get("spec") or {}
    kind = PARAMETER_KINDS.get(str(spec.get("controllerName")))
    if kind is None:
        return []
    return _ref_problems(spec.get("parameters"), kind)


def multikueue_cluster_problems(mkc: Mapping[str, Any], old: Mapping[str, Any] | None = None) -> list[Problem]:
    """MultiKueueCluster has no webhook in v0.19.2; the multikueue clustersReconciler (multikueuecluster.go
    ``Reconcile`` -> ``loadClientConfig`` -> ``getKubeConfig``) sets Active=False and never connects when:

    * ``clusterProfileRef`` is set while the MultiKueueClusterProfile gate is off (reason
      MultiKueueClusterProfileFeatureDisabled);
    * ``kubeConfig`` is nil ("kubeconfig reference is nil", reason BadKubeConfig);
    * ``locationType: Path``: with MultiKueueKubeConfigPathValidation off the reconciler emits the
      DeprecatedPathUsage warning and reads the file from the Kueue controller's own filesystem
      (getKubeConfigFromPath), where the Kueue chart as the platform installs it mounts no kubeconfig, so BadKubeConfig;
    * the Secret name is not a valid object name (getKubeConfigFromSecret's Get cannot find it: BadKubeConfig).

    The Secret's existence and content are checked across objects by :func:`multikueue_problems`."""
    del old
    rule = f"{KUEUE_MULTIKUEUE}/multikueuecluster.go clustersReconciler.loadClientConfig"
    source = (mkc.get("spec") or {}).get("clusterSource") or {}
    if source.get("clusterProfileRef") is not None and not MULTIKUEUE_FEATURE_GATES["MultiKueueClusterProfile"]:
        return [
            Problem(
                rule,
                "spec.clusterSource.clusterProfileRef",
                "MultiKueueClusterProfile feature gate is disabled (reason MultiKueueClusterProfileFeatureDisabled)",
            )
        ]
    ref = source.get("kubeConfig")
    if ref is None:
        return [Problem(f"{rule} getKubeConfig", "spec.clusterSource.kubeConfig", "kubeconfig reference is nil")]
    location = str(ref.get("location") or "")
    if ref.get("locationType", "Secret") == "Path":
        return [
            Problem(
                f"{KUEUE_MULTIKUEUE}/multikueuecluster.go clustersReconciler.getKubeConfigFromPath",
                "spec.clusterSource.kubeConfig.locationType",
                f"Path {location!r} is read from the Kueue controller's filesystem, where no kubeconfig is mounted "
                "(and with MultiKueueKubeConfigPathValidation off it is deprecated: DeprecatedPathUsage)",
            )
        ]
    if (detail := dns1123_subdomain_problem(location)) is not None:
        return [
            Problem(
                f"{KUEUE_MULTIKUEUE}/multikueuecluster.go clustersReconciler.getKubeConfigFromSecret",
                "spec.clusterSource.kubeConfig.location",
                f"{location!r} cannot name a Secret: {detail}",
            )
        ]
    return []


def _is_valid_hostname(server: str) -> bool:
    """multikueuecluster.go isValidHostname: the URL's host (port dropped) is an IP or a DNS-1123 subdomain."""
    try:
        netloc = urlsplit(server).netloc
    except ValueError:
        return False
    host = netloc.rsplit("@", 1)[-1]
    if host.startswith("["):
        host = host[1 : host.find("]")] if "]" in host else host
    elif host.count(":") == 1:
        host = host.split(":", 1)[0]
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return dns1123_subdomain_problem(host) is None


def kubeconfig_problems(text: str) -> list[Problem]:
    """multikueuecluster.go validateKubeconfig then validateRestConfig (exec not allowed): what a kubeconfig in a
    MultiKueueCluster's Secret must satisfy, or the cluster stays inactive with reason InsecureKubeConfig."""
    rule = f"{KUEUE_MULTIKUEUE}/multikueuecluster.go validateKubeconfig"
    rest_rule = f"{KUEUE_MULTIKUEUE}/multikueuecluster.go validateRestConfig"
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        return [Problem(rule, "kubeconfig", f"failed to parse kubeconfig: {exc}")]
    if not isinstance(doc, Mapping):
        return [Problem(rule, "kubeconfig", "failed to parse kubeconfig: not an object")]
    out: list[Problem] = []
    users = doc.get("users") or []
    clusters = doc.get("clusters") or []
    for i, entry in enumerate(users):
        user = entry.get("user") or {}
        path = f"users[{i}].user"
        if user.get("tokenFile"):
            out.append(Problem(rule, f"{path}.tokenFile", "tokenFile is not allowed"))
        if user.get("username") or user.get("password"):
            out.append(Problem(rest_rule, path, "basic auth is not allowed"))
        if user.get("exec") is not None:
            out.append(Problem(rest_rule, f"{path}.exec", "exec plugins are not allowed"))
        if user.get("auth-provider") is not None:
            out.append(Problem(rest_rule, f"{path}.auth-provider", "auth providers are not allowed"))
    for i, entry in enumerate(clusters):
        cluster = entry.get("cluster") or {}
        path = f"clusters[{i}].cluster"
        if cluster.get("insecure-skip-tls-verify"):
            out.append(Problem(rule, f"{path}.insecure-skip-tls-verify", "insecure TLS verification is not allowed"))
        if cluster.get("certificate-authority"):
            out.append(
                Problem(
                    rule, f"{path}.certificate-authority", "file paths are not allowed, use certificate-authority-data"
                )
            )
        server = str(cluster.get("server") or "")
        if not server:
            out.append(Problem(rule, f"{path}.server", "server URL is required"))
        elif not _is_valid_hostname(server.lower()):
            out.append(Problem(rest_rule, f"{path}.server", f"untrusted server endpoint {server!r}"))
    # clientcmd.RESTConfigFromKubeConfig -> ClientConfig -> ConfirmUsable: the current context must exist and
    # name an existing cluster (an empty kubeconfig is "no configuration has been provided").
    contexts = {str(c.get("name")): c.get("context") or {} for c in doc.get("contexts") or []}
    current = doc.get("current-context")
    if not clusters:
        out.append(Problem(rule, "kubeconfig", "invalid configuration: no configuration has been provided"))
    elif current not in contexts:
        out.append(Problem(rule, "current-context", f"context {current!r} was not found"))
    elif contexts[current].get("cluster") not in {str(c.get("name")) for c in clusters}:
        out.append(Problem(rule, "current-context", f"cluster {contexts[current].get('cluster')!r} was not found"))
    return out


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def _cq_flavors(cq: Mapping[str, Any]) -> set[str]:
    groups = (cq.get("spec") or {}).get("resourceGroups") or []
    return {str(f.get("name")) for g in groups for f in g.get("flavors") or []}


def multikueue_problems(objects: Iterable[Mapping[str, Any]], kueue_namespace: str = "kueue-system") -> list[str]:
    """The MultiKueue rules that span objects of one manager cluster (none has a webhook; each leaves something
    inactive, so no workload is ever dispatched):

    * multikueue/admissioncheck.go ACReconciler.Reconcile: the MultiKueueConfig a check names must exist
      (BadConfig) and every cluster it lists must be a MultiKueueCluster (Missing clusters: SomeActiveClusters
      or NoUsableClusters);
    * multikueue/multikueuecluster.go getKubeConfigFromSecret: the Secret is read from Kueue's namespace and
      must hold the key ``kubeconfig``; its content must pass validateKubeconfig (:func:`kubeconfig_problems`);
    * cache/scheduler/clusterqueue.go updateWithAdmissionChecks/updateQueueStatus: a ClusterQueue is inactive
      when an admission check it names is missing (AdmissionCheckNotFound), when it names more than one
      MultiKueue check (MultipleMultiKueueAdmissionChecks), a MultiKueue check on fewer than all its flavors
      (MultiKueueAdmissionCheckAppliedPerFlavor), or MultiKueue and ProvisioningRequest checks together
      (MultiKueueWithProvisioningRequest).
    """
    objs = list(objects)

    def of_kind(kind: str) -> dict[str, Mapping[str, Any]]:
        return {_name(o): o for o in objs if o.get("kind") == kind and str(o.get("apiVersion", "")).startswith("kueue")}

    checks, configs, clusters = of_kind("AdmissionCheck"), of_kind("MultiKueueConfig"), of_kind("MultiKueueCluster")
    secrets = {
        _name(o): o
        for o in objs
        if o.get("kind") == "Secret" and (o.get("metadata") or {}).get("namespace") == kueue_namespace
    }
    out: list[str] = []
    ac_rule = f"{KUEUE_MULTIKUEUE}/admissioncheck.go ACReconciler.Reconcile"
    for name, ac in checks.items():
        spec = ac.get("spec") or {}
        if spec.get("controllerName") != MULTIKUEUE_CONTROLLER:
            continue
        config_name = str((spec.get("parameters") or {}).get("name", ""))
        config = configs.get(config_name)
        if config is None:
            out.append(f"AdmissionCheck/{name}: MultiKueueConfig {config_name!r} not found: BadConfig [{ac_rule}]")
            continue
        missing = [c for c in (config.get("spec") or {}).get("clusters") or [] if c not in clusters]
        if missing:
            out.append(f"AdmissionCheck/{name}: Missing clusters: {missing} [{ac_rule}]")
    secret_rule = f"{KUEUE_MULTIKUEUE}/multikueuecluster.go clustersReconciler.getKubeConfigFromSecret"
    for name, mkc in clusters.items():
        ref = ((mkc.get("spec") or {}).get("clusterSource") or {}).get("kubeConfig") or {}
        if ref.get("locationType", "Secret") != "Secret":
            continue
        secret = secrets.get(str(ref.get("location")))
        if secret is None:
            out.append(
                f"MultiKueueCluster/{name}: Secret {kueue_namespace}/{ref.get('location')} not found [{secret_rule}]"
            )
            continue
        data = {**(secret.get("data") or {}), **(secret.get("stringData") or {})}
        if MULTIKUEUE_SECRET_KEY not in data:
            out.append(
                f"MultiKueueCluster/{name}: key {MULTIKUEUE_SECRET_KEY!r} not found in secret "
                f"{ref.get('location')!r} [{secret_rule}]"
            )
        elif "stringData" in secret and isinstance((secret.get("stringData") or {}).get(MULTIKUEUE_SECRET_KEY), str):
            for problem in kubeconfig_problems(secret["stringData"][MULTIKUEUE_SECRET_KEY]):
                out.append(f"Secret/{_name(secret)}: {problem}")
    for cq in of_kind("ClusterQueue").values():
        names = {
            str(c.get("name")): set(c.get("onFlavors") or []) or _cq_flavors(cq)
            for c in ((cq.get("spec") or {}).get("admissionChecksStrategy") or {}).get("admissionChecks") or []
        }
        cq_rule = f"{KUEUE_SCHEDULER_CACHE} clusterQueue.updateWithAdmissionChecks"
        controllers: dict[str, list[str]] = {}
        for check, flavors in sorted(names.items()):
            ac = checks.get(check)
            if ac is None:
                out.append(f"ClusterQueue/{_name(cq)}: references missing AdmissionCheck {check!r} [{cq_rule}]")
                continue
            controller = str((ac.get("spec") or {}).get("controllerName"))
            controllers.setdefault(controller, []).append(check)
            if controller == MULTIKUEUE_CONTROLLER and flavors != _cq_flavors(cq):
                out.append(
                    f"ClusterQueue/{_name(cq)}: Cannot specify MultiKueue AdmissionCheck per flavor, found: {check} "
                    f"(MultiKueueAdmissionCheckAppliedPerFlavor) [{cq_rule}]"
                )
        multikueue = controllers.get(MULTIKUEUE_CONTROLLER, [])
        if len(multikueue) > 1:
            out.append(
                f"ClusterQueue/{_name(cq)}: Cannot use multiple MultiKueue AdmissionChecks on the same ClusterQueue, "
                f"found: {','.join(multikueue)} (MultipleMultiKueueAdmissionChecks) [{cq_rule}]"
            )
        if multikueue and controllers.get(PROVISIONING_CONTROLLER):
            out.append(
                f"ClusterQueue/{_name(cq)}: Cannot use both MultiKueue and ProvisioningRequest AdmissionChecks "
                f"together (MultiKueueWithProvisioningRequest) [{cq_rule}]"
            )
    return out


def _quota_reserved(workload: Mapping[str, Any]) -> bool:
    conditions = (workload.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "QuotaReserved" and c.get("status") == "True" for c in conditions)


def workload_problems(new: Mapping[str, Any], old: Mapping[str, Any] | None = None) -> list[Problem]:
    """The part of WorkloadWebhook.ValidateUpdate (webhooks/workload_webhook.go ValidateWorkloadUpdate) that a
    write by the reconciler can break: a Workload holding quota keeps its podSets (validateImmutablePodSets,
    stricter here: no podSet field may change). The reconciler never creates Workloads (Kueue does), so create rules
    are not mirrored."""
    if old is None or not _quota_reserved(old):
        return []
    if (new.get("spec") or {}).get("podSets") != (old.get("spec") or {}).get("podSets"):
        rule = f"{KUEUE_WEBHOOKS}/workload_webhook.go validateImmutablePodSets"
        return [Problem(rule, "spec.podSets", "field is immutable while the Workload holds quota")]
    return []


def _jobset_problems(obj: Mapping[str, Any], old: Mapping[str, Any] | None = None) -> list[Problem]:
    if old is None:
        # Both webhooks see every JobSet; Kueue's only acts on those it manages: all of the platform's (queue label).
        return jobset_create_problems(obj) + kueue_job_create_problems(obj)
    return jobset_update_problems(old, obj) + jobset_create_problems(obj) + kueue_job_update_problems(old, obj)


def _no_validation(obj: Mapping[str, Any], old: Mapping[str, Any] | None = None) -> list[Problem]:
    del obj, old
    return []


Checker = Callable[[Mapping[str, Any], Mapping[str, Any] | None], list[Problem]]

# Every custom resource kind the package may emit, and its webhook; a new kind must be added here deliberately.
CHECKERS: dict[tuple[str, str], Checker] = {
    ("jobset.x-k8s.io", "JobSet"): _jobset_problems,
    ("kueue.x-k8s.io", "ClusterQueue"): cluster_queue_problems,
    ("kueue.x-k8s.io", "Cohort"): cohort_problems,
    ("kueue.x-k8s.io", "ResourceFlavor"): resource_flavor_problems,
    ("kueue.x-k8s.io", "Workload"): workload_problems,  # the reconciler's hold/release writes
    ("kueue.x-k8s.io", "LocalQueue"): _no_validation,  # webhook registered without a validator
    ("kueue.x-k8s.io", "WorkloadPriorityClass"): _no_validation,  # no webhook
    ("kueue.x-k8s.io", "Topology"): _no_validation,  # no webhook
    ("kueue.x-k8s.io", "AdmissionCheck"): admission_check_problems,  # no webhook; the controller's ref check
    ("kueue.x-k8s.io", "ProvisioningRequestConfig"): _no_validation,  # no webhook; its rules are all in the CRD
    ("kueue.x-k8s.io", "MultiKueueCluster"): multikueue_cluster_problems,  # no webhook; the reconciler's checks
    ("kueue.x-k8s.io", "MultiKueueConfig"): _no_validation,  # no webhook; cross-object rules: multikueue_problems
}
WEBHOOK_GROUPS = frozenset(group for group, _ in CHECKERS)


class UnmirroredKindError(LookupError):
    """An object of a webhook-guarded API group whose kind has no entry in CHECKERS."""


def admission_problems(obj: Mapping[str, Any], old: Mapping[str, Any] | None = None) -> list[Problem]:
    """What the pinned releases' validating webhooks would refuse in ``obj`` (an update of ``old`` if given).

    Kinds outside Kueue's and JobSet's groups are not theirs to judge and yield no problems; an unknown kind in
    those groups raises, so nothing new is emitted unchecked.
    """
    group = str(obj.get("apiVersion", "")).rpartition("/")[0]
    if group not in WEBHOOK_GROUPS:
        return []
    checker = CHECKERS.get((group, str(obj.get("kind", ""))))
    if checker is None:
        raise UnmirroredKindError(f"no admission rules mirrored for {obj.get('kind')}.{group}; add them to CHECKERS")
    return checker(obj, old)


def problems_in(objects: Iterable[Mapping[str, Any]]) -> list[str]:
    """One line per problem across many objects, naming each object."""
    return [
        f"{obj.get('kind')}/{obj.get('metadata', {}).get('name')}: {problem}"
        for obj in objects
        for problem in admission_problems(obj)
    ]


__all__ = [
    "CHECKERS",
    "NOT_MIRRORED",
    "Problem",
    "admission_check_problems",
    "admission_problems",
    "dns1035_label_problem",
    "dns1123_label_problem",
    "gen_job_name",
    "gen_pod_name",
    "kubeconfig_problems",
    "multikueue_cluster_problems",
    "multikueue_problems",
    "parse_quantity",
    "problems_in",
]
