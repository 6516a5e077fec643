"""Work that can never run: a TPU workload no flavor of its queue can hold, or that asks for more chips than its
queue can ever have; and a ClusterQueue whose TPU quota is smaller than one slice of its flavor.

Kueue accepts all three and then keeps the workload pending forever, with no error: the team sees a JobSet that
never starts. These rules need the platform's objects (ResourceFlavors, ClusterQueues, LocalQueues) next to the
workloads, as `gke-tpu-priority-check build/<stack>/manifests.yaml team/` gives them; with only the team's YAML
they stay silent rather than guess. They never report what might fit: borrowing through a cohort counts, and a
cohort with a parent or quota of its own counts as unbounded.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from . import v6e
from .admission_checks import is_manager_queue
from .base import (
    KUEUE_GROUP,
    TPU_RESOURCE,
    TPU_TOPOLOGY_LABEL,
    Config,
    Finding,
    KubeObject,
    PictureRule,
    as_number,
    dig,
    items,
    mapping,
    of_kind,
    pod_targets_tpu,
)
from .tpu_workloads import QUEUE_NAME_LABEL, is_tpu_workload, pod_chips, quantity_chips, selector

FAMILY = "Kueue objects"
UNBOUNDED = float("inf")


@dataclass(frozen=True)
class PodSet:
    where: str
    topology: str
    chips: int
    """Every chip of the pod set: replicas x pods x chips per pod."""


def pod_sets(obj: KubeObject) -> list[PodSet]:
    """The TPU pod sets of a JobSet, Job or Pod, with the chips each asks for in total."""
    found: list[PodSet] = []
    if obj.kind == "JobSet":
        for i, job in enumerate(items(dig(obj.manifest, "spec", "replicatedJobs"))):
            spec = mapping(dig(job, "template", "spec"))
            template = mapping(spec.get("template"))
            replicas = as_number(dig(job, "replicas", default=1)) or 1
            pods = as_number(spec.get("parallelism", 1)) or 1
            found.append(_pod_set(f"replicatedJobs[{dig(job, 'name', default=i)}]", template, replicas * pods))
    elif obj.kind == "Job":
        spec = mapping(dig(obj.manifest, "spec"))
        found.append(_pod_set("spec", mapping(spec.get("template")), as_number(spec.get("parallelism", 1)) or 1))
    else:
        found.append(_pod_set("pod", obj.manifest, 1))
    return [p for p in found if p.chips > 0]


def _pod_set(where: str, template: Mapping[str, Any], pods: float) -> PodSet:
    if not pod_targets_tpu(template):
        return PodSet(where, "", 0)
    return PodSet(where, selector(template, TPU_TOPOLOGY_LABEL), max(pod_chips(template), 0) * int(pods))


def _flavor_topologies(objects: Sequence[KubeObject]) -> dict[str, str]:
    """ResourceFlavor name -> the TPU topology its nodeLabels select ('' when none)."""
    return {
        f.name: str(mapping(dig(f.manifest, "spec", "nodeLabels")).get(TPU_TOPOLOGY_LABEL, ""))
        for f in of_kind(objects, "ResourceFlavor", KUEUE_GROUP)
    }


def _tpu_quotas(cluster_queue: KubeObject) -> dict[str, tuple[float, float | None]]:
    """Flavor -> (nominalQuota, borrowingLimit or None) of google.com/tpu in a ClusterQueue."""
    quotas: dict[str, tuple[float, float | None]] = {}
    for group in items(dig(cluster_queue.manifest, "spec", "resourceGroups")):
        for flavor in items(dig(group, "flavors")):
            for resource in items(dig(flavor, "resources")):
                if dig(resource, "name") == TPU_RESOURCE:
                    limit = dig(resource, "borrowingLimit")
                    quotas[str(dig(flavor, "name", default=""))] = (
                        _chips(dig(resource, "nominalQuota", default=0)),
                        None if limit is None else _chips(limit),
                    )
    return quotas


def _chips(quantity: Any) -> float:
    """A google.com/tpu quantity (`64` or `"64"`); one this cannot read counts as unbounded, so never reported."""
    chips = quantity_chips(quantity)
    return UNBOUNDED if chips < 0 else float(chips)


def _reachable_chips(cluster_queue: KubeObject, flavor: str, objects: Sequence[KubeObject]) -> float:
    """The most google.com/tpu of ``flavor`` the queue could ever be admitted with: its nominal quota plus what it
    may borrow (its borrowingLimit, else its cohort's other queues' nominal quota of the flavor)."""
    nominal, limit = _tpu_quotas(cluster_queue).get(flavor, (0.0, None))
    cohort = str(dig(cluster_queue.manifest, "spec", "cohortName", default="") or "")
    if not cohort:
        return nominal
    for declared in of_kind(objects, "Cohort", KUEUE_GROUP):
        if declared.name == cohort and (
            dig(declared.manifest, "spec", "parentName") or dig(declared.manifest, "spec", "resourceGroups")
        ):
            return UNBOUNDED  # a cohort tree or cohort quota: more than this picture can bound
    peers = sum(
        _tpu_quotas(other).get(flavor, (0.0, None))[0]
        for other in of_kind(objects, "ClusterQueue", KUEUE_GROUP)
        if other.name != cluster_queue.name and dig(other.manifest, "spec", "cohortName") == cohort
    )
    return nominal + (peers if limit is None else min(limit, peers))


def _queue_of(obj: KubeObject, objects: Sequence[KubeObject]) -> KubeObject | None:
    """The ClusterQueue behind the LocalQueue the workload names, when both are among ``objects``."""
    queue = str(mapping(dig(obj.manifest, "metadata", "labels")).get(QUEUE_NAME_LABEL, ""))
    namespace = obj.namespace or "default"
    for local_queue in of_kind(objects, "LocalQueue", KUEUE_GROUP):
        if local_queue.name == queue and (local_queue.namespace or "default") == namespace:
            target = dig(local_queue.manifest, "spec", "clusterQueue")
            return next((c for c in of_kind(objects, "ClusterQueue", KUEUE_GROUP) if c.name == target), None)
    return None


def _fleet_worker_copy(obj: KubeObject, cluster_queue: KubeObject, objects: Sequence[KubeObject]) -> bool:
    """A team workload that names no cluster, seen in a fleet worker's picture: it is submitted to the manager,
    whose ClusterQueue (flavors and quota of every worker) is the one that decides whether it can run."""
    if obj.cluster or not cluster_queue.cluster:
        return False
    controllers = {
        c.name: str(dig(c.manifest, "spec", "controllerName", default=""))
        for c in of_kind(objects, "AdmissionCheck", KUEUE_GROUP)
    }
    return not is_manager_queue(cluster_queue, controllers)


def check_workload_can_run(objects: Sequence[KubeObject], cfg: Config) -> Iterator[Finding]:
    topologies = _flavor_topologies(objects)
    for obj in objects:
        if not is_tpu_workload(obj):
            continue
        cluster_queue = _queue_of(obj, objects)
        if cluster_queue is None:
            continue  # the queue rules say what is missing
        if _fleet_worker_copy(obj, cluster_queue, objects):
            continue
        flavors = {f: topologies.get(f, "") for f in _tpu_quotas(cluster_queue)}
        offered = sorted({t for t in flavors.values() if t})
        total = 0
        reachable = 0.0
        for pod_set in pod_sets(obj):
            # A flavor that selects no topology admits any (the pods' own selectors place them).
            matching = [f for f, t in flavors.items() if t in (pod_set.topology, "")]
            if not matching:
                shown = ", ".join(f"{f} ({t or 'no topology'})" for f, t in sorted(flavors.items())) or "none"
                yield Finding(
                    f"TPU {obj.ref} {pod_set.where} pods need a {pod_set.topology or '(unset)'} slice, but no flavor "
                    f"of ClusterQueue '{cluster_queue.name}' selects that topology (its TPU flavors: {shown}); Kueue "
                    f"would keep it pending forever. Use {' or '.join(offered) or 'a topology the platform has'}, or "
                    "submit it to a queue whose flavors have it.",
                    obj,
                )
                reachable = UNBOUNDED  # reported; do not add a quota finding on top
                continue
            total += pod_set.chips
            reachable += sum(_reachable_chips(cluster_queue, f, objects) for f in matching)
        if total > reachable:
            yield Finding(
                f"TPU {obj.ref} asks for {total} {TPU_RESOURCE} in all, but ClusterQueue '{cluster_queue.name}' can "
                f"never be admitted with more than {int(reachable)} for its topologies (nominal quota plus what it may "
                "borrow); Kueue would keep it pending forever. Ask for fewer slices, or raise the queue's quota.",
                obj,
            )


def check_quota_holds_a_slice(objects: Sequence[KubeObject], cfg: Config) -> Iterator[Finding]:
    topologies = _flavor_topologies(objects)
    for cluster_queue in of_kind(objects, "ClusterQueue", KUEUE_GROUP):
        for flavor, (nominal, _) in sorted(_tpu_quotas(cluster_queue).items()):
            shapes = v6e.shapes_for(topologies.get(flavor, ""))
            if not shapes or nominal <= 0 or nominal == UNBOUNDED:
                continue
            slice_chips = min(s.chips for s in shapes)
            if nominal < slice_chips:
                yield Finding(
                    f"{cluster_queue.label} gives flavor '{flavor}' {nominal:g} {TPU_RESOURCE} of nominal quota, less "
                    f"than one {shapes[0].topology} slice ({slice_chips} chips): no workload on it can ever be "
                    f"admitted on this quota. Use 0 (borrow only) or a multiple of {slice_chips}.",
                    cluster_queue,
                )


TPU_WORKLOAD_CAN_RUN = PictureRule(
    name="tpu-workload-fits-its-queue",
    description="A TPU workload's slice topology must be one its ClusterQueue's flavors select, and its chips no "
    "more than that queue can ever be admitted with (nominal quota plus borrowing).",
    family=FAMILY,
    tags=("kueue", "tpu-workload"),
    check=check_workload_can_run,
)
TPU_QUOTA_HOLDS_A_SLICE = PictureRule(
    name="kueue-v1beta2-tpu-quota-holds-a-slice",
    description="A ClusterQueue's nonzero google.com/tpu nominal quota for a TPU flavor must hold at least one "
    "slice of the flavor's topology.",
    family=FAMILY,
    tags=("kueue", "tpu"),
    check=check_quota_holds_a_slice,
)

RULES = (TPU_WORKLOAD_CAN_RUN, TPU_QUOTA_HOLDS_A_SLICE)
