"""Priority tiers: one PriorityClass and one WorkloadPriorityClass per tier, same name and value."""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field, field_validator

from gke_tpu_priority.components.config.base import ConfigModel

NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
MAX_USER_PRIORITY = 1_000_000_000  # above this Kubernetes reserves values for system classes


class HotswapMode(StrEnum):
    RECONCILER = "reconciler"
    SCHEDULER_ASSISTED = "scheduler-assisted"


# PriorityClasses the platform declares for its own controllers (components/kueue, components/reconciler): a tier
# of the same name would be a second PriorityClass with that name, and one of the two would silently win.
PLATFORM_PRIORITY_CLASSES = {
    "tpu-platform-controllers": "Kueue's and JobSet's controllers",
    "hotswap-reconciler": "the hotswap reconciler",
}


class PriorityTier(ConfigModel):
    name: str = Field(pattern=NAME_PATTERN, max_length=63, description="Tier name; pods and JobSets refer to it.")

    @field_validator("name")
    @classmethod
    def _not_the_platforms_own(cls, name: str) -> str:
        # A field check, not a cross-field one: it is reported in the same run as every other field mistake.
        if name in PLATFORM_PRIORITY_CLASSES:
            raise ValueError(
                f"{name!r} is the PriorityClass of {PLATFORM_PRIORITY_CLASSES[name]}, which the platform declares "
                "itself; name the tier something else"
            )
        return name

    value: int = Field(ge=-2_147_483_648, le=MAX_USER_PRIORITY, description="Priority value; higher wins.")
    description: str = Field(min_length=1, description="What the tier is for, shown to users of the cluster.")
    preempts: bool = Field(
        default=True,
        description="Whether work in this tier may take TPU slices from lower tiers (hotswap preemptor, or "
        "kube-scheduler preemption in `scheduler-assisted` mode). Tiers that may not preempt sit below all that may.",
    )
    global_default: bool = Field(
        default=False, description="Priority for pods that name no class; at most one tier, and the lowest."
    )
    spot: bool = Field(
        default=True,
        description="False keeps this tier's TPU work off spot capacity: the rule `tpu-workload-off-spot` (pack, CLI "
        "and admission policy) refuses a JobSet or Job of the tier whose pods do not exclude spot nodes (the JobSet "
        "builder's `allowSpot: false` does), so on a capacity ladder Kueue skips the spot rung for it. For long "
        "top-tier runs, which lose their progress since the last checkpoint whenever GCP reclaims a spot VM.",
    )


def default_tiers() -> list[PriorityTier]:
    # GKE's best-practice shape (low and high training tiers) plus an opportunistic tier for shared fleets.
    return [
        PriorityTier(
            name="best-effort",
            value=100_000,
            description="Opportunistic work on idle slices; preempted first, never preempts.",
            preempts=False,
        ),
        PriorityTier(
            name="training-low",
            value=1_000_000,
            description="Regular training; may be preempted by training-high.",
        ),
        PriorityTier(
            name="training-high",
            value=2_000_000,
            description="Critical training; hotswap frees slices for it when its infrastructure fails.",
        ),
    ]
