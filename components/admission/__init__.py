"""TpuAdmissionPolicy: the TPU workload conventions enforced by the API server (ValidatingAdmissionPolicy + binding).

The CEL comes from the policy rule set (``policies.admission``), with the stack's tiers and LocalQueues written
into it, so the pack, the CI command and the cluster apply the same rules to the same objects.
"""

from typing import Any, TypedDict

import pulumi

from gke_tpu_priority.components import tpu_shapes
from gke_tpu_priority.components.config import PlatformConfig, parse_platform_config
from gke_tpu_priority.components.config.resolved import effective_local_queues
from gke_tpu_priority.components.config.tenancy import namespace_entitlements, protecting_namespaces
from gke_tpu_priority.components.kube.objects import KubernetesObject, inherited_depends_on
from gke_tpu_priority.components.schema_types import PlatformConfig as PlatformSettings
from gke_tpu_priority.policies.admission import (
    POLICY_KINDS,
    SYSTEM_NAMESPACES,
    AdmissionSettings,
    validating_admission_policy,
    validating_admission_policy_binding,
)
from gke_tpu_priority.policies.rules.base import AdmissionContext

TYPE_TOKEN = "gke-tpu-priority:index:TpuAdmissionPolicy"


class TpuAdmissionPolicyArgs(TypedDict):
    platform: PlatformSettings
    """The platform settings, in the schema of the `gke-tpu-priority:platform` stack setting (see README)."""


def admission_settings(config: PlatformConfig) -> AdmissionSettings:
    """What the policy needs from the stack: tiers, LocalQueues by namespace, controller namespaces, action."""
    queues: dict[str, set[str]] = {}
    for local_queue in effective_local_queues(config.queues):
        queues.setdefault(local_queue.namespace, set()).add(local_queue.name)
    lowest = min(t.value for t in config.priorities)
    tiers = sorted(config.priorities, key=lambda t: -t.value)
    context = AdmissionContext(
        tiers=tuple(t.name for t in tiers),
        local_queues={ns: tuple(sorted(names)) for ns, names in sorted(queues.items())},
        exclusive_topology_key=tpu_shapes.NODEPOOL_LABEL,
        # A preemptor needs a strictly lower-priority victim: hotswap protects every tier above the lowest.
        hotswap_tiers=tuple(t.name for t in tiers if t.value > lowest),
        entitlements=namespace_entitlements(config.teams, config.priorities),
        # Without teams, nobody is restricted (as before teams existed); with them, only teams allowed to.
        protecting_namespaces=protecting_namespaces(config.teams) if config.teams else None,
        spot_free_tiers=tuple(t.name for t in tiers if not t.spot),
    )
    return AdmissionSettings(
        context=context,
        controller_namespaces=(config.kueue.namespace, config.jobset.namespace),
        action=config.admission_policy.action,
        exempt_namespaces=(*SYSTEM_NAMESPACES, *config.admission_policy.exempt_namespaces),
        platform_namespaces=(config.hotswap.namespace,) if config.hotswap.enabled else (),
    )


def admission_objects(config: PlatformConfig) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(kind, ValidatingAdmissionPolicy, binding) for each kind the stack's policies check."""
    settings = admission_settings(config)
    return [
        (kind, validating_admission_policy(settings, kind), validating_admission_policy_binding(settings, kind))
        for kind in POLICY_KINDS
    ]


class TpuAdmissionPolicy(pulumi.ComponentResource):
    """Refuses (or warns about, or audits) TPU workloads that break the platform's queue and priority conventions."""

    policy_names: pulumi.Output[list[str]]
    """Names of the ValidatingAdmissionPolicies, one per checked kind (each binding has its policy's name)."""

    def __init__(self, name: str, args: TpuAdmissionPolicyArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(TYPE_TOKEN, name, {}, opts)
        config = parse_platform_config(args["platform"])
        child = pulumi.ResourceOptions(parent=self, depends_on=inherited_depends_on(opts))
        names: list[str] = []
        for kind, policy, binding in admission_objects(config):
            suffix = kind.lower()
            declared = KubernetesObject(f"{name}-{suffix}-policy", policy, child)
            KubernetesObject(
                f"{name}-{suffix}-binding", binding, pulumi.ResourceOptions(parent=self, depends_on=[declared])
            )
            names.append(str(policy["metadata"]["name"]))
        self.policy_names = pulumi.Output.from_input(names)
        self.register_outputs({"policy_names": self.policy_names})
