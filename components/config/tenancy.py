"""Teams: which namespaces belong to whom, the highest priority tier each may use, and who gets their role.

The entitlement is platform configuration, not something a team declares: every front end (the Pulumi policy
pack, ``gke-tpu-priority-check`` and the in-cluster admission policy) reads it from what the stack declares,
and the hotswap reconciler gets it too, so a workload above its entitlement never preempts anyone.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import Field

from gke_tpu_priority.components.config.base import ConfigModel
from gke_tpu_priority.components.config.priorities import NAME_PATTERN, PriorityTier
from gke_tpu_priority.components.config.queues import LocalQueueSpec

SUBJECT_PATTERN = r"^\S+$"


class TeamSpec(ConfigModel):
    name: str = Field(pattern=NAME_PATTERN, max_length=63, description="Team name (names its RoleBindings).")
    namespaces: list[str] = Field(
        min_length=1,
        description="The team's namespaces; each must have a LocalQueue (`queues.localQueues`), and a namespace "
        "belongs to at most one team.",
    )
    max_tier: str | None = Field(
        default=None,
        description="The highest priority tier the team's TPU workloads may use (a `priorities[].name`): tiers of "
        "a higher value are refused on create and update by every front end, and the hotswap reconciler never "
        "preempts for a workload above it. Unset: every tier.",
    )
    may_protect: bool = Field(
        default=False,
        description="Whether the team may set the reconciler's `hotswap.gke-tpu-priority.io/protect` annotation "
        "on its JobSets (never a hotswap victim). Off: the admission policy refuses it and the reconciler ignores "
        "it in the team's namespaces, so a team cannot opt its work out of eviction.",
    )
    groups: list[str] = Field(
        default_factory=list,
        description="Groups (e.g. Google Groups for RBAC: `team-a@example.com`) bound to the team role in each of "
        "the team's namespaces: JobSets and Jobs through Kueue, read access to their Workloads, LocalQueues, Pods "
        "and Events; nothing else.",
    )
    users: list[str] = Field(default_factory=list, description="Users bound to the team role, as `groups`.")


def tier_values(tiers: Sequence[PriorityTier]) -> dict[str, int]:
    return {t.name: t.value for t in tiers}


def allowed_tiers(team: TeamSpec, tiers: Sequence[PriorityTier]) -> tuple[str, ...]:
    """The tiers a team may use, highest first: those at or below its `maxTier` (every tier when unset)."""
    values = tier_values(tiers)
    ceiling = values.get(team.max_tier, max(values.values(), default=0)) if team.max_tier else None
    ordered = sorted(tiers, key=lambda t: -t.value)
    return tuple(t.name for t in ordered if ceiling is None or t.value <= ceiling)


def team_problems(
    teams: Sequence[TeamSpec], tiers: Sequence[PriorityTier], local_queues: Sequence[LocalQueueSpec]
) -> list[str]:
    """Problems of `teams` against the stack's tiers and LocalQueues, each with its config path."""
    problems: list[str] = []
    values = tier_values(tiers)
    queue_namespaces = sorted({lq.namespace for lq in local_queues})
    names: dict[str, int] = {}
    owner: dict[str, int] = {}
    for i, team in enumerate(teams):
        if team.name in names:
            problems.append(f".teams[{i}].name: {team.name!r} is already used by teams[{names[team.name]}]")
        names.setdefault(team.name, i)
        if team.max_tier is not None and team.max_tier not in values:
            problems.append(
                f".teams[{i}].maxTier: {team.max_tier!r} is not a priority tier of this stack "
                f"(tiers: {', '.join(sorted(values, key=lambda n: -values[n]))})"
            )
        for j, ns in enumerate(team.namespaces):
            if ns not in queue_namespaces:
                problems.append(
                    f".teams[{i}].namespaces[{j}]: {ns!r} has no LocalQueue, so no TPU work can run there "
                    f"(namespaces with one: {', '.join(queue_namespaces) or 'none'}); add a LocalQueue in "
                    "`queues.localQueues` or remove the namespace"
                )
            if ns in owner and owner[ns] != i:
                problems.append(
                    f".teams[{i}].namespaces[{j}]: {ns!r} already belongs to teams[{owner[ns]}] "
                    f"({teams[owner[ns]].name!r}); a namespace has one entitlement, so one team"
                )
            owner.setdefault(ns, i)
        for k, subject in enumerate([*team.groups, *team.users]):
            if not subject.strip() or any(c.isspace() for c in subject):
                field = f"groups[{k}]" if k < len(team.groups) else f"users[{k - len(team.groups)}]"
                problems.append(f".teams[{i}].{field}: {subject!r} is not a user or group name (no spaces)")
    if teams:
        for i, lq in enumerate(local_queues):
            if lq.namespace not in owner:
                problems.append(
                    f".queues.localQueues[{i}].namespace: {lq.namespace!r} belongs to no team; once `teams` is set "
                    "every namespace with a LocalQueue needs one (its entitlement): add it to a team's `namespaces`"
                )
    return problems


def namespace_entitlements(teams: Sequence[TeamSpec], tiers: Sequence[PriorityTier]) -> dict[str, tuple[str, ...]]:
    """Namespace -> the tiers its workloads may use, highest first; namespaces of no team are not listed."""
    return {ns: allowed_tiers(team, tiers) for team in teams for ns in team.namespaces}


def namespace_max_priority(teams: Sequence[TeamSpec], tiers: Sequence[PriorityTier]) -> dict[str, int]:
    """Namespace -> the highest priority value its workloads may have (teams with a `maxTier` only)."""
    values = tier_values(tiers)
    return {ns: values[t.max_tier] for t in teams if t.max_tier in values for ns in t.namespaces}


def protecting_namespaces(teams: Sequence[TeamSpec]) -> tuple[str, ...]:
    """Namespaces whose teams may set the protect annotation."""
    return tuple(sorted(ns for t in teams if t.may_protect for ns in t.namespaces))
