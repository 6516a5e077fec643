"""KueueJobSet: Kueue and JobSet from their official Helm charts, on the system node pool."""

from collections.abc import Mapping
from typing import Any, TypedDict

import pulumi
import pulumi_kubernetes as k8s
import yaml

from gke_tpu_priority.components.cluster.node_pools import system_node_selector
from gke_tpu_priority.components.config import PlatformConfig, parse_platform_config
from gke_tpu_priority.components.config.kueue import JOBSET_CHART, KUEUE_CHART, JobSetSettings, KueueSettings
from gke_tpu_priority.components.kube.objects import KubernetesObject, inherited_depends_on, namespace
from gke_tpu_priority.components.kueue.crds import KeepCrds
from gke_tpu_priority.components.kueue.manager_config import controller_resources, fleet_slices, kueue_manager_config
from gke_tpu_priority.components.priorities import controller_priority_class
from gke_tpu_priority.components.schema_types import PlatformConfig as PlatformSettings

TYPE_TOKEN = "gke-tpu-priority:index:KueueJobSet"
__all__ = ["JOBSET_CHART", "KUEUE_CHART", "KueueJobSet", "chart_location"]
CONTROLLERS_PRIORITY_CLASS = "tpu-platform-controllers"


def controllers_priority_class(config: PlatformConfig) -> dict[str, Any]:
    return controller_priority_class(
        config,
        CONTROLLERS_PRIORITY_CLASS,
        "Kueue and JobSet controllers: above every TPU tier, so admission never waits on them.",
    )


JOBSET_CONTROLLER_DEPLOYMENT = "kubernetes:apps/v1:Deployment"


def _plain_mapping(value: object, where: str) -> dict[str, Any]:
    # Chart v4 children arrive as rendered YAML (plain values); anything else means the chart changed shape.
    if not isinstance(value, Mapping):
        raise TypeError(f"JobSet controller Deployment: {where} is {type(value).__name__}, expected a mapping")
    return dict(value)


def jobset_controller_priority(args: pulumi.ResourceTransformArgs) -> pulumi.ResourceTransformResult | None:
    """Give the JobSet controller's pods the controllers' PriorityClass.

    The JobSet chart (v0.12.0) has no priorityClassName value; a transform on the Chart reaches the rendered
    Deployment (transforms, unlike transformations, apply to the children of packaged components like Chart v4).
    The chart renders exactly one Deployment, the controller.
    """
    if args.type_ != JOBSET_CONTROLLER_DEPLOYMENT:
        return None
    props = dict(args.props)
    spec = _plain_mapping(props.get("spec"), "spec")
    template = _plain_mapping(spec.get("template"), "spec.template")
    pod_spec = _plain_mapping(template.get("spec"), "spec.template.spec")
    pod_spec["priorityClassName"] = CONTROLLERS_PRIORITY_CLASS
    props["spec"] = {**spec, "template": {**template, "spec": pod_spec}}
    return pulumi.ResourceTransformResult(props=props, opts=args.opts)


class KueueJobSetArgs(TypedDict):
    platform: PlatformSettings
    """The platform settings, in the schema of the `gke-tpu-priority:platform` stack setting (see README)."""


def chart_location(settings: KueueSettings | JobSetSettings) -> tuple[str, str | None]:
    """The Chart's `chart` and `version` inputs: a remote chart is fetched at the pinned version; a local chart is
    used as it is (validation already checked that it is that version, and Helm takes no version for a path)."""
    source = settings.chart_source
    return source.location, None if source.local else settings.version


def kueue_values(config: PlatformConfig) -> dict[str, Any]:
    kueue = config.kueue
    return {
        "controllerManager": {
            "replicas": kueue.replicas,
            "manager": {
                "image": {
                    "repository": kueue.image_repository,
                    "tag": f"v{kueue.version}",
                    "pullPolicy": "IfNotPresent",
                },
                "resources": controller_resources(fleet_slices(config)),
                # Admission stops when Kueue is down; keep it above every workload tier. (GKE admits the
                # system-*-critical classes only in kube-system, hence a class of the platform's own.)
                "priorityClassName": CONTROLLERS_PRIORITY_CLASS,
            },
            "nodeSelector": system_node_selector(config),
            "podDisruptionBudget": {"enabled": kueue.replicas > 1, "minAvailable": 1},
        },
        "managerConfig": {"controllerManagerConfigYaml": yaml.safe_dump(kueue_manager_config(config), sort_keys=False)},
    }


def jobset_values(config: PlatformConfig) -> dict[str, Any]:
    return {
        # The chart renders `repository:tag` (it has no `registry` value), so the registry goes in `repository`.
        "image": {
            "repository": config.jobset.image_repository,
            "tag": f"v{config.jobset.version}",
            "pullPolicy": "IfNotPresent",
        },
        "controller": {
            "nodeSelector": system_node_selector(config),
            "resources": controller_resources(fleet_slices(config)),
        },
        # The chart's ServiceMonitor needs the Prometheus operator's CRDs, which GKE does not install.
        "prometheus": {"enable": False},
    }


class KueueJobSet(pulumi.ComponentResource):
    """Kueue and JobSet installed from their official charts into their own namespaces, on the system pool."""

    kueue_namespace: pulumi.Output[str]
    """Namespace of the Kueue controller."""
    jobset_namespace: pulumi.Output[str]
    """Namespace of the JobSet controller."""

    def __init__(self, name: str, args: KueueJobSetArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(TYPE_TOKEN, name, {}, opts)
        config = parse_platform_config(args["platform"])
        outer = inherited_depends_on(opts)
        child = pulumi.ResourceOptions(parent=self, depends_on=outer)
        self.jobset_ns = namespace(f"{name}-jobset-ns", config.jobset.namespace, opts=child)
        self.kueue_ns = namespace(f"{name}-kueue-ns", config.kueue.namespace, opts=child)
        self.priority_class = KubernetesObject(f"{name}-controllers-pc", controllers_priority_class(config), child)
        # JobSet first: Kueue's jobset integration needs the JobSet CRD to be served.
        self.jobset = k8s.helm.v4.Chart(
            f"{name}-jobset",
            chart=chart_location(config.jobset)[0],
            version=chart_location(config.jobset)[1],
            namespace=config.jobset.namespace,
            values=jobset_values(config),
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=[*outer, self.jobset_ns, self.priority_class],
                transforms=[jobset_controller_priority, KeepCrds(config.protect)],
            ),
        )
        self.kueue = k8s.helm.v4.Chart(
            f"{name}-kueue",
            chart=chart_location(config.kueue)[0],
            version=chart_location(config.kueue)[1],
            namespace=config.kueue.namespace,
            values=kueue_values(config),
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=[*outer, self.kueue_ns, self.priority_class, self.jobset],
                transforms=[KeepCrds(config.protect)],
            ),
        )
        self.kueue_namespace = self.kueue_ns.metadata.name
        self.jobset_namespace = self.jobset_ns.metadata.name
        self.register_outputs({"kueue_namespace": self.kueue_namespace, "jobset_namespace": self.jobset_namespace})
