"""The fleet stack configuration: one MultiKueue manager cluster and two or more TPU worker platforms.

Every worker is a whole `PlatformConfig` (its own region, TPU pools, network, create or existing mode); the
manager is a small CPU-only GKE cluster (created as GKE Autopilot, or an existing one). Validated once, up front,
with every problem's path, bad value and what is allowed.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pydantic import Field, ValidationError, model_validator

from gke_tpu_priority.components.config.base import ConfigModel, problems_error
from gke_tpu_priority.components.config.cluster import ClusterMode, KubernetesAuth, ReleaseChannel
from gke_tpu_priority.components.config.errors import ConfigError, format_validation_error
from gke_tpu_priority.components.config.kueue import JobSetSettings, KueueSettings
from gke_tpu_priority.components.config.partial import error_places, independent, skipped_checks
from gke_tpu_priority.components.config.platform import PlatformConfig
from gke_tpu_priority.components.config.priorities import NAME_PATTERN
from gke_tpu_priority.components.config.queues import ClusterQueueSpec
from gke_tpu_priority.components.config.resolved import effective_cluster_queues, effective_local_queues
from gke_tpu_priority.components.config.spelling import camel_case_keys

FLEET_CONFIG_KEY = "fleet"
FLEET_CONFIG_PATH = f"gke-tpu-priority:{FLEET_CONFIG_KEY}"
_DURATION = r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$"
MIN_WORKERS = 2


class DispatcherMode(StrEnum):
    ALL_AT_ONCE = "AllAtOnce"
    INCREMENTAL = "Incremental"


DISPATCHER_NAMES = {
    DispatcherMode.ALL_AT_ONCE: "kueue.x-k8s.io/multikueue-dispatcher-all-at-once",
    DispatcherMode.INCREMENTAL: "kueue.x-k8s.io/multikueue-dispatcher-incremental",
}


class MultiKueueSettings(ConfigModel):
    dispatcher: DispatcherMode = Field(
        default=DispatcherMode.ALL_AT_ONCE,
        description="How the manager picks workers: `AllAtOnce` (Kueue's default) offers a workload to every "
        "worker and keeps the first that admits it; `Incremental` offers it to a few workers at a time, in the "
        "order of `workers` (the dispatch preference).",
    )
    incremental_step_size: int | None = Field(
        default=None,
        ge=1,
        description="Workers the Incremental dispatcher asks at a time (Kueue's default 3); only with "
        "`dispatcher: Incremental`.",
    )
    gc_interval: str = Field(
        default="1m",
        pattern=_DURATION,
        description="Interval of the manager's garbage collection of orphaned remote objects (`0s` disables it).",
    )
    origin: str = Field(
        default="multikueue",
        pattern=NAME_PATTERN,
        max_length=63,
        description="Label value marking the objects this manager creates in the workers (label "
        "`kueue.x-k8s.io/multikueue-origin`); unique per manager when several managers share a worker.",
    )
    worker_lost_timeout: str = Field(
        default="15m",
        pattern=_DURATION,
        description="How long a workload stays admitted on a worker the manager lost contact with before it is "
        "requeued elsewhere.",
    )
    credentials_generation: int = Field(
        default=1,
        ge=1,
        description="Generation of the manager's worker tokens: raise it by one and `pulumi up` to rotate every "
        "worker token (a new token Secret is made, the kubeconfigs switch to it, the old one is deleted).",
    )

    @model_validator(mode="after")
    def _check(self) -> MultiKueueSettings:
        if self.incremental_step_size is not None and self.dispatcher is not DispatcherMode.INCREMENTAL:
            raise problems_error(
                [
                    f".incrementalStepSize: {self.incremental_step_size} is set but dispatcher is "
                    f"{self.dispatcher.value!r}; it applies only with `dispatcher: Incremental`"
                ]
            )
        return self


class ManagerSettings(ConfigModel):
    project: str = Field(
        pattern=r"^[a-z][-a-z0-9]{4,28}[a-z0-9]$", description="GCP project id of the manager cluster."
    )
    region: str = Field(pattern=r"^[a-z]+-[a-z]+[0-9]+$", description="GCP region of the manager cluster.")
    mode: ClusterMode = Field(
        default=ClusterMode.CREATE,
        description="`create` a small CPU-only GKE Autopilot cluster for the manager, or use an `existing` one.",
    )
    name: str = Field(
        default="tpu-fleet-manager",
        pattern=r"^[a-z]([-a-z0-9]*[a-z0-9])?$",
        max_length=40,
        description="Name of the manager's GKE cluster.",
    )
    location: str | None = Field(
        default=None,
        pattern=r"^[a-z]+-[a-z]+[0-9]+(-[a-z])?$",
        description="Location of an existing manager cluster (region or zone); default `region`.",
    )
    release_channel: ReleaseChannel = Field(
        default=ReleaseChannel.REGULAR, description="GKE release channel of a created manager cluster."
    )
    protect: bool = Field(default=False, description="Pulumi `protect` and GKE deletion protection on the manager.")
    kubernetes_auth: KubernetesAuth = Field(
        default=KubernetesAuth.ADC, description="How Pulumi authenticates to the manager (gke-gcloud-auth-plugin)."
    )
    kueue: KueueSettings = Field(default_factory=KueueSettings, description="Kueue on the manager.")
    jobset: JobSetSettings = Field(
        default_factory=JobSetSettings,
        description="JobSet on the manager (its CRD; the controller skips JobSets that MultiKueue manages).",
    )


class FleetWorker(ConfigModel):
    name: str = Field(
        pattern=NAME_PATTERN,
        max_length=40,
        description="Worker name: its MultiKueueCluster and kubeconfig Secret on the manager are named after it.",
    )
    platform: PlatformConfig = Field(
        description="The worker's whole platform, in the schema of the `gke-tpu-priority:platform` setting."
    )


class ManagerQuota(ConfigModel):
    cluster_queue: str = Field(description="Manager ClusterQueue (a ClusterQueue name every worker has).")
    flavor: str = Field(description="ResourceFlavor of that queue.")
    chips: int = Field(ge=0, description="Nominal quota on the manager in chips (default: the workers' sum).")


class FleetConfig(ConfigModel):
    manager: ManagerSettings = Field(description="The MultiKueue manager cluster.")
    workers: list[FleetWorker] = Field(
        description="The TPU worker platforms, most preferred first (the Incremental dispatcher's order)."
    )
    multi_kueue: MultiKueueSettings = Field(
        default_factory=MultiKueueSettings, description="MultiKueue settings of the manager."
    )
    manager_quotas: list[ManagerQuota] = Field(
        default_factory=list,
        description="Overrides of the manager's derived quotas (each manager ClusterQueue's quota per flavor "
        "defaults to the sum of the workers' quotas).",
    )
    allow_overcommit: bool = Field(
        default=False, description="Allow `managerQuotas` above the sum of the workers' quotas."
    )

    def worker_queues(self) -> list[list[ClusterQueueSpec]]:
        return [effective_cluster_queues(w.platform.queues, w.platform.flavors) for w in self.workers]

    def worker_quota(self) -> dict[tuple[str, str], dict[str, int]]:
        """(ClusterQueue, flavor) -> worker name -> nominal chips."""
        out: dict[tuple[str, str], dict[str, int]] = defaultdict(dict)
        for worker, queues in zip(self.workers, self.worker_queues(), strict=True):
            for cq in queues:
                for quota in cq.quotas:
                    out[cq.name, quota.flavor][worker.name] = quota.chips
        return out

    @model_validator(mode="after")
    def _cross_field(self) -> FleetConfig:
        # Independent checks, as PlatformConfig's: one mistake never hides another, and on a partly valid fleet
        # (components.config.partial) each check that can be judged on the valid fields reports in the same run as
        # the field mistakes; one that needs a field that failed is left out.
        names = independent(self._worker_name_problems)
        problems = [
            *independent(self._worker_count_problems),
            *names,
            *independent(self._worker_cluster_problems),
            *independent(self._sameness_problems),
        ]
        # The workers' quotas are summed per worker name: with two workers of one name the sums would mislead.
        if not names:
            problems += independent(self._manager_quota_problems)
        if problems:
            raise problems_error(problems)
        return self

    def _worker_count_problems(self) -> list[str]:
        if len(self.workers) >= MIN_WORKERS:
            return []
        return [
            f".workers: {len(self.workers)} worker(s) given; a fleet needs at least {MIN_WORKERS} (for one "
            "cluster use the `gke-tpu-priority:platform` setting)"
        ]

    def _worker_name_problems(self) -> list[str]:
        names: dict[str, int] = {}

        def one(i: int) -> list[str]:
            name = self.workers[i].name
            first = names.setdefault(name, i)
            if first == i:
                return []
            return [f".workers[{i}].name: {name!r} is already used by workers[{first}]; worker names must be unique"]

        return independent(*(lambda i=i: one(i) for i in range(len(self.workers))))

    def _worker_cluster_problems(self) -> list[str]:
        """Each worker's GKE cluster: named, reached by its endpoint, its own and not the manager's."""
        clusters: dict[tuple[str, str, str], int] = {}

        def existing_name(i: int) -> list[str]:
            p = self.workers[i].platform
            if p.cluster.is_existing() and "name" not in p.cluster.model_fields_set:
                return [
                    f".workers[{i}].platform.cluster.name: required with `cluster.mode: existing` (the manager "
                    "reaches the worker's GKE cluster by name); set the existing cluster's name"
                ]
            return []

        def context(i: int) -> list[str]:
            cluster = self.workers[i].platform.cluster
            if cluster.kubeconfig_context is None:
                return []
            return [
                f".workers[{i}].platform.cluster.kubeconfigContext: {cluster.kubeconfig_context!r} is not "
                "allowed in a fleet: the manager needs the worker's GKE endpoint; name the cluster "
                "(`cluster.name`, `cluster.location`) instead"
            ]

        def key(i: int) -> tuple[str, str, str] | None:
            p = self.workers[i].platform
            if not isinstance(p.cluster.name, str) or not isinstance(p.project, str):
                return None
            return (p.project, p.cluster.location or p.region, p.cluster.name)

        def own_cluster(i: int) -> list[str]:
            mine = key(i)
            if mine is None:
                return [f".workers[{i}].platform: project and cluster.name must be plain strings in a fleet"]
            first = clusters.setdefault(mine, i)
            if first == i:
                return []
            return [
                f".workers[{i}].platform.cluster.name: {mine[2]!r} in {mine[1]!r} (project {mine[0]!r}) is "
                f"already workers[{first}]'s cluster; give each worker its own region or cluster name"
            ]

        def not_the_manager(i: int) -> list[str]:
            mine, m = key(i), self.manager
            if mine is None or mine != (m.project, m.location or m.region, m.name):
                return []
            return [
                f".workers[{i}].platform.cluster.name: {mine[2]!r} in {mine[1]!r} is the manager "
                "cluster; a worker may not also be the manager (use another cluster)"
            ]

        return independent(
            *(
                lambda i=i, check=check: check(i)
                for i in range(len(self.workers))
                for check in (existing_name, context, own_cluster, not_the_manager)
            )
        )

    def _sameness_problems(self) -> list[str]:
        """Kueue matches by name: tiers, queues, namespaces must be the same in every cluster. Each worker's is
        compared with workers[0]'s, one kind at a time, so a kind that cannot be judged leaves the others judged."""
        kinds: tuple[tuple[str, Callable[[PlatformConfig], Any], str], ...] = (
            (
                "priorities",
                lambda p: [(t.name, t.value) for t in p.priorities],
                "{other} differ from workers[0]'s {first}; every cluster of a fleet needs identical tiers "
                "(names and values)",
            ),
            (
                "queues.clusterQueues",
                _queue_shape,
                "names/namespaces/cohorts {other} differ from workers[0]'s {first}; ClusterQueues must be the same "
                "in every worker (only quotas and flavors may differ)",
            ),
            (
                "queues.localQueues",
                lambda p: sorted((q.namespace, q.name, q.cluster_queue) for q in effective_local_queues(p.queues)),
                "{other} differ from workers[0]'s {first}; MultiKueue needs the same namespaces and LocalQueues in "
                "every cluster",
            ),
            (
                "queues.cohorts",
                lambda p: sorted((c.name, c.parent) for c in p.queues.cohorts),
                "differ from workers[0]'s {first}; cohorts must be the same in every worker",
            ),
        )

        def compare(i: int, path: str, shape: Callable[[PlatformConfig], Any], text: str) -> list[str]:
            first, other = shape(self.workers[0].platform), shape(self.workers[i].platform)
            if other == first:
                return []
            return [f".workers[{i}].platform.{path}: " + text.format(other=show_value(other), first=show_value(first))]

        return independent(
            *(lambda i=i, kind=kind: compare(i, *kind) for i in range(1, len(self.workers)) for kind in kinds)
        )

    def _manager_quota_problems(self) -> list[str]:
        seen: dict[tuple[str, str], int] = {}

        def duplicate(i: int) -> list[str]:
            mq = self.manager_quotas[i]
            key = (mq.cluster_queue, mq.flavor)
            first = seen.setdefault(key, i)
            return (
                [] if first == i else [f".managerQuotas[{i}]: {key[0]!r}/{key[1]!r} is already managerQuotas[{first}]"]
            )

        # Judged against every worker's quotas: a worker whose queues or pools failed leaves these out.
        backing = self.worker_quota()
        queues = {cq.name: {q.flavor for q in cq.quotas} for qs in self.worker_queues() for cq in qs}

        def backed(i: int) -> list[str]:
            mq = self.manager_quotas[i]
            key = (mq.cluster_queue, mq.flavor)
            if mq.cluster_queue not in queues:
                return [
                    f".managerQuotas[{i}].clusterQueue: {mq.cluster_queue!r} is not a ClusterQueue of the workers "
                    f"(have: {', '.join(sorted(queues))})"
                ]
            if key not in backing:
                return [
                    f".managerQuotas[{i}].flavor: {mq.flavor!r} has no quota in ClusterQueue "
                    f"{mq.cluster_queue!r} on any worker (flavors: {', '.join(sorted(queues[mq.cluster_queue]))})"
                ]
            total = sum(backing[key].values())
            if mq.chips > total and not self.allow_overcommit:
                per = ", ".join(f"{w}: {c}" for w, c in backing[key].items())
                return [
                    f".managerQuotas[{i}].chips: {mq.chips} exceeds the {total} chips the workers back for "
                    f"{mq.cluster_queue!r}/{mq.flavor!r} ({per}); use at most {total} or set "
                    "`allowOvercommit: true`"
                ]
            return []

        return independent(
            *(
                lambda i=i, check=check: check(i)
                for i in range(len(self.manager_quotas))
                for check in (duplicate, backed)
            )
        )


def _queue_shape(p: PlatformConfig) -> list[tuple[str, str, str]]:
    from gke_tpu_priority.components.queues.objects import namespace_selector

    return sorted(
        (cq.name, str(cq.cohort), repr(namespace_selector(cq))) for cq in effective_cluster_queues(p.queues, p.flavors)
    )


def show_value(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


@dataclass(frozen=True)
class CheckGroup:
    """One AdmissionCheck + MultiKueueConfig: the manager ClusterQueues that exactly this set of workers backs.

    Kueue v0.19.2 allows a ClusterQueue one MultiKueue check, on all its flavors (pkg/cache/scheduler/clusterqueue.go
    updateWithAdmissionChecks: MultipleMultiKueueAdmissionChecks, MultiKueueAdmissionCheckAppliedPerFlavor), so the
    groups are per ClusterQueue; a queue's workers are those backing any of its flavors.
    """

    name: str
    workers: tuple[str, ...]
    flavors: tuple[str, ...]
    cluster_queues: tuple[str, ...] = ()


def check_groups(config: FleetConfig) -> list[CheckGroup]:
    """ClusterQueues backed by the same workers share a MultiKueueConfig; one group (every worker) is `multikueue`."""
    order = [w.name for w in config.workers]
    backing: dict[str, set[str]] = defaultdict(set)
    listed: dict[str, set[str]] = defaultdict(set)
    flavors_of: dict[str, set[str]] = defaultdict(set)
    for (cq, flavor), per_worker in config.worker_quota().items():
        backing[cq] |= {w for w, chips in per_worker.items() if chips > 0}
        listed[cq] |= set(per_worker)
        flavors_of[cq].add(flavor)
    workers_of = {cq: backing[cq] or listed[cq] for cq in listed}
    groups: dict[tuple[str, ...], list[str]] = defaultdict(list)
    for cq in sorted(workers_of):
        groups[tuple(w for w in order if w in workers_of[cq])].append(cq)

    def group(name: str, workers: tuple[str, ...], cqs: list[str]) -> CheckGroup:
        return CheckGroup(name, workers, tuple(sorted(set().union(*(flavors_of[c] for c in cqs)))), tuple(cqs))

    if len(groups) == 1:
        ((workers, cqs),) = groups.items()
        return [group("multikueue", workers, cqs)]
    return [group(f"multikueue-{cqs[0]}", workers, cqs) for workers, cqs in groups.items()]


def parse_fleet_config(raw: Any, *, stack_file: bool = False) -> FleetConfig:
    """Validate the raw `gke-tpu-priority:fleet` object; raise ConfigError listing every problem."""
    if not isinstance(raw, dict):
        raise ConfigError(FLEET_CONFIG_KEY, [f"{FLEET_CONFIG_KEY}: expected an object, got {type(raw).__name__}"])
    # Only a stack file is held to camelCase: components built from other languages' typed inputs arrive with
    # field names.
    cleaned, spelling = camel_case_keys(FleetConfig, raw, FLEET_CONFIG_KEY) if stack_file else (raw, [])
    try:
        config = FleetConfig.model_validate(cleaned)
    except ValidationError as err:
        formatted = format_validation_error(FLEET_CONFIG_KEY, err, model=FleetConfig)
        # The cross-field checks pydantic skipped because of these errors (each worker's platform checks
        # included), on the fields that are valid.
        skipped = skipped_checks(FleetConfig, cleaned, error_places(err), FLEET_CONFIG_KEY)
        raise ConfigError(FLEET_CONFIG_KEY, list(dict.fromkeys([*spelling, *formatted.problems, *skipped]))) from None
    if spelling:
        raise ConfigError(FLEET_CONFIG_KEY, spelling)
    return config
