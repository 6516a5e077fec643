"""TpuFleet: one MultiKueue manager cluster and two or more TPU worker platforms, in one stack."""

import base64
import functools
from typing import Any, TypedDict, cast

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from gke_tpu_priority.components.config.fleet import FleetConfig, check_groups, parse_fleet_config
from gke_tpu_priority.components.config.queues import RESERVED_NAMESPACES
from gke_tpu_priority.components.config.resolved import effective_local_queues
from gke_tpu_priority.components.fleet.credentials import (
    MANAGER_IDENTITY,
    cluster_role,
    cluster_role_binding,
    service_account,
    token_kubeconfig,
    token_secret,
    token_secret_name,
    worker_endpoint,
)
from gke_tpu_priority.components.fleet.manager import install_kueue, manager_cluster
from gke_tpu_priority.components.fleet.multikueue import (
    admission_check,
    kubeconfig_secret_name,
    manager_cluster_queue,
    manager_cluster_queues,
    manager_flavors,
    multikueue_cluster,
    multikueue_config,
)
from gke_tpu_priority.components.kube.immutable import immutable_paths
from gke_tpu_priority.components.kube.objects import KubernetesObject, namespace
from gke_tpu_priority.components.platform import TpuPlatform, TpuPlatformArgs
from gke_tpu_priority.components.priorities import PriorityTiers, PriorityTiersArgs
from gke_tpu_priority.components.queues.objects import TEAM_NAMESPACE_LABELS, cohort, local_queue, resource_flavor
from gke_tpu_priority.components.schema_types import FleetConfig as FleetSettings
from gke_tpu_priority.components.schema_types import PlatformConfig as PlatformSettings

TYPE_TOKEN = "gke-tpu-priority:index:TpuFleet"


class TpuFleetArgs(TypedDict):
    fleet: FleetSettings
    """The fleet settings, in the schema of the `gke-tpu-priority:fleet` stack setting (see README)."""


class EmptyWorkerToken(ValueError):
    """The worker's token Secret had no token when it was read back (the MultiKueueCluster would stay inactive)."""


def _token(where: str, secret: str, data: Any) -> str:
    encoded = (data or {}).get("token", "")
    token = base64.b64decode(encoded).decode() if encoded else ""
    if not token.strip():
        # An empty token renders a kubeconfig MultiKueue cannot use: its MultiKueueCluster stays inactive and
        # nothing else says why. Stop the update instead, naming what to look at.
        raise EmptyWorkerToken(
            f"{where}: the MultiKueue token Secret {secret} has no token (its data.token is empty); "
            "the worker's token controller fills it in shortly after the Secret is created. Run `pulumi up` again; "
            "if it stays empty, check that the ServiceAccount it names exists, or raise "
            "fleet.multiKueue.credentialsGeneration to issue a new Secret"
        )
    return token


def _render(worker: str, where: str, secret: str, parts: list[Any]) -> str:
    server, ca = worker_endpoint(str(parts[0]))
    return token_kubeconfig(worker, server, ca, _token(where, secret, parts[1]))


class TpuFleet(pulumi.ComponentResource):
    """A MultiKueue manager (CPU-only GKE) dispatching TPU JobSets to two or more full TpuPlatform workers."""

    manager_cluster_name: pulumi.Output[str]
    """Name of the manager's GKE cluster."""
    manager_kubeconfig: pulumi.Output[str]
    """Kubeconfig of the manager using gke-gcloud-auth-plugin (secret): submit JobSets here."""
    worker_clusters: pulumi.Output[dict[str, str]]
    """Worker name to its GKE cluster name."""
    dispatch_order: pulumi.Output[list[str]]
    """Worker names in dispatch preference order (the Incremental dispatcher's)."""

    def __init__(self, name: str, args: TpuFleetArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(TYPE_TOKEN, name, {}, opts)
        config: FleetConfig = parse_fleet_config(args["fleet"])
        self.config = config
        m = config.manager
        manager_gcp = gcp.Provider(
            f"{name}-manager-gcp", project=m.project, region=m.region, opts=pulumi.ResourceOptions(parent=self)
        )
        self.manager = manager_cluster(name, config, self, manager_gcp)
        mgr = self.manager.provider
        self.kueue, kueue_ns = install_kueue(name, config, self, mgr, self.manager.resources)
        after_kueue = pulumi.ResourceOptions(parent=self, provider=mgr, depends_on=[self.kueue])
        first_raw = cast(PlatformSettings, config.workers[0].platform.model_dump(by_alias=True))
        # The same tiers on the manager: workloads name their WorkloadPriorityClass there first.
        self.priorities = PriorityTiers(
            f"{name}-manager-priorities",
            PriorityTiersArgs(platform=first_raw),
            pulumi.ResourceOptions(parent=self, providers=[mgr], depends_on=[self.kueue]),
        )

        # Workers: each a whole platform with its own GCP and Kubernetes providers.
        self.workers: dict[str, TpuPlatform] = {}
        self.worker_kubeconfig_secrets: dict[str, k8s.core.v1.Secret] = {}
        clusters: list[KubernetesObject] = []
        for index, worker in enumerate(config.workers):
            p = worker.platform
            wname = f"{name}-{worker.name}"
            wgcp = gcp.Provider(
                f"{wname}-gcp", project=p.project, region=p.region, opts=pulumi.ResourceOptions(parent=self)
            )
            platform = TpuPlatform(
                wname,
                TpuPlatformArgs(platform=cast(PlatformSettings, p.model_dump(by_alias=True))),
                pulumi.ResourceOptions(parent=self, providers=[wgcp]),
            )
            self.workers[worker.name] = platform
            ns = p.kueue.namespace
            in_worker = pulumi.ResourceOptions(parent=self, provider=platform.provider, depends_on=[platform.kueue])
            sa = KubernetesObject(f"{wname}-mk-sa", service_account(ns), in_worker)
            role = KubernetesObject(f"{wname}-mk-role", cluster_role(), in_worker)
            binding = KubernetesObject(
                f"{wname}-mk-binding",
                cluster_role_binding(ns),
                pulumi.ResourceOptions.merge(in_worker, pulumi.ResourceOptions(depends_on=[sa, role])),
            )
            gen = config.multi_kueue.credentials_generation
            token = KubernetesObject(
                f"{wname}-mk-token-g{gen}",
                token_secret(ns, gen),
                pulumi.ResourceOptions(
                    parent=self,
                    provider=platform.provider,
                    depends_on=[sa, binding],
                    additional_secret_outputs=["data"],
                ),
            )
            # Read back once the token controller has filled it in.
            live = k8s.core.v1.Secret.get(
                f"{wname}-mk-token-g{gen}-read",
                f"{ns}/{token_secret_name(gen)}",
                opts=pulumi.ResourceOptions(parent=self, provider=platform.provider, depends_on=[token]),
            )
            # The provider waits (briefly) for the token controller on create; _render fails the update loudly if
            # the token is still missing rather than writing a kubeconfig with an empty token.
            plain: pulumi.Output[str] = pulumi.Output.all(platform.kubeconfig, live.data).apply(
                functools.partial(
                    _render, worker.name, f"fleet.workers[{index}] ({worker.name})", f"{ns}/{token_secret_name(gen)}"
                )
            )
            kubeconfig: pulumi.Output[str] = pulumi.Output.secret(plain)
            secret = k8s.core.v1.Secret(
                f"{name}-mk-kubeconfig-{worker.name}",
                metadata={
                    "name": kubeconfig_secret_name(worker.name),
                    "namespace": m.kueue.namespace,
                    "labels": {"app.kubernetes.io/managed-by": "gke-tpu-priority"},
                },
                type="Opaque",
                string_data={"kubeconfig": kubeconfig},
                opts=pulumi.ResourceOptions(
                    parent=self,
                    provider=mgr,
                    depends_on=[kueue_ns],
                    additional_secret_outputs=["data", "stringData"],
                    # `type` is immutable; the name is fixed (MultiKueueCluster refers to it).
                    replace_on_changes=immutable_paths({"apiVersion": "v1", "kind": "Secret"}),
                    delete_before_replace=True,
                ),
            )
            self.worker_kubeconfig_secrets[worker.name] = secret
            clusters.append(
                KubernetesObject(
                    f"{name}-mkc-{worker.name}",
                    multikueue_cluster(worker.name),
                    pulumi.ResourceOptions(parent=self, provider=mgr, depends_on=[self.kueue, secret]),
                )
            )

        # The manager's queues: same names as the workers', quotas the fleet's sum, each with its admission check.
        groups = check_groups(config)
        checks = []
        for group in groups:
            mkc = KubernetesObject(
                f"{name}-mkconfig-{group.name}",
                multikueue_config(group),
                pulumi.ResourceOptions(parent=self, provider=mgr, depends_on=[self.kueue, *clusters]),
            )
            checks.append(
                KubernetesObject(
                    f"{name}-ac-{group.name}",
                    admission_check(group),
                    pulumi.ResourceOptions(parent=self, provider=mgr, depends_on=[self.kueue, mkc]),
                )
            )
        flavors = [
            KubernetesObject(f"{name}-manager-rf-{f.name}", resource_flavor(f), after_kueue)
            for f in manager_flavors(config)
        ]
        first = config.workers[0].platform
        cohorts = [
            KubernetesObject(f"{name}-manager-cohort-{c.name}", cohort(c), after_kueue) for c in first.queues.cohorts
        ]
        self.cluster_queues: dict[str, KubernetesObject] = {}
        for spec in manager_cluster_queues(config):
            self.cluster_queues[spec.name] = KubernetesObject(
                f"{name}-manager-cq-{spec.name}",
                manager_cluster_queue(spec, groups),
                pulumi.ResourceOptions(parent=self, provider=mgr, depends_on=[self.kueue, *flavors, *cohorts, *checks]),
            )
        local_specs = effective_local_queues(first.queues)
        namespaces: dict[str, pulumi.Resource] = {}
        if first.queues.manage_namespaces:
            for ns_name in sorted({lq.namespace for lq in local_specs} - set(RESERVED_NAMESPACES)):
                namespaces[ns_name] = namespace(
                    f"{name}-manager-ns-{ns_name}",
                    ns_name,
                    TEAM_NAMESPACE_LABELS,
                    pulumi.ResourceOptions(parent=self, provider=mgr, depends_on=self.manager.resources),
                )
        for lq in local_specs:
            deps: list[pulumi.Resource] = [self.kueue, self.cluster_queues[lq.cluster_queue]]
            if lq.namespace in namespaces:
                deps.append(namespaces[lq.namespace])
            KubernetesObject(
                f"{name}-manager-lq-{lq.namespace}-{lq.name}",
                local_queue(lq),
                pulumi.ResourceOptions(parent=self, provider=mgr, depends_on=deps),
            )

        self.manager_cluster_name = self.manager.cluster_name
        self.manager_kubeconfig = self.manager.kubeconfig
        self.worker_clusters = pulumi.Output.all(
            *[pulumi.Output.concat(w, "=", p.cluster_name) for w, p in self.workers.items()]
        ).apply(lambda pairs: dict(str(pair).split("=", 1) for pair in pairs))
        self.dispatch_order = pulumi.Output.from_input([w.name for w in config.workers])
        self.register_outputs(
            {
                "manager_cluster_name": self.manager_cluster_name,
                "manager_kubeconfig": self.manager_kubeconfig,
                "worker_clusters": self.worker_clusters,
                "dispatch_order": self.dispatch_order,
            }
        )


__all__ = ["MANAGER_IDENTITY", "EmptyWorkerToken", "TpuFleet", "TpuFleetArgs"]
