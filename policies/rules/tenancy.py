"""Multi-tenancy: TPU only through Kueue, each team within its tier entitlement, no team opting out of hotswap.

The TPU-workload rules are right about the objects they look at; these close what they do not look at:

- ``tpu-only-through-kueue``: TPU chips are reachable only through the kinds Kueue manages for this platform
  (JobSets and Jobs; its pod integration is off). A Pod, Deployment, StatefulSet, ReplicaSet, DaemonSet or CronJob
  whose pods can reach TPU (chips, the accelerator selector, a toleration of GKE's TPU taint, or ``nodeName``) is
  refused: nothing would gate it, count it against a quota, or let hotswap see it. Pods a controller makes from an
  admitted JobSet or Job are sent by that controller's service account, which the admission policy never checks.
- ``tpu-workload-no-node-name``: a JobSet's or Job's pods may not name a node: ``nodeName`` bypasses the scheduler,
  the TPU taint and the exclusive placement of slices.
- ``tpu-workload-tier-entitled``: a team's workloads use only the tiers of its entitlement (``teams[].maxTier``).
- ``hotswap-protect-entitled``: only teams allowed to (``teams[].mayProtect``) set the reconciler's protect
  annotation, so a team cannot make its JobSets unevictable.

The entitlements are platform configuration: the stack writes them on its LocalQueues (annotations below), the
CLI and the pack read them from there, and the admission policy has them written into its CEL.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from .base import (
    KUEUE_GROUP,
    TPU_ACCELERATOR_LABEL,
    TPU_RESOURCE,
    AdmissionContext,
    CelValidation,
    Config,
    Finding,
    KubeObject,
    ObjectRule,
    PictureRule,
    cel_list,
    cel_string,
    dig,
    items,
    mapping,
    of_kind,
    pod_targets_tpu,
    pod_templates,
    tolerates_tpu,
)
from .priority_tiers import declared_tiers
from .tpu_workloads import FORBIDDEN_TPU_KINDS, is_tpu_workload, tpu_workload_match_cel, workload_tier

FAMILY = "multi-tenancy"
ALLOWED_TIERS_ANNOTATION = "gke-tpu-priority.io/allowed-tiers"
"""On a LocalQueue the stack declares: the tiers its namespace's team may use, comma-separated, highest first."""
MAY_PROTECT_ANNOTATION = "gke-tpu-priority.io/may-protect"
"""On a LocalQueue the stack declares: whether its namespace's team may set the protect annotation."""
PROTECT_ANNOTATION = "hotswap.gke-tpu-priority.io/protect"
"""The reconciler's opt-out: a JobSet carrying it is never a hotswap victim."""
KUEUE_KINDS = ("JobSet", "Job")
"""The workload kinds Kueue manages for this platform (its `jobset.x-k8s.io/jobset` and `batch/job` integrations)."""
FORBIDDEN_KINDS = frozenset(FORBIDDEN_TPU_KINDS)


def _why_tpu(template: Mapping[str, object]) -> str:
    spec = mapping(dig(template, "spec"))
    if dig(spec, "nodeName"):
        return f"names node '{dig(spec, 'nodeName')}' (spec.nodeName)"
    containers = items(dig(spec, "containers")) + items(dig(spec, "initContainers"))
    if any(TPU_RESOURCE in mapping(dig(c, "resources", part)) for c in containers for part in ("limits", "requests")):
        return f"asks for {TPU_RESOURCE}"
    if TPU_ACCELERATOR_LABEL in mapping(dig(spec, "nodeSelector")):
        return f"selects {TPU_ACCELERATOR_LABEL}"
    if any(tolerates_tpu(t) for t in items(dig(spec, "tolerations"))):
        return "tolerates the TPU node taint"
    return "can reach TPU nodes"


def _through_kueue_hint(kind: str) -> str:
    why = (
        "Kueue's pod integration is off here, so a Pod's queue label gates nothing"
        if kind == "Pod"
        else f"Kueue manages no {kind} here, so nothing would queue it, count it against a quota or let hotswap see it"
    )
    return (
        f"{why}. TPU is reachable only through JobSets and Jobs that Kueue admits: submit a JobSet "
        "(gke-tpu-jobset), and keep TPU tolerations, selectors and nodeName out of other pods."
    )


def check_only_through_kueue(obj: KubeObject, cfg: Config) -> Iterator[str]:
    for where, template in pod_templates(obj):
        if pod_targets_tpu(template):
            shown = "" if obj.kind == "Pod" else f" {where}"
            yield f"{obj.ref}{shown} pods {_why_tpu(template)}; {_through_kueue_hint(obj.kind)}"
            return


def only_through_kueue_cel(context: AdmissionContext) -> list[CelValidation]:
    message = (
        "TPU chips are reachable only through JobSets and Jobs that Kueue admits; pods of other kinds may not ask "
        "for google.com/tpu, select or tolerate TPU nodes, or name a node."
    )
    out: list[CelValidation] = []
    for kind in FORBIDDEN_TPU_KINDS:
        reaches = f"!{tpu_workload_match_cel(kind)}"
        if kind == "Pod":
            # A pod's tolerations may be added by an update: a Pending pod that gains the TPU toleration would then
            # be scheduled there. One that already reached TPU (made by a controller from an admitted JobSet or Job,
            # or before the policy) may still be updated, e.g. its labels.
            reaches += f" || (request.operation == 'UPDATE' && {tpu_workload_match_cel(kind, 'oldObject')})"
        out.append(
            CelValidation(
                expression=reaches,
                message=message,
                message_expression=(
                    f"variables.ref + '{'' if kind == 'Pod' else ' pods'} can reach TPU nodes; ' + "
                    f"{cel_string(_through_kueue_hint(kind))}"
                ),
                kinds=frozenset({kind}),
            )
        )
    return out


def check_no_node_name(obj: KubeObject, cfg: Config) -> Iterator[str]:
    for where, template in pod_templates(obj):
        node = dig(template, "spec", "nodeName")
        if node:
            yield (
                f"TPU {obj.ref} {where} pods name node '{node}' (spec.nodeName), which bypasses the scheduler, the TPU "
                "taint and exclusive slice placement; remove nodeName and let Kueue and the scheduler place them."
            )


def no_node_name_cel(context: AdmissionContext) -> list[CelValidation]:
    return [
        CelValidation(
            expression="variables.templates.all(t, t.nodeName == '')",
            message="TPU workloads' pods may not set spec.nodeName.",
            message_expression=(
                "'TPU ' + variables.ref + ' pods name a node (spec.nodeName), which bypasses the scheduler, the TPU "
                "taint and exclusive slice placement; remove nodeName and let Kueue and the scheduler place them.'"
            ),
            kinds=frozenset(KUEUE_KINDS),
        )
    ]


def _local_queue_annotation(objects: Sequence[KubeObject], key: str) -> dict[str, list[str]]:
    """Namespace -> the values of ``key`` on its declared LocalQueues (only LocalQueues that carry it)."""
    found: dict[str, list[str]] = {}
    for local_queue in of_kind(objects, "LocalQueue", KUEUE_GROUP):
        value = mapping(dig(local_queue.manifest, "metadata", "annotations")).get(key)
        if isinstance(value, str):
            found.setdefault(local_queue.namespace or "default", []).append(value)
    return found


def declared_entitlements(objects: Sequence[KubeObject]) -> dict[str, set[str]]:
    """Namespace -> tiers its workloads may use, from the LocalQueues' annotation (every LocalQueue of a namespace
    must allow a tier for the namespace to have it)."""
    out: dict[str, set[str]] = {}
    for namespace, values in _local_queue_annotation(objects, ALLOWED_TIERS_ANNOTATION).items():
        sets = [{t.strip() for t in v.split(",") if t.strip()} for v in values]
        out[namespace] = set.intersection(*sets)
    return out


def _ordered(tiers: set[str]) -> str:
    return ", ".join(sorted(tiers)) or "none"


def check_tier_entitled(objects: Sequence[KubeObject], cfg: Config) -> Iterator[Finding]:
    entitled = declared_entitlements(objects)
    tiers = declared_tiers(objects, cfg)  # an undeclared tier is tpu-workload-priority-tier-declared's finding
    for obj in objects:
        namespace = obj.namespace or "default"
        if not is_tpu_workload(obj) or namespace not in entitled:
            continue
        named = {workload_tier(obj)}
        named |= {str(dig(t, "spec", "priorityClassName", default="")) for _, t in pod_templates(obj)}
        for tier in sorted((named & tiers) - entitled[namespace]):
            yield Finding(
                f"TPU {obj.ref} uses tier '{tier}', above what namespace '{namespace}' is entitled to (allowed "
                f"there: {_ordered(entitled[namespace])}); use one of them. The platform's `teams[].maxTier` "
                "decides a team's highest tier.",
                obj,
            )


def tier_entitled_cel(context: AdmissionContext) -> list[CelValidation]:
    if not context.entitlements:
        return []
    table = (
        "{"
        + ", ".join(f"{cel_string(ns)}: {cel_list(tiers)}" for ns, tiers in sorted(context.entitlements.items()))
        + "}"
    )
    allowed = f"{table}[request.namespace]"
    # Undeclared tiers are left to tpu-workload-priority-tier-declared, so each mistake is reported once.
    tiers = cel_list(context.tiers)
    return [
        CelValidation(
            expression=(
                f"!(request.namespace in {table}) || ((!(variables.priority in {tiers}) || variables.priority in "
                f"{allowed}) && variables.templates.all(t, !(t.priorityClass in {tiers}) || t.priorityClass in "
                f"{allowed}))"
            ),
            message="TPU workloads may use only the tiers their namespace is entitled to (teams[].maxTier).",
            message_expression=(
                "'TPU ' + variables.ref + ' uses a tier above what namespace \\'' + request.namespace + '\\' is "
                f"entitled to (label or pod priorityClassName; allowed there: ' + {allowed}.join(', ') + '); use "
                "one of them. The platform\\'s `teams[].maxTier` decides a team\\'s highest tier.'"
            ),
        )
    ]


def protecting_namespaces(objects: Sequence[KubeObject]) -> set[str] | None:
    """Namespaces allowed to set the protect annotation; None when the LocalQueues declare no teams."""
    marks = _local_queue_annotation(objects, MAY_PROTECT_ANNOTATION)
    if not marks:
        return None
    return {ns for ns, values in marks.items() if all(v.strip().lower() == "true" for v in values)}


def check_protect_entitled(objects: Sequence[KubeObject], cfg: Config) -> Iterator[Finding]:
    allowed = protecting_namespaces(objects)
    if allowed is None:
        return
    for obj in objects:
        annotations = mapping(dig(obj.manifest, "metadata", "annotations"))
        namespace = obj.namespace or "default"
        if obj.kind == "JobSet" and PROTECT_ANNOTATION in annotations and namespace not in allowed:
            yield Finding(
                f"{obj.ref} sets annotation {PROTECT_ANNOTATION}, which would make it unevictable by hotswap; "
                f"namespace '{namespace}' may not (teams[].mayProtect); remove the annotation.",
                obj,
            )


def protect_entitled_cel(context: AdmissionContext) -> list[CelValidation]:
    if context.protecting_namespaces is None:
        return []
    key = cel_string(PROTECT_ANNOTATION)
    return [
        CelValidation(
            expression=(
                f"!({key} in variables.annotations) || request.namespace in {cel_list(context.protecting_namespaces)}"
            ),
            message=f"Only teams with teams[].mayProtect may set annotation {PROTECT_ANNOTATION}.",
            message_expression=(
                f"variables.ref + ' sets annotation {PROTECT_ANNOTATION}, which would make it unevictable by "
                "hotswap; namespace \\'' + request.namespace + '\\' may not (teams[].mayProtect); remove the "
                "annotation.'"
            ),
            kinds=frozenset({"JobSet"}),
        )
    ]


TPU_ONLY_THROUGH_KUEUE = ObjectRule(
    name="tpu-only-through-kueue",
    description=(
        "Only JobSets and Jobs (the kinds Kueue manages here) may reach TPU: no Pod, Deployment, StatefulSet, "
        "ReplicaSet, DaemonSet or CronJob may ask for chips, select or tolerate TPU nodes, or name a node."
    ),
    family=FAMILY,
    tags=("kueue", "tpu-workload", "multi-tenancy"),
    kinds=FORBIDDEN_KINDS,
    check=check_only_through_kueue,
    admission=only_through_kueue_cel,
)
TPU_WORKLOAD_NO_NODE_NAME = ObjectRule(
    name="tpu-workload-no-node-name",
    description="Pods of TPU JobSets and Jobs may not name a node (spec.nodeName bypasses scheduling and taints).",
    family=FAMILY,
    tags=("tpu-workload", "multi-tenancy"),
    kinds=frozenset(KUEUE_KINDS),
    check=check_no_node_name,
    admission=no_node_name_cel,
)
TPU_WORKLOAD_TIER_ENTITLED = PictureRule(
    name="tpu-workload-tier-entitled",
    description="A TPU workload's tier (label and pods) must be one its namespace's team is entitled to.",
    family=FAMILY,
    tags=("priority", "tpu-workload", "multi-tenancy"),
    check=check_tier_entitled,
    admission=tier_entitled_cel,
)
HOTSWAP_PROTECT_ENTITLED = PictureRule(
    name="hotswap-protect-entitled",
    description=f"Only teams allowed to (teams[].mayProtect) set {PROTECT_ANNOTATION} on their JobSets.",
    family=FAMILY,
    tags=("hotswap", "multi-tenancy"),
    check=check_protect_entitled,
    admission=protect_entitled_cel,
)

RULES = (TPU_ONLY_THROUGH_KUEUE, TPU_WORKLOAD_NO_NODE_NAME, TPU_WORKLOAD_TIER_ENTITLED, HOTSWAP_PROTECT_ENTITLED)
