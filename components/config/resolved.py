"""Derived queue facts: which flavors exist, what each one provisions, and the effective queues."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from gke_tpu_priority.components import tpu_shapes
from gke_tpu_priority.components.config.queues import ClusterQueueSpec, FlavorSpec, LocalQueueSpec, QueuesConfig, Quota
from gke_tpu_priority.components.config.tpu import CAPACITY_LABEL, QUEUED_CAPACITY, TpuPoolGroup

INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
DEFAULT_TEAM_NAMESPACE = "tpu-training"


@dataclass(frozen=True)
class Flavor:
    """A Kueue ResourceFlavor and the TPU capacity behind it."""

    name: str
    node_labels: tuple[tuple[str, str], ...]
    chips: int
    slices: int
    pools: tuple[str, ...]
    capacity_classes: tuple[str, ...] = ()
    """Capacity label values of the matched pools (`reservation`, `spot`, ..., `flex-start-queued`), sorted."""

    @property
    def queued(self) -> bool:
        """Whether the flavor's nodes come through queued provisioning (it then needs the admission check)."""
        return QUEUED_CAPACITY in self.capacity_classes


def _matches(spec: FlavorSpec, group: TpuPoolGroup) -> bool:
    shape = group.shape
    return (
        (spec.topology is None or spec.topology == shape.topology)
        and (spec.machine_type is None or spec.machine_type == shape.machine_type)
        and (spec.capacity_class is None or spec.capacity_class == group.capacity.capacity_class)
    )


def _labels(spec: FlavorSpec) -> tuple[tuple[str, str], ...]:
    labels = [(tpu_shapes.ACCELERATOR_LABEL, tpu_shapes.ACCELERATOR)]
    if spec.topology is not None:
        labels.append((tpu_shapes.TOPOLOGY_LABEL, spec.topology))
    if spec.machine_type is not None:
        labels.append((INSTANCE_TYPE_LABEL, spec.machine_type))
    if spec.capacity_class is not None:
        labels.append((CAPACITY_LABEL, spec.capacity_class))
    return tuple(labels)


def derived_flavor_specs(pools: list[TpuPoolGroup]) -> list[FlavorSpec]:
    """One flavor per slice shape; split by capacity mode where one shape mixes capacity modes (queued flex-start
    counting as a mode of its own)."""
    modes: dict[str, set[str]] = defaultdict(set)
    shapes: dict[str, tpu_shapes.SliceShape] = {}
    for group in pools:
        shapes[group.shape.key] = group.shape
        modes[group.shape.key].add(group.capacity.capacity_class)
    specs: list[FlavorSpec] = []
    for key in sorted(shapes, key=lambda k: (shapes[k].chips, k)):
        shape = shapes[key]
        ambiguous = len(tpu_shapes.shapes_for(shape.topology)) > 1
        machine = shape.machine_type if ambiguous else None
        if len(modes[key]) == 1:
            specs.append(FlavorSpec(name=f"v6e-{key}", topology=shape.topology, machine_type=machine))
        else:
            for mode in sorted(modes[key]):
                queued = mode == QUEUED_CAPACITY
                specs.append(
                    FlavorSpec.model_validate(
                        {
                            "name": f"v6e-{key}-{mode}",
                            "topology": shape.topology,
                            "machineType": machine,
                            "capacity": "flex-start" if queued else mode,
                            **({"queuedProvisioning": True} if queued else {}),
                        }
                    )
                )
    return specs


def resolve_flavors(queues: QueuesConfig, pools: list[TpuPoolGroup]) -> list[Flavor]:
    specs = queues.flavors if queues.flavors is not None else derived_flavor_specs(pools)
    flavors = []
    for spec in specs:
        matched = [g for g in pools if _matches(spec, g)]
        flavors.append(
            Flavor(
                name=spec.name,
                node_labels=_labels(spec),
                chips=sum(g.chips for g in matched),
                slices=sum(g.slices for g in matched),
                pools=tuple(g.name for g in matched),
                capacity_classes=tuple(sorted({g.capacity.capacity_class for g in matched})),
            )
        )
    return flavors


def effective_cluster_queues(queues: QueuesConfig, flavors: list[Flavor]) -> list[ClusterQueueSpec]:
    if queues.cluster_queues is not None:
        return queues.cluster_queues
    return [
        ClusterQueueSpec(
            name="tpu-training",
            namespaces=[DEFAULT_TEAM_NAMESPACE],
            quotas=[Quota(flavor=f.name, chips=f.chips) for f in flavors],
        )
    ]


def effective_local_queues(queues: QueuesConfig) -> list[LocalQueueSpec]:
    if queues.local_queues is not None:
        return queues.local_queues
    return [LocalQueueSpec(name="training", namespace=DEFAULT_TEAM_NAMESPACE, cluster_queue="tpu-training")]
