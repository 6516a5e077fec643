"""TpuQueues: Kueue ResourceFlavors, Cohorts, ClusterQueues, team namespaces and LocalQueues from stack config."""

from typing import TypedDict

import pulumi

from gke_tpu_priority.components.config import parse_platform_config
from gke_tpu_priority.components.config.queues import RESERVED_NAMESPACES
from gke_tpu_priority.components.config.resolved import effective_cluster_queues, effective_local_queues
from gke_tpu_priority.components.config.tenancy import allowed_tiers
from gke_tpu_priority.components.kube.objects import KubernetesObject, inherited_depends_on, namespace
from gke_tpu_priority.components.queues.objects import (
    TEAM_NAMESPACE_LABELS,
    cluster_queue,
    cohort,
    local_queue,
    resource_flavor,
)
from gke_tpu_priority.components.queues.provisioning import (
    admission_check,
    cluster_queue_extras,
    provisioning_request_config,
)
from gke_tpu_priority.components.queues.team_access import team_cluster_role, team_role_bindings
from gke_tpu_priority.components.schema_types import PlatformConfig as PlatformSettings

TYPE_TOKEN = "gke-tpu-priority:index:TpuQueues"


class TpuQueuesArgs(TypedDict):
    platform: PlatformSettings
    """The platform settings, in the schema of the `gke-tpu-priority:platform` stack setting (see README)."""


class TpuQueues(pulumi.ComponentResource):
    """Kueue queue objects for the TPU fleet. Pass the Kueue install in `opts.depends_on` (it brings the CRDs)."""

    cluster_queue_names: pulumi.Output[list[str]]
    """Names of the ClusterQueues."""
    local_queues: pulumi.Output[list[str]]
    """LocalQueues as `namespace/name`."""

    def __init__(self, name: str, args: TpuQueuesArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(TYPE_TOKEN, name, {}, opts)
        config = parse_platform_config(args["platform"])
        outer = inherited_depends_on(opts)
        flavors = config.flavors

        def fixed(*deps: pulumi.Resource, protect: bool = False) -> pulumi.ResourceOptions:
            return pulumi.ResourceOptions(
                parent=self, depends_on=[*outer, *deps], delete_before_replace=True, protect=protect
            )

        self.flavors = [KubernetesObject(f"{name}-rf-{f.name}", resource_flavor(f), fixed()) for f in flavors]
        self.cohorts: dict[str, KubernetesObject] = {}
        pending = list(config.queues.cohorts)
        while pending:
            # Parents first, so a child cohort never points at a missing parent (validation rules out cycles
            # through unknown parents; a true cycle stops here instead of looping).
            ready = [c for c in pending if c.parent is None or c.parent in self.cohorts]
            if not ready:
                raise pulumi.RunError(f"cohort parents form a cycle: {', '.join(c.name for c in pending)}")
            for c in ready:
                parent = [self.cohorts[c.parent]] if c.parent else []
                self.cohorts[c.name] = KubernetesObject(f"{name}-cohort-{c.name}", cohort(c), fixed(*parent))
                pending.remove(c)
        # Queued provisioning: the ProvisioningRequestConfig, then the AdmissionCheck naming it (its controller marks
        # the check inactive while the config is missing), then the ClusterQueues that apply it.
        settings = config.queues.queued_provisioning
        self.admission_checks: list[KubernetesObject] = []
        if config.queued_provisioning:
            prc = KubernetesObject(
                f"{name}-prc-{settings.name}",
                provisioning_request_config(settings, config.queued_max_run_duration),
                fixed(),
            )
            self.admission_checks.append(
                KubernetesObject(f"{name}-ac-{settings.name}", admission_check(settings), fixed(prc))
            )
        self.cluster_queues: dict[str, KubernetesObject] = {}
        for cq in effective_cluster_queues(config.queues, flavors):
            cq_deps: list[pulumi.Resource] = [
                *self.flavors,
                *self.admission_checks,
                *([self.cohorts[cq.cohort]] if cq.cohort else []),
            ]
            body = cluster_queue(cq, cluster_queue_extras(cq, flavors, settings.name))
            self.cluster_queues[cq.name] = KubernetesObject(f"{name}-cq-{cq.name}", body, fixed(*cq_deps))
        self.namespaces: dict[str, pulumi.Resource] = {}
        local_specs = effective_local_queues(config.queues)
        if config.queues.manage_namespaces:
            for ns in sorted({lq.namespace for lq in local_specs} - set(RESERVED_NAMESPACES)):
                # Team namespaces hold running work; losing one deletes its JobSets.
                self.namespaces[ns] = namespace(
                    f"{name}-ns-{ns}",
                    ns,
                    TEAM_NAMESPACE_LABELS,
                    pulumi.ResourceOptions(parent=self, depends_on=outer, protect=config.protect),
                )
        self.local_queue_objects: list[KubernetesObject] = []
        teams = {ns: team for team in config.teams for ns in team.namespaces}
        for lq in local_specs:
            deps: list[pulumi.Resource] = [self.cluster_queues[lq.cluster_queue]]
            if lq.namespace in self.namespaces:
                deps.append(self.namespaces[lq.namespace])
            team = teams.get(lq.namespace)
            body = (
                local_queue(lq, allowed_tiers(team, config.priorities), team.may_protect)
                if team is not None
                else local_queue(lq)
            )
            self.local_queue_objects.append(KubernetesObject(f"{name}-lq-{lq.namespace}-{lq.name}", body, fixed(*deps)))
        # The team role and its bindings: only for stacks that declare teams with groups or users.
        bindings = [b for team in config.teams for b in team_role_bindings(team)]
        if bindings:
            role = KubernetesObject(f"{name}-team-role", team_cluster_role(), fixed())
            for binding in bindings:
                ns = binding["metadata"]["namespace"]
                deps = [role, *([self.namespaces[ns]] if ns in self.namespaces else [])]
                KubernetesObject(f"{name}-team-{ns}-binding", binding, fixed(*deps))
        self.cluster_queue_names = pulumi.Output.from_input(sorted(self.cluster_queues))
        self.local_queues = pulumi.Output.from_input([f"{lq.namespace}/{lq.name}" for lq in local_specs])
        self.register_outputs({"cluster_queue_names": self.cluster_queue_names, "local_queues": self.local_queues})
