"""PriorityTiers: a PriorityClass and a Kueue WorkloadPriorityClass per tier, same name and value."""

from typing import Any, TypedDict

import pulumi
import pulumi_kubernetes as k8s

from gke_tpu_priority.components.config import PlatformConfig, parse_platform_config
from gke_tpu_priority.components.config.priorities import MAX_USER_PRIORITY, HotswapMode, PriorityTier
from gke_tpu_priority.components.kube.immutable import replacement_options
from gke_tpu_priority.components.kube.objects import KubernetesObject, inherited_depends_on
from gke_tpu_priority.components.schema_types import PlatformConfig as PlatformSettings
from gke_tpu_priority.policies.rules.spot_tiers import ALLOW_SPOT_ANNOTATION

TYPE_TOKEN = "gke-tpu-priority:index:PriorityTiers"
KUEUE_API = "kueue.x-k8s.io/v1beta2"
TIER_LABEL = "gke-tpu-priority.io/priority-tier"
# PriorityClasses with this label (value "controllers") run platform controllers, never TPU work.
ROLE_LABEL = "gke-tpu-priority.io/priority-class-role"
CONTROLLER_HEADROOM = 1_000_000


class PriorityTiersArgs(TypedDict):
    platform: PlatformSettings
    """The platform settings, in the schema of the `gke-tpu-priority:platform` stack setting (see README)."""


def preemption_policy(tier: PriorityTier, mode: HotswapMode) -> str:
    # In reconciler mode only the reconciler preempts TPU work (whole slices, through Kueue); kube-scheduler's
    # per-pod preemption would break slices apart, so no tier may use it.
    if mode is HotswapMode.RECONCILER or not tier.preempts:
        return "Never"
    return "PreemptLowerPriority"


def priority_class(tier: PriorityTier, mode: HotswapMode) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": tier.name, "labels": {TIER_LABEL: tier.name}},
        "value": tier.value,
        "globalDefault": tier.global_default,
        "preemptionPolicy": preemption_policy(tier, mode),
        "description": tier.description,
    }


def controller_priority_class(
    config: PlatformConfig, name: str, description: str, labels: dict[str, str] | None = None
) -> dict[str, Any]:
    """A class for a platform controller: above every TPU tier (a preempted protector protects nothing)."""
    top = max(t.value for t in config.priorities)
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {
            "name": name,
            "labels": {"app.kubernetes.io/managed-by": "gke-tpu-priority", **(labels or {}), ROLE_LABEL: "controllers"},
        },
        "value": min(MAX_USER_PRIORITY, top + CONTROLLER_HEADROOM),
        "globalDefault": False,
        # Controllers run on the system pool and never need to push anything off it.
        "preemptionPolicy": "Never",
        "description": description,
    }


def workload_priority_class(tier: PriorityTier) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": tier.name, "labels": {TIER_LABEL: tier.name}}
    if not tier.spot:
        # The policy pack and the CLI read which tiers stay off spot from the declared objects.
        metadata["annotations"] = {ALLOW_SPOT_ANNOTATION: "false"}
    return {
        "apiVersion": KUEUE_API,
        "kind": "WorkloadPriorityClass",
        "metadata": metadata,
        "value": tier.value,
        "description": tier.description,
    }


class PriorityTiers(pulumi.ComponentResource):
    """One PriorityClass and one WorkloadPriorityClass per tier, so pod and Kueue priority never disagree.

    Pass the Kueue install in `opts.depends_on`: its chart brings the WorkloadPriorityClass CRD.
    """

    tier_names: pulumi.Output[list[str]]
    """Tier names, highest priority first."""

    def __init__(
        self,
        name: str,
        args: PriorityTiersArgs,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__(TYPE_TOKEN, name, {}, opts)
        config: PlatformConfig = parse_platform_config(args["platform"])
        outer = inherited_depends_on(opts)
        mode = config.hotswap.mode
        self.priority_classes: list[k8s.scheduling.v1.PriorityClass] = []
        self.workload_priority_classes: list[KubernetesObject] = []
        tiers = sorted(config.priorities, key=lambda t: -t.value)
        for tier in tiers:
            # Fixed names are referenced by pods and JobSets; a replacement must delete the old one first.
            fixed = pulumi.ResourceOptions(parent=self, depends_on=outer, delete_before_replace=True)
            pc = priority_class(tier, mode)
            self.priority_classes.append(
                k8s.scheduling.v1.PriorityClass(
                    f"{name}-pc-{tier.name}",
                    metadata=pc["metadata"],
                    value=pc["value"],
                    global_default=pc["globalDefault"],
                    preemption_policy=pc["preemptionPolicy"],
                    description=pc["description"],
                    # value and preemptionPolicy are immutable: `hotswap.mode` flips every tier's policy.
                    opts=pulumi.ResourceOptions.merge(fixed, replacement_options(pc)),
                )
            )
            # `opts.depends_on` carries the Kueue install, whose chart brings the WorkloadPriorityClass CRD.
            self.workload_priority_classes.append(
                KubernetesObject(f"{name}-wpc-{tier.name}", workload_priority_class(tier), fixed)
            )
        self.tier_names = pulumi.Output.from_input([t.name for t in tiers])
        self.register_outputs({"tier_names": self.tier_names})
