"""Priority tiers: PriorityClass values, one lowest global default, PriorityClass <-> WorkloadPriorityClass pairs."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from .base import (
    KUEUE_GROUP,
    Config,
    Finding,
    KubeObject,
    ObjectRule,
    PictureRule,
    as_number,
    dig,
    of_kind,
    pod_templates,
    show_number,
    targets_tpu,
)

FAMILY = "priority tiers"

MAX_USER_PRIORITY = 1_000_000_000
"""PriorityClass values above this are reserved for system classes (scheduling.k8s.io API validation)."""

# A PriorityClass labelled with this (value "controllers") is for platform controllers, never for TPU work.
PRIORITY_CLASS_ROLE_LABEL = "gke-tpu-priority.io/priority-class-role"


def priority_classes(objects: Sequence[KubeObject]) -> list[KubeObject]:
    return of_kind(objects, "PriorityClass", "scheduling.k8s.io")


def workload_priority_classes(objects: Sequence[KubeObject]) -> list[KubeObject]:
    return of_kind(objects, "WorkloadPriorityClass", KUEUE_GROUP)


def check_priority_class_value(obj: KubeObject, cfg: Config) -> Iterator[str]:
    value = as_number(dig(obj.manifest, "value"))
    if value is None:
        yield f"{obj.label} has no numeric 'value'; set an integer priority."
        return
    high, low = float(cfg["maxValue"]), float(cfg["minValue"])
    if not low <= value <= high:
        yield (
            f"{obj.label} has value {show_number(value)}, outside the allowed band "
            f"[{show_number(low)}, {show_number(high)}]; pick a value inside it (user classes must be "
            f"<= {MAX_USER_PRIORITY:,})."
        )
    allowed = [float(v) for v in cfg.get("allowedValues") or []]
    if allowed and value not in allowed:
        shown = ", ".join(show_number(v) for v in allowed)
        yield f"{obj.label} has value {show_number(value)}, which is not one of the allowed values ({shown})."


def check_global_default(objects: Sequence[KubeObject], cfg: Config) -> Iterator[Finding]:
    classes = priority_classes(objects)
    defaults = [c for c in classes if dig(c.manifest, "globalDefault") is True]
    if len(defaults) > 1:
        names = ", ".join(sorted(c.name for c in defaults))
        yield Finding(f"PriorityClasses {names} all set globalDefault: true; keep it on at most one (the lowest).")
    values = {c.name: as_number(dig(c.manifest, "value")) for c in classes}
    known = [v for v in values.values() if v is not None]
    for default in defaults:
        value = values[default.name]
        if value is not None and known and value > min(known):
            lowest = min((n for n, v in values.items() if v is not None), key=lambda n: values[n] or 0.0)
            yield Finding(
                f"{default.label} is the global default but has value {show_number(value)}, above "
                f"PriorityClass '{lowest}' ({show_number(min(known))}); make the lowest class the default.",
                default,
            )


def exempt_priority_classes(objects: Sequence[KubeObject], cfg: Config) -> set[str]:
    """Classes that are not TPU-work classes: configured ones, labelled controller classes, and those only
    non-TPU pods use."""
    exempt = set(cfg.get("exemptPriorityClasses") or [])
    for obj in priority_classes(objects):
        if dig(obj.manifest, "metadata", "labels", PRIORITY_CLASS_ROLE_LABEL) == "controllers":
            exempt.add(obj.name)
    used_by_tpu: set[str] = set()
    used_elsewhere: set[str] = set()
    for obj in objects:
        for _, template in pod_templates(obj):
            pc = dig(template, "spec", "priorityClassName")
            if isinstance(pc, str):
                (used_by_tpu if targets_tpu(obj) else used_elsewhere).add(pc)
    return exempt | (used_elsewhere - used_by_tpu)


def check_priority_class_pairs(objects: Sequence[KubeObject], cfg: Config) -> Iterator[Finding]:
    """Every TPU PriorityClass has a WorkloadPriorityClass of the same name and value, and vice versa."""
    exempt = exempt_priority_classes(objects, cfg)
    pods = {c.name: c for c in priority_classes(objects) if c.name not in exempt and not c.name.startswith("system-")}
    kueue = {c.name: c for c in workload_priority_classes(objects)}
    for name, pod_class in sorted(pods.items()):
        partner = kueue.get(name)
        if partner is None:
            yield Finding(
                f"{pod_class.label} has no WorkloadPriorityClass named '{name}'; declare one with the same "
                f"value so Kueue and kube-scheduler rank TPU work identically (or exempt the class).",
                pod_class,
            )
        elif as_number(dig(partner.manifest, "value")) != as_number(dig(pod_class.manifest, "value")):
            yield Finding(
                f"{pod_class.label} has value {dig(pod_class.manifest, 'value')} but {partner.label} has "
                f"{dig(partner.manifest, 'value')}; give both the same value.",
                pod_class,
            )
    for name, workload_class in sorted(kueue.items()):
        if name not in pods and name not in exempt:
            yield Finding(
                f"{workload_class.label} has no PriorityClass named '{name}'; declare one with the same value "
                "so pod preemption follows Kueue priority.",
                workload_class,
            )


def declared_tiers(objects: Sequence[KubeObject], cfg: Config) -> set[str]:
    """Tier names: a PriorityClass and a WorkloadPriorityClass of the same name (plus configured external tiers)."""
    pods = {c.name for c in priority_classes(objects)}
    kueue = {c.name for c in workload_priority_classes(objects)}
    return (pods & kueue) | set(cfg.get("externalPriorityTiers") or [])


PRIORITY_CLASS_VALUE_IN_BAND = ObjectRule(
    name="kubernetes-scheduling-v1-priorityclass-value-in-band",
    description="PriorityClass values must lie in the user range (at most 1,000,000,000) and in the configured band.",
    family=FAMILY,
    tags=("priority",),
    kinds=frozenset({"PriorityClass"}),
    check=check_priority_class_value,
    config={
        "maxValue": {
            "type": "number",
            "default": MAX_USER_PRIORITY,
            "maximum": MAX_USER_PRIORITY,
            "description": "Highest value a PriorityClass may use.",
        },
        "minValue": {"type": "number", "default": -2147483648, "description": "Lowest value allowed."},
        "allowedValues": {
            "type": "array",
            "items": {"type": "number"},
            "default": [],
            "description": "When non-empty, the only values PriorityClasses may use.",
        },
    },
)

PRIORITY_CLASS_SINGLE_GLOBAL_DEFAULT = PictureRule(
    name="kubernetes-scheduling-v1-priorityclass-single-global-default",
    description="At most one PriorityClass may be the global default, and it must have the lowest value.",
    family=FAMILY,
    tags=("priority",),
    check=check_global_default,
)

PRIORITY_CLASSES_MATCH_WORKLOAD_PRIORITY_CLASSES = PictureRule(
    name="kueue-workloadpriorityclass-matches-priorityclass",
    description=(
        "Every PriorityClass used for TPU work must have a Kueue WorkloadPriorityClass of the same name and value, "
        "and every WorkloadPriorityClass a matching PriorityClass."
    ),
    family=FAMILY,
    tags=("priority", "kueue"),
    check=check_priority_class_pairs,
    config={
        "exemptPriorityClasses": {
            "type": "array",
            "items": {"type": "string"},
            "default": [],
            "description": "PriorityClasses that are not for TPU work (for example the reconciler's own class).",
        },
    },
)

RULES = (
    PRIORITY_CLASS_VALUE_IN_BAND,
    PRIORITY_CLASS_SINGLE_GLOBAL_DEFAULT,
    PRIORITY_CLASSES_MATCH_WORKLOAD_PRIORITY_CLASSES,
)
