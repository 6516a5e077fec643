"""Tiers kept off spot: a TPU JobSet or Job of a tier the platform keeps off spot capacity must not be placeable there.

GCP reclaims spot VMs at any time, and a long top-tier run loses its progress since the last checkpoint each time.
On a capacity ladder with a spot rung, Kueue assigns the spot flavor to whatever fits first, by quota alone; it skips
that flavor only for a workload whose pods' required node affinity (or nodeSelector) rules out the flavor's node
labels (checked on Kueue v0.19.2 by e2e/test_flavor_assignment.py). So such a workload must say so itself: every
pod template either pins a capacity other than spot with a nodeSelector on ``gke-tpu-priority.io/capacity``, or has
a required node affinity each of whose terms excludes spot on that label (the JobSet builder's ``allowSpot: false``).

Which tiers: those whose WorkloadPriorityClass the stack annotates ``gke-tpu-priority.io/allow-spot: "false"``
(``priorities[].spot: false``), and ``spotFreeTiers`` of the policy configuration.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from .base import (
    AdmissionContext,
    CelValidation,
    Config,
    Finding,
    KubeObject,
    PictureRule,
    cel_list,
    cel_string,
    dig,
    items,
    mapping,
    pod_templates,
)
from .priority_tiers import workload_priority_classes
from .tpu_workloads import ADMISSION_KINDS, CAPACITY_LABEL, FAMILY, SPOT_CAPACITY, is_tpu_workload, workload_tier

ALLOW_SPOT_ANNOTATION = "gke-tpu-priority.io/allow-spot"
"""On a WorkloadPriorityClass the stack declares: "false" when the tier is kept off spot capacity."""
# No square brackets in the messages: the API server's refusal names the rule as "[rule]", and readers (and the e2e
# suite) take a bracketed word for a rule name.
FIX = (
    f"add a required node affinity each of whose terms excludes spot ({CAPACITY_LABEL} NotIn {SPOT_CAPACITY}), as "
    f"the JobSet builder's allowSpot: false (gke-tpu-jobset --no-spot) writes, or pin another "
    f"capacity with the nodeSelector {CAPACITY_LABEL}"
)


def spot_free_tiers(objects: Sequence[KubeObject], cfg: Config) -> set[str]:
    declared = {
        c.name
        for c in workload_priority_classes(objects)
        if str(mapping(dig(c.manifest, "metadata", "annotations")).get(ALLOW_SPOT_ANNOTATION, "")).lower() == "false"
    }
    return declared | set(cfg.get("spotFreeTiers") or [])


def _excludes_spot(expression: Mapping[str, Any]) -> bool:
    values = [str(v) for v in items(expression.get("values"))]
    if expression.get("key") != CAPACITY_LABEL:
        return False
    operator = expression.get("operator")
    return (operator == "NotIn" and SPOT_CAPACITY in values) or (operator == "In" and SPOT_CAPACITY not in values)


def off_spot(spec: Mapping[str, Any]) -> bool:
    """Whether the pod spec keeps its pods off spot capacity (see the module docstring)."""
    pinned = mapping(dig(spec, "nodeSelector")).get(CAPACITY_LABEL)
    if pinned is not None and pinned != SPOT_CAPACITY:
        return True
    required = dig(spec, "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution")
    terms = items(dig(required, "nodeSelectorTerms"))
    return bool(terms) and all(
        any(_excludes_spot(mapping(e)) for e in items(dig(term, "matchExpressions"))) for term in terms
    )


def check_off_spot(objects: Sequence[KubeObject], cfg: Config) -> Iterator[Finding]:
    tiers = spot_free_tiers(objects, cfg)
    if not tiers:
        return
    for obj in objects:
        if obj.kind not in ADMISSION_KINDS or not is_tpu_workload(obj):
            continue
        tier = workload_tier(obj)
        if tier not in tiers:
            continue
        if not all(off_spot(mapping(dig(template, "spec"))) for _, template in pod_templates(obj)):
            yield Finding(
                f"TPU {obj.ref} is in tier '{tier}', which the platform keeps off spot capacity, but its pods can "
                f"run on spot nodes; {FIX}.",
                obj,
            )


def off_spot_validations(context: AdmissionContext) -> list[CelValidation]:
    if not context.spot_free_tiers:
        return []
    return [
        CelValidation(
            expression=(
                f"!(variables.priority in {cel_list(context.spot_free_tiers)}) || "
                "variables.templates.all(t, t.offSpot == 'true')"
            ),
            message=(
                f"TPU workloads of tiers kept off spot ({', '.join(context.spot_free_tiers)}) must exclude spot "
                f"capacity: a required node affinity with {CAPACITY_LABEL} NotIn {SPOT_CAPACITY}."
            ),
            message_expression=(
                "'TPU ' + variables.ref + ' is in tier \\'' + variables.priority + '\\', which the platform keeps "
                f"off spot capacity, but its pods can run on spot nodes; ' + {cel_string(FIX)} + '.'"
            ),
            kinds=frozenset(ADMISSION_KINDS),
        )
    ]


TPU_WORKLOAD_OFF_SPOT = PictureRule(
    name="tpu-workload-off-spot",
    description=(
        "TPU JobSets and Jobs of a tier the platform keeps off spot capacity (priorities[].spot: false) must exclude "
        f"spot nodes: a required node affinity with {CAPACITY_LABEL} NotIn {SPOT_CAPACITY}."
    ),
    family=FAMILY,
    tags=("priority", "tpu-workload", "capacity"),
    check=check_off_spot,
    admission=off_spot_validations,
    config={
        "spotFreeTiers": {
            "type": "array",
            "items": {"type": "string"},
            "default": [],
            "description": "Tiers kept off spot besides those the stack annotates on their WorkloadPriorityClass.",
        },
    },
)

RULES = (TPU_WORKLOAD_OFF_SPOT,)
