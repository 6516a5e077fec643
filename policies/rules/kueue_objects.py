"""Kueue objects: the v1beta2 API, ClusterQueue shape, LocalQueues that point at declared ClusterQueues."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from .base import (
    KUEUE_GROUP,
    KUEUE_VERSION,
    Config,
    Finding,
    KubeObject,
    ObjectRule,
    PictureRule,
    dig,
    items,
    mapping,
    of_kind,
)

FAMILY = "Kueue objects"

# Fields of ClusterQueue.spec.preemption in Kueue v1beta2 (v0.19.2 CRD).
CLUSTER_QUEUE_PREEMPTION_FIELDS = frozenset({"withinClusterQueue", "reclaimWithinCohort", "borrowWithinCohort"})


def check_kueue_api_version(obj: KubeObject, cfg: Config) -> Iterator[str]:
    if obj.group == KUEUE_GROUP and obj.api_version != f"{KUEUE_GROUP}/{KUEUE_VERSION}":
        yield (
            f"{obj.label} uses {obj.api_version}; declare it as {KUEUE_GROUP}/{KUEUE_VERSION}, the storage "
            "version since Kueue v0.16 (v1beta1 is deprecated and lacks fields such as cohortName)."
        )


def check_cluster_queue(obj: KubeObject, cfg: Config) -> Iterator[str]:
    spec = mapping(dig(obj.manifest, "spec"))
    if "namespaceSelector" not in spec:
        yield (
            f"{obj.label} has no spec.namespaceSelector, so it admits no workloads; set it "
            "({} admits every namespace, or select the team namespaces)."
        )
    if "cohort" in spec:
        yield f"{obj.label} sets spec.cohort, which v1beta2 drops; use spec.cohortName."
    for unknown in sorted(set(mapping(dig(spec, "preemption"))) - CLUSTER_QUEUE_PREEMPTION_FIELDS):
        allowed = ", ".join(sorted(CLUSTER_QUEUE_PREEMPTION_FIELDS))
        yield (
            f"{obj.label} sets spec.preemption.{unknown}, which Kueue does not have (the API server drops it); "
            f"use only {allowed}."
        )
    for index, group in enumerate(items(dig(spec, "resourceGroups"))):
        if not items(dig(group, "coveredResources")):
            resources = sorted(
                {str(dig(r, "name")) for f in items(dig(group, "flavors")) for r in items(dig(f, "resources"))}
            )
            yield (
                f"{obj.label} spec.resourceGroups[{index}] has no coveredResources; list the resources its "
                f"flavors cover ({', '.join(resources) or 'e.g. google.com/tpu'})."
            )


def check_local_queue_targets(objects: Sequence[KubeObject], cfg: Config) -> Iterator[Finding]:
    cluster_queues = {c.name for c in of_kind(objects, "ClusterQueue", KUEUE_GROUP)}
    external = set(cfg.get("externalClusterQueues") or [])
    for local_queue in of_kind(objects, "LocalQueue", KUEUE_GROUP):
        target = dig(local_queue.manifest, "spec", "clusterQueue")
        if not target:
            yield Finding(
                f"{local_queue.label} has no spec.clusterQueue; point it at a ClusterQueue of this stack.", local_queue
            )
        elif target not in cluster_queues and target not in external:
            known = ", ".join(sorted(cluster_queues)) or "none declared"
            yield Finding(
                f"{local_queue.label} points to ClusterQueue '{target}', which this stack does not declare "
                f"(declared: {known}); fix the name or declare the ClusterQueue.",
                local_queue,
            )


def declared_local_queues(objects: Sequence[KubeObject], cfg: Config) -> dict[str, set[str]]:
    """LocalQueue names by namespace: those declared among ``objects`` plus configured ``namespace/name`` ones."""
    queues: dict[str, set[str]] = {}
    for local_queue in of_kind(objects, "LocalQueue", KUEUE_GROUP):
        queues.setdefault(local_queue.namespace or "default", set()).add(local_queue.name)
    for entry in cfg.get("externalLocalQueues") or []:
        namespace, _, name = str(entry).rpartition("/")
        queues.setdefault(namespace or "default", set()).add(name)
    return queues


KUEUE_REQUIRE_V1BETA2 = ObjectRule(
    name="kueue-require-v1beta2",
    description="Kueue objects must be declared with the kueue.x-k8s.io/v1beta2 API, not the deprecated v1beta1.",
    family=FAMILY,
    tags=("kueue",),
    kinds=frozenset(
        {
            "ClusterQueue",
            "LocalQueue",
            "ResourceFlavor",
            "WorkloadPriorityClass",
            "Cohort",
            "Topology",
            "AdmissionCheck",
            "ProvisioningRequestConfig",
            "MultiKueueConfig",
            "MultiKueueCluster",
        }
    ),
    check=check_kueue_api_version,
)

KUEUE_CLUSTER_QUEUE_SHAPE = ObjectRule(
    name="kueue-v1beta2-clusterqueue-valid-spec",
    description=(
        "ClusterQueues must set a namespaceSelector, use cohortName, cover every resource group's resources, "
        "and use only preemption fields Kueue has."
    ),
    family=FAMILY,
    tags=("kueue",),
    kinds=frozenset({"ClusterQueue"}),
    check=check_cluster_queue,
)

KUEUE_LOCAL_QUEUE_TARGETS_EXISTING_CLUSTER_QUEUE = PictureRule(
    name="kueue-v1beta2-localqueue-targets-existing-clusterqueue",
    description="Every LocalQueue must point to a ClusterQueue that the same stack declares.",
    family=FAMILY,
    tags=("kueue",),
    check=check_local_queue_targets,
    config={
        "externalClusterQueues": {
            "type": "array",
            "items": {"type": "string"},
            "default": [],
            "description": "ClusterQueues managed outside this stack.",
        },
    },
)

RULES = (KUEUE_REQUIRE_V1BETA2, KUEUE_CLUSTER_QUEUE_SHAPE, KUEUE_LOCAL_QUEUE_TARGETS_EXISTING_CLUSTER_QUEUE)
