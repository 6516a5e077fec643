"""TPU workloads (JobSets, and Jobs/Pods asking for TPU): queue, priority tier, exclusive slices, v6e shape.

These are the rules teams meet when they submit work, so each has two forms kept side by side: a Python check
(the pack and the CLI) and a CEL form (the in-cluster ValidatingAdmissionPolicy). Both read the same generated
shape tables, and tests/policies/test_three_front_ends.py runs one table of good and bad objects through all
three front ends. Objects a controller made (a JobSet's Jobs, a Job's Pods) are not checked: their owner was.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from . import v6e
from .base import (
    INSTANCE_TYPE_LABEL,
    TPU_ACCELERATOR_LABEL,
    TPU_RESOURCE,
    TPU_TAINT_KEY,
    TPU_TOPOLOGY_LABEL,
    AdmissionContext,
    CelValidation,
    Config,
    Finding,
    KubeObject,
    ObjectRule,
    PictureRule,
    as_number,
    cel_list,
    cel_string,
    dig,
    items,
    mapping,
    parse_quantity,
    pod_targets_tpu,
    pod_templates,
    unwrap_secret,
)
from .kueue_objects import declared_local_queues
from .priority_tiers import declared_tiers

FAMILY = "TPU workloads"
WORKLOAD_KINDS = frozenset({"JobSet", "Job"})
"""The TPU workload kinds: those Kueue manages here (its JobSet and batch/job integrations; pods go nowhere else)."""
EXCLUSIVE_TOPOLOGY_ANNOTATION = "alpha.jobset.sigs.k8s.io/exclusive-topology"
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
KUEUE_PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
DEFAULT_EXCLUSIVE_TOPOLOGY_KEY = "cloud.google.com/gke-nodepool"
NOT_A_CHIP_COUNT = -1_000_000  # a google.com/tpu quantity that is not a whole number: never fits a shape

SHAPE_HINT = ", ".join(
    f"{s.topology}: {s.chips_per_vm} chips x {s.vms} pod{'s' if s.vms > 1 else ''}"
    + (f" ({s.machine_type})" if len(v6e.shapes_for(s.topology)) > 1 else "")
    for s in v6e.SHAPES
)

# --------------------------------------------------------------------------------------------------------
# Shape tables: the one place pod selectors + chips are turned into a v6e shape, for Python and CEL alike


@functools.cache
def shape_vms() -> dict[str, int]:
    """``accelerator|topology|instance-type|chips per pod`` -> VMs (pods) per slice, for every fitting pod.

    The instance type is empty when the pod does not select one, which only topologies with one layout allow.
    """
    table: dict[str, int] = {}
    for shape in v6e.SHAPES:
        # A topology with two layouts (2x4: one 8-chip VM or two 4-chip VMs) needs the instance type selected,
        # or pods of one layout can land on nodes of the other.
        unambiguous = len(v6e.shapes_for(shape.topology)) == 1
        for machine in ("", shape.machine_type) if unambiguous else (shape.machine_type,):
            table[f"{v6e.ACCELERATOR}|{shape.topology}|{machine}|{shape.chips_per_vm}"] = shape.vms
    return table


@functools.cache
def topology_multi_host() -> dict[str, bool]:
    """``topology|instance-type`` -> whether it may be a multi-host slice, for pods whose chips fit no shape."""
    table: dict[str, bool] = {}
    for shape in v6e.SHAPES:
        for machine in ("", shape.machine_type):
            key = f"{shape.topology}|{machine}"
            table[key] = table.get(key, False) or shape.multi_host
    return table


def quantity_chips(value: Any) -> int:
    """Whole chips a `google.com/tpu` quantity asks for. The API server (and JobSet's webhook, by its Go round trip)
    writes a quantity in canonical form before admission, so `4000m` reaches the in-cluster policy as `4`."""
    try:
        number = parse_quantity(unwrap_secret(value))
    except ValueError:
        return NOT_A_CHIP_COUNT
    return int(number) if number == number.to_integral_value() and number >= 0 else NOT_A_CHIP_COUNT


def pod_chips(template: Mapping[str, Any]) -> int:
    """google.com/tpu the pod's containers ask for (limits, else requests)."""
    total = 0
    for container in items(dig(template, "spec", "containers")):
        resources = mapping(dig(container, "resources"))
        for part in ("limits", "requests"):
            if TPU_RESOURCE in mapping(resources.get(part)):
                total += quantity_chips(mapping(resources.get(part))[TPU_RESOURCE])
                break
    return total


def selector(template: Mapping[str, Any], label: str) -> str:
    return str(mapping(dig(template, "spec", "nodeSelector")).get(label, ""))


def shape_key(template: Mapping[str, Any]) -> str:
    parts = [selector(template, label) for label in (TPU_ACCELERATOR_LABEL, TPU_TOPOLOGY_LABEL, INSTANCE_TYPE_LABEL)]
    return "|".join([*parts, str(pod_chips(template))])


def is_multi_host(template: Mapping[str, Any]) -> bool:
    key = shape_key(template)
    if key in shape_vms():
        return shape_vms()[key] > 1
    topology = f"{selector(template, TPU_TOPOLOGY_LABEL)}|{selector(template, INSTANCE_TYPE_LABEL)}"
    return topology_multi_host().get(topology, False)


# --------------------------------------------------------------------------------------------------------
# CEL building blocks (the admission policy's variables and the expressions over one pod spec ``s``)


def _has_key(map_expr: str, key: str) -> str:
    return f"(has({map_expr}) && {cel_string(key)} in {map_expr})"


def _selector_cel(spec: str, label: str) -> str:
    return f"({_has_key(f'{spec}.nodeSelector', label)} ? {spec}.nodeSelector[{cel_string(label)}] : '')"


def _quantity_cel(value: str) -> str:
    return f"(string({value}).matches('^[0-9]+$') ? int(string({value})) : {NOT_A_CHIP_COUNT})"


# Built-in kinds' OpenAPI gives Quantity no type (oneOf string/number), so the API server's type checker does not
# expose `resources.limits`/`requests` of Pods and Jobs (SchemaDeclType drops them): read them through dyn().
_RESOURCES = "dyn(c.resources)"


def _chips_cel(spec: str) -> str:
    limits, requests = f"{_RESOURCES}.limits", f"{_RESOURCES}.requests"
    tpu = cel_string(TPU_RESOURCE)
    per_container = (
        f"(has(c.resources) && {_has_key(limits, TPU_RESOURCE)} ? {_quantity_cel(f'{limits}[{tpu}]')} : "
        f"(has(c.resources) && {_has_key(requests, TPU_RESOURCE)} ? {_quantity_cel(f'{requests}[{tpu}]')} : 0))"
    )
    return f"{spec}.containers.map(c, {per_container}).sum()"


def _shape_key_cel(spec: str) -> str:
    parts = [_selector_cel(spec, label) for label in (TPU_ACCELERATOR_LABEL, TPU_TOPOLOGY_LABEL, INSTANCE_TYPE_LABEL)]
    return " + '|' + ".join([*parts, f"string({_chips_cel(spec)})"])


def _targets_tpu_cel(spec: str) -> str:
    def asks(containers: str) -> str:
        return (
            f"{containers}.exists(c, has(c.resources) && ({_has_key(f'{_RESOURCES}.limits', TPU_RESOURCE)} || "
            f"{_has_key(f'{_RESOURCES}.requests', TPU_RESOURCE)}))"
        )

    key = "(has(t.key) ? t.key : '')"
    tolerates = (
        f"(has({spec}.tolerations) && {spec}.tolerations.exists(t, {key} == {cel_string(TPU_TAINT_KEY)} || "
        f"({key} == '' && has(t.operator) && t.operator == 'Exists')))"
    )
    return (
        f"({_has_key(f'{spec}.nodeSelector', TPU_ACCELERATOR_LABEL)} || {asks(f'{spec}.containers')} || "
        f"(has({spec}.initContainers) && {asks(f'{spec}.initContainers')}) || {tolerates} || "
        f"(has({spec}.nodeName) && {spec}.nodeName != ''))"
    )


def _cel_map(table: Mapping[str, Any]) -> str:
    return "{" + ", ".join(f"{cel_string(k)}: {json.dumps(v)}" for k, v in sorted(table.items())) + "}"


def _multi_host_cel(record: str) -> str:
    """Whether a template record's pods run on a multi-host slice (its shape, else its topology alone)."""
    fallback = _cel_map(topology_multi_host())
    return (
        f"({record}.key in variables.shapeVms ? variables.shapeVms[{record}.key] > 1 : "
        f"{record}.topology in {fallback} && {fallback}[{record}.topology])"
    )


ADMISSION_KINDS = ("JobSet", "Job")
"""The workload kinds the admission policies check, one policy each so every expression is typed by one schema."""
FORBIDDEN_TPU_KINDS = ("Pod", "Deployment", "StatefulSet", "ReplicaSet", "DaemonSet", "CronJob")
"""Kinds Kueue does not manage here (its pod integration is off): they may not reach TPU at all (one policy each)."""
_TEMPLATE_SPEC = {
    "Deployment": "object.spec.template",
    "StatefulSet": "object.spec.template",
    "ReplicaSet": "object.spec.template",
    "DaemonSet": "object.spec.template",
    "CronJob": "object.spec.jobTemplate.spec.template",
}


def _has_pod_spec(job: str) -> str:
    return f"has({job}.spec) && has({job}.spec.template) && has({job}.spec.template.spec)"


def _flag(condition: str) -> str:
    return f"(({condition}) ? 'true' : 'false')"


CAPACITY_LABEL = "gke-tpu-priority.io/capacity"
"""Node label of the capacity mode of the package's TPU pools; the platform's ResourceFlavors select it."""
SPOT_CAPACITY = "spot"


def off_spot_cel(spec: str) -> str:
    """Whether a pod spec keeps its pods off spot capacity: a nodeSelector pinning another capacity, or a required
    node affinity whose every term excludes spot (`policies.rules.spot_tiers.off_spot`, in CEL)."""
    label, spot = cel_string(CAPACITY_LABEL), cel_string(SPOT_CAPACITY)
    required = f"{spec}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    excludes = (
        f"e.key == {label} && has(e.values) && ((e.operator == 'NotIn' && {spot} in e.values) || "
        f"(e.operator == 'In' && !({spot} in e.values)))"
    )
    return (
        f"({_has_key(f'{spec}.nodeSelector', CAPACITY_LABEL)} && {spec}.nodeSelector[{label}] != {spot}) || "
        f"(has({spec}.affinity) && has({spec}.affinity.nodeAffinity) && has({required}) && "
        f"size({required}.nodeSelectorTerms) > 0 && {required}.nodeSelectorTerms.all(t, has(t.matchExpressions) && "
        f"t.matchExpressions.exists(e, {excludes})))"
    )


def _template_fields(kind: str, job: str, spec: str) -> dict[str, str]:
    """What the rules read of one pod template (and of its Job), read once per request from the typed object.

    Every value is a string: the API server's CEL refuses map literals whose values differ in type
    (``HomogeneousAggregateLiterals`` and, since 1.29, ``ValidateHomogeneousAggregateLiterals`` in
    ``apiserver/pkg/cel/environment/base.go``), and with ``object`` untyped at run time only ``string()`` and
    string-valued ternaries have a static type; so flags are ``'true'``/``'false'`` and numbers ``string(n)``.
    """
    fields = {
        "priorityClass": f"string(has({spec}.priorityClassName) ? {spec}.priorityClassName : '')",
        "nodeName": f"string(has({spec}.nodeName) ? {spec}.nodeName : '')",
        "tpu": _flag(_targets_tpu_cel(spec)),
        "key": f"string({_shape_key_cel(spec)})",
        "topology": (
            f"string({_selector_cel(spec, TPU_TOPOLOGY_LABEL)} + '|' + {_selector_cel(spec, INSTANCE_TYPE_LABEL)})"
        ),
    }
    if kind != "Pod":
        # Unset counts as 1: what Job defaulting gives parallelism (and completions when both are unset), and
        # JobSet creates its Jobs from the template as written.
        fields["parallelism"] = f"string(has({job}.spec.parallelism) ? {job}.spec.parallelism : 1)"
        fields["completions"] = f"string(has({job}.spec.completions) ? {job}.spec.completions : 1)"
        fields["offSpot"] = _flag(off_spot_cel(spec))
    if kind == "JobSet":
        annotation = cel_string(EXCLUSIVE_TOPOLOGY_ANNOTATION)
        fields["exclusiveTopology"] = (
            f"string(has({job}.metadata) && {_has_key(f'{job}.metadata.annotations', EXCLUSIVE_TOPOLOGY_ANNOTATION)}"
            f" ? {job}.metadata.annotations[{annotation}] : '')"
        )
    return fields


def _record(fields: Mapping[str, str]) -> str:
    return "{" + ", ".join(f"{cel_string(name)}: {value}" for name, value in fields.items()) + "}"


def templates_cel(kind: str) -> str:
    """The policy's ``templates`` variable: one record per pod template of the object (see _template_fields)."""
    if kind == "JobSet":
        fields = _template_fields(kind, "r.template", "r.template.spec.template.spec")
        return (
            "has(object.spec.replicatedJobs) ? object.spec.replicatedJobs.filter(r, has(r.template) && "
            f"{_has_pod_spec('r.template')}).map(r, {_record(fields)}) : []"
        )
    if kind == "Job":
        fields = _template_fields(kind, "object", "object.spec.template.spec")
        return f"{_has_pod_spec('object')} ? [{_record(fields)}] : []"
    return f"has(object.spec) ? [{_record(_template_fields(kind, 'object', 'object.spec'))}] : []"


def shapes_cel(kind: str) -> str:
    """The ``shapes`` variable: each template record plus its v6e shape, looked up once per request."""
    copied = {name: f"t.{name}" for name in _template_fields(kind, "j", "s")}
    derived = {
        "known": _flag("t.key in variables.shapeVms"),
        "vms": "string(t.key in variables.shapeVms ? variables.shapeVms[t.key] : 0)",
        "multiHost": _flag(_multi_host_cel("t")),
    }
    return f"variables.templates.map(t, {_record({**copied, **derived})})"


def _pod_specs_cel(kind: str) -> str:
    """The object's pod specs, for the match condition (variables are not available there)."""
    if kind == "JobSet":
        return (
            "(has(object.spec.replicatedJobs) ? object.spec.replicatedJobs.filter(r, has(r.template) && "
            f"{_has_pod_spec('r.template')}).map(r, r.template.spec.template.spec) : [])"
        )
    if kind == "Job":
        return f"({_has_pod_spec('object')} ? [object.spec.template.spec] : [])"
    if kind in _TEMPLATE_SPEC:
        template = _TEMPLATE_SPEC[kind]
        parts = template.split(".")
        present = " && ".join(f"has({'.'.join(parts[:i])})" for i in range(2, len(parts) + 1))
        return f"({present} && has({template}.spec) ? [{template}.spec] : [])"
    return "(has(object.spec) ? [object.spec] : [])"


def _ref_cel(kind: str) -> str:
    return (
        f"{cel_string(kind + ' ')} + request.namespace + '/' + (has(object.metadata.name) && "
        "object.metadata.name != '' ? object.metadata.name : (has(object.metadata.generateName) ? "
        "object.metadata.generateName + '*' : '?'))"
    )


def admission_variables(kind: str) -> list[tuple[str, str]]:
    """(name, expression) of the ``kind`` policy's variables, in order (later ones use earlier ones)."""
    if kind in FORBIDDEN_TPU_KINDS:
        return [("ref", _ref_cel(kind))]
    return [
        ("labels", "has(object.metadata.labels) ? object.metadata.labels : {}"),
        ("annotations", "has(object.metadata.annotations) ? object.metadata.annotations : {}"),
        (
            "queue",
            f"{cel_string(QUEUE_NAME_LABEL)} in variables.labels ? "
            f"variables.labels[{cel_string(QUEUE_NAME_LABEL)}] : ''",
        ),
        (
            "priority",
            f"{cel_string(KUEUE_PRIORITY_LABEL)} in variables.labels ? "
            f"variables.labels[{cel_string(KUEUE_PRIORITY_LABEL)}] : ''",
        ),
        ("shapeVms", _cel_map(shape_vms())),
        ("templates", templates_cel(kind)),
        ("shapes", shapes_cel(kind)),
        ("ref", _ref_cel(kind)),
    ]


def tpu_workload_match_cel(kind: str, root: str = "object") -> str:
    """True when the pods of ``root`` (``object``, or ``oldObject`` on update) can reach TPU: the policy's match
    condition."""
    specs = _pod_specs_cel(kind) if root == "object" else _pod_specs_cel(kind).replace("object.", f"{root}.")
    return f"{specs}.exists(s, {_targets_tpu_cel('s')})"


# --------------------------------------------------------------------------------------------------------
# The checks


def is_tpu_workload(obj: KubeObject) -> bool:
    """A JobSet, Job or Pod whose pods can reach TPU. Whatever ``ownerReferences`` it claims: any user can write
    those, so in the cluster what a controller made is told by who sends it (see policies.admission)."""
    return obj.kind in WORKLOAD_KINDS and any(pod_targets_tpu(t) for _, t in pod_templates(obj))


def _labels(obj: KubeObject) -> Mapping[str, Any]:
    return mapping(dig(obj.manifest, "metadata", "labels"))


def workload_tier(obj: KubeObject) -> str:
    """The tier a TPU workload names for Kueue (its priority-class label), or "" when it names none."""
    return str(_labels(obj).get(KUEUE_PRIORITY_LABEL) or "")


def check_queue_name(obj: KubeObject, cfg: Config) -> Iterator[str]:
    if is_tpu_workload(obj) and not _labels(obj).get(QUEUE_NAME_LABEL):
        yield (
            f"TPU {obj.ref} has no label {QUEUE_NAME_LABEL}; set it to a LocalQueue of its namespace so Kueue "
            "admits it."
        )


def queue_name_cel(context: AdmissionContext) -> list[CelValidation]:
    return [
        CelValidation(
            expression="variables.queue != ''",
            message=f"TPU workloads must set label {QUEUE_NAME_LABEL} to a LocalQueue of their namespace.",
            message_expression=(
                f"'TPU ' + variables.ref + ' has no label {QUEUE_NAME_LABEL}; set it to a LocalQueue of its "
                "namespace so Kueue admits it.'"
            ),
        )
    ]


def check_queue_declared(objects: Sequence[KubeObject], cfg: Config) -> Iterator[Finding]:
    declared = declared_local_queues(objects, cfg)
    for obj in objects:
        queue = _labels(obj).get(QUEUE_NAME_LABEL)
        if not is_tpu_workload(obj) or not queue:
            continue
        namespace = obj.namespace or "default"
        if queue not in declared.get(namespace, set()):
            known = ", ".join(sorted(declared.get(namespace, set()))) or "none"
            yield Finding(
                f"TPU {obj.ref} names LocalQueue '{queue}', which namespace '{namespace}' does not have (declared "
                f"there: {known}); set {QUEUE_NAME_LABEL} to one of them (give the platform's manifests too).",
                obj,
            )


def queue_declared_cel(context: AdmissionContext) -> list[CelValidation]:
    queues = (
        "{"
        + ", ".join(
            f"{cel_string(ns)}: {cel_list(sorted(names))}" for ns, names in sorted(context.local_queues.items())
        )
        + "}"
    )
    return [
        CelValidation(
            expression=(
                f"variables.queue == '' || (request.namespace in {queues} && "
                f"variables.queue in {queues}[request.namespace])"
            ),
            message=f"Label {QUEUE_NAME_LABEL} must name a LocalQueue of the workload's namespace.",
            message_expression=(
                f"'TPU ' + variables.ref + ' names LocalQueue \\'' + variables.queue + '\\', which namespace \\'' + "
                f"request.namespace + '\\' does not have (declared there: ' + (request.namespace in {queues} ? "
                f"{queues}[request.namespace].join(', ') : 'none') + '); set {QUEUE_NAME_LABEL} to one of them.'"
            ),
        )
    ]


def check_priority_matches(obj: KubeObject, cfg: Config) -> Iterator[str]:
    if not is_tpu_workload(obj):
        return
    label = _labels(obj).get(KUEUE_PRIORITY_LABEL)
    classes = {str(dig(t, "spec", "priorityClassName", default="")) for _, t in pod_templates(obj)}
    if not label:
        hint = f"'{next(iter(classes))}'" if len(classes) == 1 and "" not in classes else "its pods' priority tier"
        yield (
            f"TPU {obj.ref} has no label {KUEUE_PRIORITY_LABEL}; set it to {hint} so Kueue and the pods share one "
            "priority."
        )
        return
    for where, template in pod_templates(obj):
        pod_priority = dig(template, "spec", "priorityClassName")
        if not pod_priority:
            yield (
                f"TPU {obj.ref} {where} pods have no priorityClassName; set it to '{label}', the "
                f"{KUEUE_PRIORITY_LABEL} label."
            )
        elif pod_priority != label:
            yield (
                f"TPU {obj.ref} {where} pods use priorityClassName '{pod_priority}' but label {KUEUE_PRIORITY_LABEL} "
                f"is '{label}'; make them the same tier."
            )


def priority_matches_cel(context: AdmissionContext) -> list[CelValidation]:
    return [
        CelValidation(
            expression=(
                "variables.priority != '' && variables.templates.all(t, t.priorityClass == variables.priority)"
            ),
            message=(
                f"TPU workloads must set label {KUEUE_PRIORITY_LABEL} and the same priorityClassName on their pods."
            ),
            message_expression=(
                f"variables.priority == '' ? 'TPU ' + variables.ref + ' has no label {KUEUE_PRIORITY_LABEL}; set it to "
                "its pods\\' priority tier so Kueue and the pods share one priority.' : 'TPU ' + variables.ref + "
                "' pods must use priorityClassName \\'' + variables.priority + '\\', the "
                f"{KUEUE_PRIORITY_LABEL} label; make them the same tier.'"
            ),
        )
    ]


def check_tier_declared(objects: Sequence[KubeObject], cfg: Config) -> Iterator[Finding]:
    tiers = declared_tiers(objects, cfg)
    known = ", ".join(sorted(tiers)) or "none"
    for obj in objects:
        if not is_tpu_workload(obj):
            continue
        named = {workload_tier(obj)}
        named |= {str(dig(t, "spec", "priorityClassName", default="")) for _, t in pod_templates(obj)}
        for tier in sorted(named - tiers - {""}):
            yield Finding(
                f"TPU {obj.ref} uses priority tier '{tier}', which is not declared (tiers: {known}); use one of them "
                "(give the platform's manifests too).",
                obj,
            )


def tier_declared_cel(context: AdmissionContext) -> list[CelValidation]:
    tiers = cel_list(context.tiers)
    return [
        CelValidation(
            expression=(
                f"(variables.priority == '' || variables.priority in {tiers}) && variables.templates.all(t, "
                f"t.priorityClass == '' || t.priorityClass in {tiers})"
            ),
            message=f"TPU workloads must use a declared priority tier ({', '.join(context.tiers)}).",
            message_expression=(
                f"'TPU ' + variables.ref + ' uses a priority tier that is not declared (label or pod "
                f"priorityClassName); use one of: {', '.join(context.tiers)}.'"
            ),
        )
    ]


def check_exclusive_topology(obj: KubeObject, cfg: Config) -> Iterator[str]:
    if obj.kind != "JobSet" or not is_tpu_workload(obj):
        return
    key = str(cfg["exclusiveTopologyKey"])
    on_jobset = mapping(dig(obj.manifest, "metadata", "annotations")).get(EXCLUSIVE_TOPOLOGY_ANNOTATION) == key
    for job in items(dig(obj.manifest, "spec", "replicatedJobs")):
        template = mapping(dig(job, "template", "spec", "template"))
        on_job = mapping(dig(job, "template", "metadata", "annotations")).get(EXCLUSIVE_TOPOLOGY_ANNOTATION) == key
        if pod_targets_tpu(template) and is_multi_host(template) and not (on_jobset or on_job):
            yield (
                f"TPU {obj.ref} replicatedJobs[{dig(job, 'name', default='?')}] runs on a multi-host slice but lacks "
                f"annotation {EXCLUSIVE_TOPOLOGY_ANNOTATION}: {key}; add it so each replicated job gets whole "
                "slices (node pools) to itself."
            )


def exclusive_topology_cel(context: AdmissionContext) -> list[CelValidation]:
    annotation, key = cel_string(EXCLUSIVE_TOPOLOGY_ANNOTATION), cel_string(context.exclusive_topology_key)
    on_jobset = f"({annotation} in variables.annotations && variables.annotations[{annotation}] == {key})"
    return [
        CelValidation(
            expression=(
                f"{on_jobset} || variables.shapes.all(x, x.tpu != 'true' || x.multiHost != 'true' || "
                f"x.exclusiveTopology == {key})"
            ),
            message=(
                f"TPU JobSets on multi-host slices must set annotation {EXCLUSIVE_TOPOLOGY_ANNOTATION}: "
                f"{context.exclusive_topology_key}."
            ),
            message_expression=(
                f"'TPU ' + variables.ref + ' runs on a multi-host slice but lacks annotation "
                f"{EXCLUSIVE_TOPOLOGY_ANNOTATION}: {context.exclusive_topology_key}; add it so each replicated job "
                "gets whole slices (node pools) to itself.'"
            ),
        )
    ]


def check_v6e_shape(obj: KubeObject, cfg: Config) -> Iterator[str]:
    if not is_tpu_workload(obj):
        return
    jobs: list[tuple[str, Mapping[str, Any]]] = []
    if obj.kind == "JobSet":
        jobs = [
            (f"replicatedJobs[{dig(j, 'name', default=i)}]", mapping(dig(j, "template", "spec")))
            for i, j in enumerate(items(dig(obj.manifest, "spec", "replicatedJobs")))
        ]
    elif obj.kind == "Job":
        jobs = [("spec", mapping(dig(obj.manifest, "spec")))]
    else:
        jobs = [("pod", {"template": obj.manifest})]
    for where, job in jobs:
        template = mapping(job.get("template"))
        if not pod_targets_tpu(template):
            continue
        key = shape_key(template)
        if key not in shape_vms():
            accelerator, topology, machine, chips = key.split("|")
            yield (
                f"TPU {obj.ref} {where} pods (accelerator '{accelerator}', topology '{topology}'"
                f"{f', {machine}' if machine else ''}, {chips} {TPU_RESOURCE}) fit no v6e slice; select "
                f"{TPU_ACCELERATOR_LABEL}: {v6e.ACCELERATOR} and a {TPU_TOPOLOGY_LABEL} (2x4 also "
                f"{INSTANCE_TYPE_LABEL}), and request the chips of one VM of it ({SHAPE_HINT})."
            )
            continue
        if obj.kind == "Pod":
            continue
        vms = shape_vms()[key]
        parallelism, completions = (as_number(job.get(field)) for field in ("parallelism", "completions"))
        parallelism = 1.0 if parallelism is None else parallelism
        completions = 1.0 if completions is None else completions
        if parallelism != vms or completions != vms:
            topology = selector(template, TPU_TOPOLOGY_LABEL)
            yield (
                f"TPU {obj.ref} {where} has parallelism {int(parallelism)} and completions {int(completions)} but a "
                f"{topology} slice has {vms} VM{'s' if vms > 1 else ''}; set both to {vms} (one pod per VM)."
            )


def v6e_shape_cel(context: AdmissionContext) -> list[CelValidation]:
    return [
        CelValidation(
            expression="variables.shapes.all(x, x.tpu != 'true' || x.known == 'true')",
            message=f"TPU pods must select a v6e slice and request the chips of one VM of it ({SHAPE_HINT}).",
            message_expression=(
                f"'TPU ' + variables.ref + ' pods fit no v6e slice; select {TPU_ACCELERATOR_LABEL}: {v6e.ACCELERATOR} "
                f"and a {TPU_TOPOLOGY_LABEL} (2x4 also {INSTANCE_TYPE_LABEL}), and request the chips of one VM of "
                f"it in {TPU_RESOURCE} ({SHAPE_HINT}).'"
            ),
        ),
        CelValidation(
            expression=(
                "variables.shapes.all(x, x.known != 'true' || (x.parallelism == x.vms && x.completions == x.vms))"
            ),
            message="TPU jobs must set parallelism and completions to the number of VMs of their slice.",
            message_expression=(
                "'TPU ' + variables.ref + ' must set parallelism and completions to the number of VMs of its slice "
                f"(one pod per VM: {SHAPE_HINT}).'"
            ),
            kinds=frozenset({"JobSet", "Job"}),
        ),
    ]


_WORKLOAD_CONFIG = {
    "exclusiveTopologyKey": {
        "type": "string",
        "default": DEFAULT_EXCLUSIVE_TOPOLOGY_KEY,
        "description": "Node label the exclusive-topology annotation must name.",
    },
}

TPU_WORKLOAD_REQUIRE_QUEUE_NAME = ObjectRule(
    name="tpu-workload-require-queue-name",
    description=f"TPU workloads (JobSets, Jobs, Pods) must carry the {QUEUE_NAME_LABEL} label.",
    family=FAMILY,
    tags=("kueue", "tpu-workload"),
    kinds=WORKLOAD_KINDS,
    check=check_queue_name,
    admission=queue_name_cel,
)
TPU_WORKLOAD_QUEUE_DECLARED = PictureRule(
    name="tpu-workload-queue-declared",
    description="The LocalQueue a TPU workload names must be declared in its namespace.",
    family=FAMILY,
    tags=("kueue", "tpu-workload"),
    check=check_queue_declared,
    admission=queue_declared_cel,
    config={
        "externalLocalQueues": {
            "type": "array",
            "items": {"type": "string"},
            "default": [],
            "description": "LocalQueues (namespace/name) declared outside the objects checked.",
        },
    },
)
TPU_WORKLOAD_PRIORITY_MATCHES = ObjectRule(
    name="tpu-workload-priority-label-matches-pods",
    description=(
        f"TPU workloads must set the {KUEUE_PRIORITY_LABEL} label and give every pod the same priorityClassName."
    ),
    family=FAMILY,
    tags=("priority", "tpu-workload"),
    kinds=WORKLOAD_KINDS,
    check=check_priority_matches,
    admission=priority_matches_cel,
)
TPU_WORKLOAD_PRIORITY_TIER_DECLARED = PictureRule(
    name="tpu-workload-priority-tier-declared",
    description="The priority tier a TPU workload names (label and pods) must be a declared tier.",
    family=FAMILY,
    tags=("priority", "tpu-workload"),
    check=check_tier_declared,
    admission=tier_declared_cel,
    config={
        "externalPriorityTiers": {
            "type": "array",
            "items": {"type": "string"},
            "default": [],
            "description": "Priority tiers declared outside the objects checked.",
        },
    },
)
JOBSET_EXCLUSIVE_TOPOLOGY = ObjectRule(
    name="jobset-v1alpha2-tpu-multi-host-exclusive-topology",
    description=(
        f"TPU JobSets on multi-host slices must carry the {EXCLUSIVE_TOPOLOGY_ANNOTATION} annotation naming the "
        "node pool label."
    ),
    family=FAMILY,
    tags=("jobset", "tpu-workload"),
    kinds=frozenset({"JobSet"}),
    check=check_exclusive_topology,
    admission=exclusive_topology_cel,
    config=_WORKLOAD_CONFIG,
)
TPU_WORKLOAD_FITS_V6E_SHAPE = ObjectRule(
    name="tpu-workload-fits-v6e-shape",
    description=(
        "TPU pods must select a v6e slice and ask for the chips of one VM of it; TPU jobs run one pod per VM "
        "(parallelism and completions)."
    ),
    family=FAMILY,
    tags=("tpu", "tpu-workload"),
    kinds=WORKLOAD_KINDS,
    check=check_v6e_shape,
    admission=v6e_shape_cel,
)

RULES = (
    TPU_WORKLOAD_REQUIRE_QUEUE_NAME,
    TPU_WORKLOAD_QUEUE_DECLARED,
    TPU_WORKLOAD_PRIORITY_MATCHES,
    TPU_WORKLOAD_PRIORITY_TIER_DECLARED,
    JOBSET_EXCLUSIVE_TOPOLOGY,
    TPU_WORKLOAD_FITS_V6E_SHAPE,
)
