"""Kueue queues from stack config: resource flavors, cohorts, ClusterQueues and LocalQueues."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import Field, model_validator

from gke_tpu_priority.components.config.base import ConfigModel, problems_error
from gke_tpu_priority.components.config.priorities import NAME_PATTERN
from gke_tpu_priority.components.config.tpu import QUEUED_CAPACITY, CapacityMode

RESERVED_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


class WithinClusterQueue(StrEnum):
    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"
    LOWER_OR_NEWER_EQUAL_PRIORITY = "LowerOrNewerEqualPriority"


class ReclaimWithinCohort(StrEnum):
    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"
    ANY = "Any"


class BorrowPolicy(StrEnum):
    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"


class QueueingStrategy(StrEnum):
    BEST_EFFORT_FIFO = "BestEffortFIFO"
    STRICT_FIFO = "StrictFIFO"


class FlavorPreference(StrEnum):
    BORROWING_OVER_PREEMPTION = "BorrowingOverPreemption"
    PREEMPTION_OVER_BORROWING = "PreemptionOverBorrowing"


# Ladder rungs in the only order the ladder accepts: capacity already paid for, then the cheapest that is there now,
# then capacity that may take a while. Queued flex-start waits on Dynamic Workload Scheduler, so it is always last.
LADDER_ORDER = ("reservation", "spot", "flex-start", "on-demand", QUEUED_CAPACITY)


class FlavorSpec(ConfigModel):
    name: str = Field(pattern=NAME_PATTERN, max_length=63, description="ResourceFlavor name.")
    topology: str | None = Field(
        default=None, description="Only slices of this topology; unset matches every v6e slice (one flavor for all)."
    )
    machine_type: str | None = Field(default=None, description="Only this machine type (needed to split 2x4 shapes).")
    capacity: CapacityMode | None = Field(default=None, description="Only pools with this capacity mode.")
    queued_provisioning: bool | None = Field(
        default=None,
        description="With capacity `flex-start`: `true` selects only queued-provisioning pools, `false` (or unset) "
        "only the others (the flavor selects the capacity node label `flex-start-queued` or `flex-start`).",
    )

    @property
    def capacity_class(self) -> str | None:
        """The capacity node label value this flavor selects, if any."""
        if self.capacity is None:
            return None
        return QUEUED_CAPACITY if self.queued_provisioning else self.capacity.value

    @model_validator(mode="after")
    def _queued_needs_flex_start(self) -> FlavorSpec:
        if self.queued_provisioning is not None and self.capacity is not CapacityMode.FLEX_START:
            shown = "unset" if self.capacity is None else f"`{self.capacity.value}`"
            raise ValueError(
                f".queuedProvisioning: only valid with capacity `flex-start` (capacity is {shown}); set "
                "`capacity: flex-start` or remove it"
            )
        return self


class Quota(ConfigModel):
    flavor: str = Field(description="ResourceFlavor the quota applies to.")
    chips: int = Field(ge=0, description="Nominal quota in TPU chips (`google.com/tpu`).")
    borrowing_limit: int | None = Field(
        default=None, ge=0, description="Chips this queue may borrow from its cohort beyond its quota (unset: any)."
    )
    lending_limit: int | None = Field(
        default=None, ge=0, description="Chips of this quota the cohort may borrow (unset: all unused)."
    )


class BorrowWithinCohort(ConfigModel):
    policy: BorrowPolicy = Field(description="Whether to preempt while borrowing.")
    max_priority_threshold: int | None = Field(
        default=None, description="Only preempt workloads at or below this priority while borrowing."
    )


class Preemption(ConfigModel):
    within_cluster_queue: WithinClusterQueue = Field(
        default=WithinClusterQueue.LOWER_PRIORITY, description="Admission-time preemption inside the queue."
    )
    reclaim_within_cohort: ReclaimWithinCohort = Field(
        default=ReclaimWithinCohort.LOWER_PRIORITY,
        description="Reclaim lent quota from other queues of the cohort. `LowerPriority` (default) evicts only "
        "borrowing workloads of lower priority than the reclaiming one; `Any` evicts them irrespective of priority, "
        "so a low-priority workload the hotswap reconciler releases could evict the high-priority JobSet it was "
        "held for (the reconciler then defers such releases while an operation in another queue is open).",
    )
    borrow_within_cohort: BorrowWithinCohort | None = Field(
        default=None, description="Preemption while borrowing (only with a cohort)."
    )


class ClusterQueueSpec(ConfigModel):
    name: str = Field(pattern=NAME_PATTERN, max_length=63, description="ClusterQueue name.")
    cohort: str | None = Field(default=None, description="Cohort to share (borrow and lend) quota in.")
    namespaces: list[str] = Field(
        default_factory=list,
        description="Namespaces whose LocalQueues may use this queue (a selector on kubernetes.io/metadata.name).",
    )
    namespace_selector: dict[str, Any] | None = Field(
        default=None,
        description="Raw label selector instead of `namespaces`; `{}` admits every namespace. A ClusterQueue "
        "without a selector admits no namespace.",
    )
    quotas: list[Quota] = Field(
        default_factory=list, description="Chip quotas per flavor (or `ladder`, not both; one of them is required)."
    )
    ladder: list[Quota] | None = Field(
        default=None,
        description="Capacity ladder instead of `quotas`: the same `{flavor, chips, ...}` rungs in preference order "
        "(reservation, spot, flex-start, on-demand, queued flex-start). Kueue tries the rungs in order and stops at "
        "the first that fits now, trying the next instead of preempting, so a workload lands on the cheapest capacity "
        "free now and reaches queued flex-start (DWS) only when the rest is full. Each rung's flavor must select one "
        "capacity mode, and its quota may not exceed what the flavor's pools provide, `allowOvercommit` or not.",
    )
    ladder_preference: FlavorPreference | None = Field(
        default=None,
        description="Ladder only: when every rung needs borrowing or preemption, prefer `BorrowingOverPreemption` or "
        "`PreemptionOverBorrowing` (Kueue `flavorFungibility.preference`). Setting it also makes Kueue try the next "
        "rung rather than borrow (Kueue allows a preference only with `whenCanBorrow: TryNextFlavor`). Unset: "
        "borrowing cohort quota on a cheaper rung beats the queue's own quota on a dearer one.",
    )
    preemption: Preemption = Field(default_factory=Preemption, description="Kueue admission-time preemption.")
    queueing_strategy: QueueingStrategy = Field(default=QueueingStrategy.BEST_EFFORT_FIFO, description="Ordering.")
    fair_sharing_weight: str | None = Field(
        default=None, pattern=r"^[0-9]+(\.[0-9]+)?$", description="Fair-sharing weight (default 1)."
    )

    @model_validator(mode="after")
    def _check(self) -> ClusterQueueSpec:
        problems = []
        if not self.namespaces and self.namespace_selector is None:
            problems.append(
                ": no `namespaces` and no `namespaceSelector`: Kueue would admit workloads from no namespace; "
                "list the team namespaces (or `namespaceSelector: {}` for all)"
            )
        if self.namespaces and self.namespace_selector is not None:
            problems.append(": set either `namespaces` or `namespaceSelector`, not both")
        field = "ladder" if self.ladder is not None else "quotas"
        if self.ladder is not None and self.quotas:
            problems.append(
                ": set either `quotas` or `ladder`, not both (a ladder lists the quotas in preference order)"
            )
        elif self.ladder is None and not self.quotas:
            problems.append(": needs `quotas` (chips per flavor) or `ladder` (the same, in preference order)")
        elif self.ladder is not None and not self.ladder:
            problems.append(".ladder: lists no rung; give at least one `{flavor, chips}`")
        if self.ladder is None and self.ladder_preference is not None:
            problems.append(".ladderPreference: only valid with `ladder`")
        seen: set[str] = set()
        for i, quota in enumerate(self.flavor_quotas):
            if quota.flavor in seen:
                problems.append(f".{field}[{i}].flavor: {quota.flavor!r} appears twice; merge the quotas")
            seen.add(quota.flavor)
            if quota.lending_limit is not None and quota.lending_limit > quota.chips:
                problems.append(f".{field}[{i}].lendingLimit: {quota.lending_limit} exceeds the quota {quota.chips}")
            if self.cohort is None and (quota.borrowing_limit is not None or quota.lending_limit is not None):
                problems.append(f".{field}[{i}]: borrowingLimit/lendingLimit need a `cohort` to borrow from or lend to")
        if self.cohort is None and self.preemption.borrow_within_cohort is not None:
            problems.append(".preemption.borrowWithinCohort: needs a `cohort`")
        if problems:
            raise problems_error(problems)
        return self

    @property
    def flavor_quotas(self) -> list[Quota]:
        """The queue's quotas in resource-group order: the ladder's rungs, or `quotas`."""
        return list(self.ladder) if self.ladder is not None else list(self.quotas)


class LocalQueueSpec(ConfigModel):
    name: str = Field(pattern=NAME_PATTERN, max_length=63, description="LocalQueue name (the queue-name label).")
    namespace: str = Field(pattern=NAME_PATTERN, max_length=63, description="Namespace of the LocalQueue.")
    cluster_queue: str = Field(description="ClusterQueue it submits to.")


class CohortSpec(ConfigModel):
    name: str = Field(pattern=NAME_PATTERN, max_length=63, description="Cohort name.")
    parent: str | None = Field(default=None, description="Parent cohort (hierarchical cohorts).")
    fair_sharing_weight: str | None = Field(
        default=None, pattern=r"^[0-9]+(\.[0-9]+)?$", description="Fair-sharing weight of this cohort in its parent."
    )


class QueuedProvisioningSettings(ConfigModel):
    name: str = Field(
        default="tpu-queued-provisioning",
        pattern=NAME_PATTERN,
        max_length=63,
        description="Name of the AdmissionCheck and of the ProvisioningRequestConfig it references (created only when "
        "a pool has `capacity.queuedProvisioning`).",
    )
    backoff_limit_count: int = Field(
        default=3,
        ge=0,
        le=2**31 - 1,
        description="Times Kueue retries a failed or expired ProvisioningRequest before the workload is evicted "
        "and requeued (ProvisioningRequestConfig `retryStrategy.backoffLimitCount`).",
    )
    backoff_base_seconds: int = Field(
        default=60, ge=0, le=2**31 - 1, description="Retry backoff base (`retryStrategy.backoffBaseSeconds`)."
    )
    backoff_max_seconds: int = Field(
        default=1800, ge=0, le=2**31 - 1, description="Retry backoff ceiling (`retryStrategy.backoffMaxSeconds`)."
    )

    @model_validator(mode="after")
    def _check(self) -> QueuedProvisioningSettings:
        if self.backoff_max_seconds < self.backoff_base_seconds:
            raise ValueError(
                f".backoffMaxSeconds: {self.backoff_max_seconds} is below backoffBaseSeconds "
                f"{self.backoff_base_seconds}; the ceiling must be at least the base"
            )
        return self


class QueuesConfig(ConfigModel):
    flavors: list[FlavorSpec] | None = Field(
        default=None,
        description="ResourceFlavors; unset derives one per slice shape (and per capacity mode where a shape mixes "
        "reservation and spot), named `v6e-<topology>[-<capacity>]`.",
    )
    cohorts: list[CohortSpec] = Field(default_factory=list, description="Cohorts.")
    cluster_queues: list[ClusterQueueSpec] | None = Field(
        default=None,
        description="ClusterQueues; unset creates `tpu-training` with every chip, for namespace `tpu-training`.",
    )
    local_queues: list[LocalQueueSpec] | None = Field(
        default=None, description="LocalQueues; unset creates `training` in namespace `tpu-training`."
    )
    allow_overcommit: bool = Field(
        default=False,
        description="Allow nominal quotas above the chips provisioned (e.g. for flex-start or scale-to-zero pools "
        "that grow on demand).",
    )
    manage_namespaces: bool = Field(
        default=True, description="Declare the LocalQueues' namespaces (except built-in ones such as `default`)."
    )
    queued_provisioning: QueuedProvisioningSettings = Field(
        default_factory=QueuedProvisioningSettings,
        description="The AdmissionCheck and ProvisioningRequestConfig for queued-provisioning pools: name and retries.",
    )

    @model_validator(mode="after")
    def _unique_names(self) -> QueuesConfig:
        problems = []
        for field, items in (
            ("flavors", self.flavors or []),
            ("cohorts", self.cohorts),
            ("clusterQueues", self.cluster_queues or []),
        ):
            seen: dict[str, int] = {}
            for i, item in enumerate(items):
                item_name = getattr(item, "name", None)
                if item_name is None:
                    continue  # a partly valid item whose name failed (reported on its own)
                if item_name in seen:
                    problems.append(f".{field}[{i}].name: {item_name!r} is already used by {field}[{seen[item_name]}]")
                seen.setdefault(item_name, i)
        lq_seen: dict[tuple[str, str], int] = {}
        for i, lq in enumerate(self.local_queues or []):
            key = (lq.namespace, lq.name)
            if key in lq_seen:
                problems.append(
                    f".localQueues[{i}].name: {lq.name!r} in namespace {lq.namespace!r} is already used by "
                    f"localQueues[{lq_seen[key]}]"
                )
            lq_seen.setdefault(key, i)
        cohort_names = {c.name for c in self.cohorts}
        for i, cohort in enumerate(self.cohorts):
            if cohort.parent is not None and cohort.parent not in cohort_names:
                problems.append(f".cohorts[{i}].parent: unknown cohort {cohort.parent!r}; declare it in `cohorts`")
        parents = {c.name: c.parent for c in self.cohorts}
        for i, cohort_spec in enumerate(self.cohorts):
            seen_chain = {cohort_spec.name}
            cursor = cohort_spec.parent
            while cursor is not None and cursor in parents:
                if cursor in seen_chain:
                    problems.append(f".cohorts[{i}].parent: cohort {cohort_spec.name!r} is part of a parent cycle")
                    break
                seen_chain.add(cursor)
                cursor = parents[cursor]
        for i, cq in enumerate(self.cluster_queues or []):
            if cq.cohort is not None and cq.cohort not in cohort_names:
                known = ", ".join(sorted(cohort_names)) or "none declared"
                problems.append(f".clusterQueues[{i}].cohort: unknown cohort {cq.cohort!r} (cohorts: {known})")
        cq_names = {cq.name for cq in self.cluster_queues or []}
        if self.local_queues is not None and self.cluster_queues is not None:
            for i, lq in enumerate(self.local_queues):
                if lq.cluster_queue not in cq_names:
                    problems.append(
                        f".localQueues[{i}].clusterQueue: {lq.cluster_queue!r} is not a ClusterQueue of this stack "
                        f"(have: {', '.join(sorted(cq_names)) or 'none'})"
                    )
        if (self.local_queues is None) != (self.cluster_queues is None):
            problems.append("set both `clusterQueues` and `localQueues`, or neither (for the defaults)")
        if problems:
            raise problems_error(problems)
        return self
