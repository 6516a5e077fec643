"""Hotswap readiness: a TPU JobSet of a tier the reconciler protects must survive the restart that moves it.

Hotswap moves a disrupted JobSet onto slices it freed by letting JobSet restart it. A JobSet with no failure policy
fails on its first failed Job, and one with ``maxRestarts: 0`` fails on the first counted restart unless a rule
leaves infrastructure failures uncounted (``RestartJobSetAndIgnoreMaxRestarts`` / ``RestartJobAndIgnoreMaxRestarts``,
JobSet v0.12 ``pkg/controllers/failure_policy.go``). Such a JobSet fails instead of recovering, so it is refused.

Covered tiers are those the reconciler protects: every tier above the lowest, since a preemptor needs a victim of
strictly lower priority (``hotswap/planner/victims.py``) and the lowest tier never has one.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from .base import (
    AdmissionContext,
    CelValidation,
    Config,
    Finding,
    KubeObject,
    PictureRule,
    as_number,
    cel_list,
    cel_string,
    dig,
    items,
    mapping,
)
from .priority_tiers import priority_classes, workload_priority_classes
from .tpu_workloads import FAMILY, is_tpu_workload, workload_tier

UNCOUNTED_ACTIONS = ("RestartJobSetAndIgnoreMaxRestarts", "RestartJobAndIgnoreMaxRestarts")
"""Failure-policy actions that restart without spending ``maxRestarts``."""

NO_FAILURE_POLICY = "it has no spec.failurePolicy, so its first failed Job fails it"
NO_RESTART_BUDGET = "its spec.failurePolicy.maxRestarts is 0 and no rule leaves infrastructure failures uncounted"
FIX = (
    "set spec.failurePolicy.maxRestarts to at least 1, or add a failurePolicy rule with action "
    "RestartJobSetAndIgnoreMaxRestarts for infrastructure failures (onJobFailureReasons: [PodFailurePolicy], with "
    "a pod failure policy that fails the Job on DisruptionTarget), so the restart that moves it does not fail it"
)


def hotswap_tiers(objects: Sequence[KubeObject], cfg: Config) -> set[str]:
    """The configured tiers, else every declared tier whose value is above the lowest declared tier's."""
    configured = set(cfg.get("hotswapTiers") or [])
    if configured:
        return configured
    kueue = {c.name for c in workload_priority_classes(objects)}
    values = {
        c.name: value
        for c in priority_classes(objects)
        if c.name in kueue and (value := as_number(dig(c.manifest, "value"))) is not None
    }
    lowest = min(values.values(), default=None)
    return {name for name, value in values.items() if lowest is not None and value > lowest}


def restart_problem(jobset: KubeObject) -> str | None:
    """Why the JobSet cannot survive one infrastructure restart, or None when it can."""
    policy = dig(jobset.manifest, "spec", "failurePolicy")
    if policy is None:
        return NO_FAILURE_POLICY
    max_restarts = as_number(dig(policy, "maxRestarts"))
    if max_restarts is not None and max_restarts > 0:
        return None
    if any(mapping(rule).get("action") in UNCOUNTED_ACTIONS for rule in items(dig(policy, "rules"))):
        return None
    return NO_RESTART_BUDGET


def check_restartable(objects: Sequence[KubeObject], cfg: Config) -> Iterator[Finding]:
    tiers = hotswap_tiers(objects, cfg)
    for obj in objects:
        if obj.kind != "JobSet" or not is_tpu_workload(obj):
            continue
        tier = workload_tier(obj)
        problem = restart_problem(obj) if tier in tiers else None
        if problem:
            yield Finding(
                f"TPU {obj.ref} is in tier '{tier}', which hotswap protects by restarting it on healthy slices, "
                f"but {problem}; {FIX}.",
                obj,
            )


def restartable_cel(context: AdmissionContext) -> list[CelValidation]:
    if not context.hotswap_tiers:
        return []
    policy = "object.spec.failurePolicy"
    survives = (
        f"has({policy}) && ((has({policy}.maxRestarts) && {policy}.maxRestarts > 0) || (has({policy}.rules) && "
        f"{policy}.rules.exists(r, has(r.action) && r.action in {cel_list(UNCOUNTED_ACTIONS)})))"
    )
    return [
        CelValidation(
            expression=f"!(variables.priority in {cel_list(context.hotswap_tiers)}) || ({survives})",
            message=(
                f"TPU JobSets in hotswap-protected tiers ({', '.join(context.hotswap_tiers)}) must survive a restart: "
                "spec.failurePolicy with maxRestarts >= 1 or a RestartJobSetAndIgnoreMaxRestarts rule."
            ),
            message_expression=(
                "'TPU ' + variables.ref + ' is in tier \\'' + variables.priority + '\\', which hotswap protects by "
                "restarting it on healthy slices, but ' + (has(object.spec.failurePolicy) ? "
                f"{cel_string(NO_RESTART_BUDGET)} : {cel_string(NO_FAILURE_POLICY)}) + '; {FIX}.'"
            ),
            kinds=frozenset({"JobSet"}),
        )
    ]


JOBSET_HOTSWAP_RESTARTABLE = PictureRule(
    name="jobset-v1alpha2-tpu-hotswap-restartable",
    description=(
        "TPU JobSets in a tier hotswap protects must survive one infrastructure restart: a failure policy with "
        "maxRestarts >= 1, or a rule that leaves infrastructure failures uncounted."
    ),
    family=FAMILY,
    tags=("jobset", "hotswap", "tpu-workload"),
    check=check_restartable,
    admission=restartable_cel,
    config={
        "hotswapTiers": {
            "type": "array",
            "items": {"type": "string"},
            "default": [],
            "description": "Tiers hotswap protects; empty: every declared tier above the lowest.",
        },
    },
)

RULES = (JOBSET_HOTSWAP_RESTARTABLE,)
