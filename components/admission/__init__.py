"""TpuAdmissionPolicy: the TPU workload conventions enforced by the API server (ValidatingAdmissionPolicy + binding).

The CEL comes from the policy rule set (``policies.admission``), with the stack's tiers and LocalQueues written
into it, so the pack, the CI command and the cluster apply the same rules to the same objects.
"""

from typing import Any, TypedDict

import pulumi

from components import tpu_shapes
from components.config import PlatformConfig, parse_platform_config
from components.config.resolved import effective_local_queues
from components.kube.objects import KubernetesObject, inherited_depends_on
from components.schema_types import PlatformConfig as PlatformSettings
from policies.admission import AdmissionSettings, validating_admission_policy, validating_admission_policy_binding
from policies.rules.base import AdmissionContext

TYPE_TOKEN = "gke-tpu-priority:index:TpuAdmissionPolicy"


class TpuAdmissionPolicyArgs(TypedDict):
    platform: PlatformSettings
    """The platform settings, in the schema of the `gke-tpu-priority:platform` stack setting (see README)."""


def admission_settings(config: PlatformConfig) -> AdmissionSettings:
    """What the policy needs from the stack: tiers, LocalQueues by namespace, controller namespaces, action."""
    queues: dict[str, set[str]] = {}
    for local_queue in effective_local_queues(config.queues):
        queues.setdefault(local_queue.namespace, set()).add(local_queue.name)
    context = AdmissionContext(
        tiers=tuple(t.name for t in sorted(config.priorities, key=lambda t: -t.value)),
        local_queues={ns: tuple(sorted(names)) for ns, names in sorted(queues.items())},
        exclusive_topology_key=tpu_shapes.NODEPOOL_LABEL,
    )
    return AdmissionSettings(
        context=context,
        controller_namespaces=(config.kueue.namespace, config.jobset.namespace),
        action=config.admission_policy.action,
    )


def admission_objects(config: PlatformConfig) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ValidatingAdmissionPolicy and its binding for a stack."""
    settings = admission_settings(config)
    return validating_admission_policy(settings), validating_admission_policy_binding(settings)


class TpuAdmissionPolicy(pulumi.ComponentResource):
    """Refuses (or warns about, or audits) TPU workloads that break the platform's queue and priority conventions."""

    policy_name: pulumi.Output[str]
    """Name of the ValidatingAdmissionPolicy (and of its binding)."""

    def __init__(self, name: str, args: TpuAdmissionPolicyArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(TYPE_TOKEN, name, {}, opts)
        config = parse_platform_config(args["platform"])
        policy, binding = admission_objects(config)
        child = pulumi.ResourceOptions(parent=self, depends_on=inherited_depends_on(opts))
        self.policy = KubernetesObject(f"{name}-policy", policy, child)
        self.binding = KubernetesObject(
            f"{name}-binding", binding, pulumi.ResourceOptions(parent=self, depends_on=[self.policy])
        )
        self.policy_name = pulumi.Output.from_input(str(policy["metadata"]["name"]))
        self.register_outputs({"policy_name": self.policy_name})
