"""The root stack configuration object: everything one environment needs, validated before any resource."""

from __future__ import annotations

import itertools
from typing import Any

from pydantic import Field, ValidationError, model_validator
from pydantic.alias_generators import to_camel

from gke_tpu_priority.components.config.admission import AdmissionPolicySettings
from gke_tpu_priority.components.config.base import ConfigModel, problems_error
from gke_tpu_priority.components.config.cluster import (
    ClusterSettings,
    NetworkConfig,
    SystemPool,
    gke_version_needs,
    version_floor_problems,
)
from gke_tpu_priority.components.config.errors import ConfigError, format_validation_error
from gke_tpu_priority.components.config.hotswap import HotswapSettings
from gke_tpu_priority.components.config.inputs import InputStr
from gke_tpu_priority.components.config.kueue import JobSetSettings, KueueSettings, duration_seconds
from gke_tpu_priority.components.config.partial import error_places, independent, skipped_checks
from gke_tpu_priority.components.config.priorities import PriorityTier, default_tiers
from gke_tpu_priority.components.config.queues import LADDER_ORDER, RESERVED_NAMESPACES, ClusterQueueSpec, QueuesConfig
from gke_tpu_priority.components.config.resolved import (
    Flavor,
    effective_cluster_queues,
    effective_local_queues,
    resolve_flavors,
)
from gke_tpu_priority.components.config.spelling import camel_case_keys
from gke_tpu_priority.components.config.tenancy import TeamSpec, team_problems
from gke_tpu_priority.components.config.tpu import CAPACITY_LABEL, QUEUED_CAPACITY, CapacityMode, TpuPoolGroup
from gke_tpu_priority.components.config.zones import allowed_zones, zone_problem
from gke_tpu_priority.components.tpu_shapes import SHAPES, TOPOLOGY_LABEL

CONFIG_KEY = "platform"
CONFIG_PATH = f"gke-tpu-priority:{CONFIG_KEY}"
SYSTEM_POOL_NAME = "system"


class PlatformConfig(ConfigModel):
    project: InputStr = Field(
        pattern=r"^[a-z][-a-z0-9]{4,28}[a-z0-9]$",
        description="GCP project id that hosts the platform (may be another resource's output).",
    )
    region: str = Field(pattern=r"^[a-z]+-[a-z]+[0-9]+$", description="GCP region of the cluster, e.g. `us-east5`.")
    protect: bool = Field(
        default=False,
        description=(
            "Production safety: Pulumi `protect` on the cluster, TPU pools and workload namespaces, GKE deletion "
            "protection and node pool `deletionPolicy: PREVENT`. Turn off (and `pulumi up`) before a destroy."
        ),
    )
    labels: dict[str, str] = Field(
        default_factory=dict, description="GCP resource labels added to the cluster and its node pools."
    )
    network: NetworkConfig = Field(default_factory=NetworkConfig, description="VPC settings.")
    cluster: ClusterSettings = Field(default_factory=ClusterSettings, description="GKE cluster settings.")
    system_pool: SystemPool = Field(default_factory=SystemPool, description="The non-TPU system node pool.")
    tpu_pools: list[TpuPoolGroup] = Field(
        min_length=1,
        description="TPU v6e slice pool groups; each group is one shape, zone and capacity mode.",
    )
    additional_tpu_zones: list[str] = Field(
        default_factory=list,
        description=(
            "Zones of `region` where your project has TPU v6e capacity but that are not in the package's table of "
            "zones Google documents for v6e (a newly launched zone, single-tenant capacity, an AI zone). A pool "
            "group's `zone` must be in the table or in this list."
        ),
    )

    kueue: KueueSettings = Field(default_factory=KueueSettings, description="Kueue installation and manager config.")
    jobset: JobSetSettings = Field(default_factory=JobSetSettings, description="JobSet installation.")
    priorities: list[PriorityTier] = Field(
        default_factory=default_tiers,
        min_length=1,
        description="Priority tiers; each becomes a PriorityClass and a WorkloadPriorityClass of the same name/value.",
    )
    queues: QueuesConfig = Field(default_factory=QueuesConfig, description="Kueue flavors, cohorts and queues.")
    hotswap: HotswapSettings = Field(default_factory=HotswapSettings, description="The hotswap reconciler.")
    admission_policy: AdmissionPolicySettings = Field(
        default_factory=AdmissionPolicySettings, description="The admission policy for TPU workloads."
    )
    teams: list[TeamSpec] = Field(
        default_factory=list,
        description="Teams sharing the cluster: their namespaces, the highest tier each may use (`maxTier`), "
        "whether they may protect JobSets from hotswap eviction, and the groups and users bound to the team role "
        "there. Unset: no entitlements and no team RoleBindings (every namespace with a LocalQueue may use every "
        "tier). Set: every namespace with a LocalQueue belongs to exactly one team.",
    )

    @property
    def flavors(self) -> list[Flavor]:
        return resolve_flavors(self.queues, self.tpu_pools)

    @property
    def fair_sharing(self) -> bool:
        if self.kueue.fair_sharing is not None:
            return self.kueue.fair_sharing
        per_cohort: dict[str, int] = {}
        for cq in effective_cluster_queues(self.queues, self.flavors):
            if cq.cohort:
                per_cohort[cq.cohort] = per_cohort.get(cq.cohort, 0) + 1
        return any(n > 1 for n in per_cohort.values())

    @property
    def tpu_zones(self) -> list[str]:
        return list(dict.fromkeys(g.zone for g in self.tpu_pools))

    @property
    def system_zones(self) -> list[str]:
        return self.system_pool.zones or self.tpu_zones

    @property
    def deletion_protection(self) -> bool:
        explicit = self.cluster.deletion_protection
        return self.protect if explicit is None else explicit

    @model_validator(mode="after")
    def _cross_field(self) -> PlatformConfig:
        # Independent checks, so that on a partly valid stack (components.config.partial) each one that can be
        # judged on the valid fields still reports in the same run as the field mistakes.
        pools = independent(self._pool_name_problems)
        priorities = independent(self._priority_problems)
        problems = [
            *pools,
            *independent(self._zone_problems),
            *independent(
                self._additional_zone_problems,
                lambda: version_floor_problems(self.cluster.min_master_version, gke_version_needs(self._flex())),
                self._queued_provisioning_problems,
            ),
            *priorities,
        ]
        # Quotas are judged against the flavors the pools make, and entitlements against the tiers: with clashing
        # pool names or tiers those would only repeat the same mistake in other words.
        if not pools:
            problems += independent(self._queue_problems, self._exempt_namespace_problems)
            if not priorities:
                problems += independent(
                    lambda: team_problems(self.teams, self.priorities, effective_local_queues(self.queues))
                )
        problems += independent(
            self._system_zone_problems,
            lambda: existing_cluster_problems(self) if self.cluster.is_existing() else [],
            lambda: starvation_grace_problems(self),
        )
        if problems:
            raise problems_error(problems)
        return self

    def _flex(self) -> list[int]:
        return [i for i, g in enumerate(self.tpu_pools) if g.capacity.mode is CapacityMode.FLEX_START]

    def _pool_name_problems(self) -> list[str]:
        problems: list[str] = []
        seen: dict[str, int] = {}
        pool_names: dict[str, str] = {}
        for i, group in enumerate(self.tpu_pools):
            if group.name in seen:
                problems.append(
                    f".tpuPools[{i}].name: {group.name!r} is already used by tpuPools[{seen[group.name]}]; "
                    "pool group names must be unique"
                )
            seen.setdefault(group.name, i)
            for pool in group.node_pool_names():
                if pool in pool_names and pool_names[pool] != group.name:
                    problems.append(
                        f".tpuPools[{i}].name: node pool {pool!r} collides with group {pool_names[pool]!r}; rename"
                    )
                pool_names.setdefault(pool, group.name)
            if group.name == SYSTEM_POOL_NAME:
                problems.append(f".tpuPools[{i}].name: {SYSTEM_POOL_NAME!r} is reserved for the system node pool")
        return problems

    def _zone_problems(self) -> list[str]:
        # Pool by pool: a pool whose zone failed its own check leaves the others' checked.
        return independent(*(lambda i=i: self._pool_zone_problems(i) for i in range(len(self.tpu_pools))))

    def _pool_zone_problems(self, i: int) -> list[str]:
        zone = self.tpu_pools[i].zone
        if not zone.startswith(f"{self.region}-"):
            return [
                f".tpuPools[{i}].zone: {zone!r} is not in region {self.region!r}; a TPU pool's zone "
                f"must be in the cluster's region; {allowed_zones(self.region, self.additional_tpu_zones)}"
            ]
        problem = zone_problem(f".tpuPools[{i}].zone", zone, self.region, self.additional_tpu_zones)
        return [problem] if problem else []

    def _additional_zone_problems(self) -> list[str]:
        return [
            f".additionalTpuZones[{j}]: {zone!r} is not a zone of region {self.region!r} "
            f"(expected `{self.region}-<zone letter>`, e.g. `{self.region}-a`)"
            for j, zone in enumerate(self.additional_tpu_zones)
            if not zone.startswith(f"{self.region}-") or zone.count("-") != 2
        ]

    def _exempt_namespace_problems(self) -> list[str]:
        exempt = set(self.admission_policy.exempt_namespaces)
        return [
            f".admissionPolicy.exemptNamespaces: {lq.namespace!r} has a LocalQueue "
            f"(queues.localQueues[{i}]); team namespaces are always checked, so remove it from the list"
            for i, lq in enumerate(effective_local_queues(self.queues))
            if lq.namespace in exempt
        ]

    def _system_zone_problems(self) -> list[str]:
        return [
            f".systemPool.zones[{j}]: {zone!r} is not in region {self.region!r}"
            for j, zone in enumerate(self.system_pool.zones)
            if not zone.startswith(f"{self.region}-")
        ]

    def _priority_problems(self) -> list[str]:
        problems: list[str] = []
        names: dict[str, int] = {}
        values: dict[int, int] = {}
        for i, tier in enumerate(self.priorities):
            if tier.name in names:
                problems.append(
                    f".priorities[{i}].name: {tier.name!r} is already used by priorities[{names[tier.name]}]"
                )
            names.setdefault(tier.name, i)
            if tier.value in values:
                problems.append(
                    f".priorities[{i}].value: {tier.value} equals priorities[{values[tier.value]}]; tiers need "
                    "distinct values so every preemption decision is strict"
                )
            values.setdefault(tier.value, i)
            if tier.name.startswith("system-"):
                problems.append(f".priorities[{i}].name: the `system-` prefix is reserved by Kubernetes")
        defaults = [i for i, t in enumerate(self.priorities) if t.global_default]
        if len(defaults) > 1:
            problems.append(f".priorities: {len(defaults)} tiers are globalDefault (indexes {defaults}); keep one")
        lowest = min(t.value for t in self.priorities)
        for i in defaults:
            if self.priorities[i].value != lowest:
                problems.append(
                    f".priorities[{i}].globalDefault: only the lowest tier may be the default "
                    f"(lowest value is {lowest})"
                )
        preempting = [t.value for t in self.priorities if t.preempts]
        for i, tier in enumerate(self.priorities):
            if not tier.preempts and preempting and tier.value >= min(preempting):
                problems.append(
                    f".priorities[{i}]: tier {tier.name!r} may not preempt but sits at or above a tier that may "
                    f"({min(preempting)}); give it a value below {min(preempting)} or let it preempt"
                )
        return problems

    @property
    def queued_provisioning(self) -> bool:
        """Whether any pool uses queued provisioning (the stack then gets the AdmissionCheck and its config)."""
        return any(g.capacity.queued_provisioning for g in self.tpu_pools)

    @property
    def queued_max_run_duration(self) -> str | None:
        """The one maxRunDuration every queued-provisioning pool agrees on (validated), if any sets it."""
        durations = {g.capacity.max_run_duration for g in self.tpu_pools if g.capacity.queued_provisioning}
        durations.discard(None)
        return next(iter(durations), None)

    def _queued_provisioning_problems(self) -> list[str]:
        """Queued-provisioning pools share one ProvisioningRequestConfig, so its maxRunDurationSeconds must fit all."""
        queued = [(i, g) for i, g in enumerate(self.tpu_pools) if g.capacity.queued_provisioning]
        durations = {g.capacity.max_run_duration or "unset (7 days)" for _, g in queued}
        if len(durations) <= 1:
            return []
        listed = ", ".join(f"tpuPools[{i}] {g.capacity.max_run_duration or 'unset'}" for i, g in queued)
        first = queued[0][0]
        return [
            f".tpuPools[{first}].capacity.maxRunDuration: queued-provisioning pools share one "
            f"ProvisioningRequestConfig (parameter maxRunDurationSeconds), so their maxRunDuration must agree; "
            f"they have {listed} — give them the same value"
        ]

    def _queue_problems(self) -> list[str]:
        problems: list[str] = []
        flavors = {f.name: f for f in self.flavors}
        for i, flavor in enumerate(self.flavors):
            if flavor.chips == 0:
                problems.append(
                    f".queues.flavors[{i}]: flavor {flavor.name!r} matches no TPU pool; pools provide "
                    f"{', '.join(sorted({g.shape.key for g in self.tpu_pools}))}"
                )
            if flavor.queued and len(flavor.capacity_classes) > 1:
                problems.append(
                    f".queues.flavors[{i}]: flavor {flavor.name!r} matches queued-provisioning pools and pools of "
                    f"capacity {', '.join(c for c in flavor.capacity_classes if c != QUEUED_CAPACITY)} "
                    f"({', '.join(flavor.pools)}); the admission check would send every workload on it to Dynamic "
                    "Workload Scheduler. Split it with `capacity: flex-start, queuedProvisioning: true`"
                )
        nominal: dict[str, int] = {}
        queues = effective_cluster_queues(self.queues, self.flavors)
        for i, cq in enumerate(queues):
            field = "ladder" if cq.ladder is not None else "quotas"
            for j, quota in enumerate(cq.flavor_quotas):
                if quota.flavor not in flavors:
                    problems.append(
                        f".queues.clusterQueues[{i}].{field}[{j}].flavor: {quota.flavor!r} is not a flavor of this "
                        f"stack (flavors: {', '.join(sorted(flavors))})"
                    )
                    continue
                nominal[quota.flavor] = nominal.get(quota.flavor, 0) + quota.chips
                slice_chips = flavor_slice_chips(flavors[quota.flavor])
                if slice_chips and 0 < quota.chips < slice_chips:
                    problems.append(
                        f".queues.clusterQueues[{i}].{field}[{j}].chips: {quota.chips} is less than one slice of "
                        f"flavor "
                        f"{quota.flavor!r} ({slice_chips} chips), so no workload could ever be admitted on it; use 0 "
                        f"(borrow only) or a multiple of {slice_chips}"
                    )
            if cq.ladder is not None:
                problems += _ladder_order_problems(i, cq, flavors)
        laddered = {q.flavor for cq in queues if cq.ladder is not None for q in cq.flavor_quotas}
        for name, chips in sorted(nominal.items()):
            if name in laddered and chips > flavors[name].chips:
                problems.append(
                    f".queues: ladder rung flavor {name!r} has {chips} chips of nominal quota across ClusterQueues but "
                    f"its pools provide {flavors[name].chips}; a ladder falls through to the next rung only when a "
                    "rung's quota is used up, so quota above the capacity would admit workloads onto nodes that are "
                    "not there instead of the next rung (`allowOvercommit` does not apply to ladder rungs); lower "
                    f"the rung quotas to {flavors[name].chips} chips in total"
                )
        if not self.queues.allow_overcommit:
            for name, chips in sorted(nominal.items()):
                if chips > flavors[name].chips and name not in laddered:
                    problems.append(
                        f".queues: ClusterQueues' nominal quota for flavor {name!r} totals {chips} chips but its "
                        f"pools provide {flavors[name].chips}; lower the quotas or set "
                        "`queues.allowOvercommit: true`"
                    )
        by_name = {q.name: q for q in queues}
        for i, lq in enumerate(effective_local_queues(self.queues)):
            target = by_name.get(lq.cluster_queue)
            if target is not None and target.namespaces and lq.namespace not in target.namespaces:
                problems.append(
                    f".queues.localQueues[{i}].namespace: {lq.namespace!r} is not among ClusterQueue "
                    f"{target.name!r}'s namespaces ({', '.join(target.namespaces)}); Kueue would never admit from it"
                )
            if lq.namespace in RESERVED_NAMESPACES[1:]:
                problems.append(f".queues.localQueues[{i}].namespace: {lq.namespace!r} is a system namespace")
        return problems


def _ladder_order_problems(index: int, cq: ClusterQueueSpec, flavors: dict[str, Flavor]) -> list[str]:
    """Each rung selects one capacity mode, and the rungs go cheapest and quickest first, queued flex-start last."""
    problems: list[str] = []
    where = f".queues.clusterQueues[{index}].ladder"
    ranks: list[tuple[int, int, str]] = []
    for j, rung in enumerate(cq.flavor_quotas):
        flavor = flavors.get(rung.flavor)
        if flavor is None or not flavor.capacity_classes:
            continue  # unknown or empty flavors are reported on their own
        if len(flavor.capacity_classes) > 1:
            problems.append(
                f"{where}[{j}].flavor: {rung.flavor!r} spans capacity modes {', '.join(flavor.capacity_classes)}; a "
                "ladder rung must be one mode (declare `queues.flavors` with `capacity`, or let the package derive "
                "per-mode flavors)"
            )
            continue
        ranks.append((LADDER_ORDER.index(flavor.capacity_classes[0]), j, flavor.capacity_classes[0]))
    for (rank, _, mode), (next_rank, j, next_mode) in itertools.pairwise(ranks):
        if next_rank < rank:
            problems.append(
                f"{where}[{j}].flavor: {cq.flavor_quotas[j].flavor!r} ({next_mode}) comes after a {mode} rung; a "
                f"ladder lists capacity in the order {', '.join(LADDER_ORDER)} so a workload takes the cheapest "
                "capacity free now and waits for Dynamic Workload Scheduler only when the rest is full"
            )
    return problems


def existing_cluster_problems(config: PlatformConfig) -> list[str]:
    """`cluster.mode: existing` creates no GCP resource: settings that only shape created resources are refused."""
    problems: list[str] = []
    location = config.cluster.location
    if location is not None and location != config.region and not location.startswith(f"{config.region}-"):
        problems.append(
            f".cluster.location: {location!r} is not in region {config.region!r}; set `region` to the cluster's "
            "region (its TPU pool zones are checked against it)"
        )
    created_only = {"network": ".network", "system_pool": ".systemPool", "labels": ".labels"}
    for field, path in created_only.items():
        if getattr(config, field) != PlatformConfig.model_fields[field].get_default(call_default_factory=True):
            problems.append(
                f"{path}: only applies to resources this package creates; remove it with `cluster.mode: existing` "
                "(set `cluster.systemNodeSelector` to pick the nodes the controllers run on)"
                if field == "system_pool"
                else f"{path}: only applies to resources this package creates; remove it with `cluster.mode: existing`"
            )
    for i, group in enumerate(config.tpu_pools):
        for field in ("scale_to_zero", "labels", "taints"):
            if getattr(group, field) != TpuPoolGroup.model_fields[field].get_default(call_default_factory=True):
                problems.append(
                    f".tpuPools[{i}].{to_camel(field)}: only applies to node pools this package creates; with "
                    "`cluster.mode: existing` a pool group only describes an existing pool's shape, zone, capacity "
                    "mode and slice count"
                )
    for i, spec in enumerate(config.queues.flavors or []):
        if spec.capacity is not None:
            problems.append(
                f".queues.flavors[{i}].capacity: selects the node label {CAPACITY_LABEL!r}, which only node pools "
                "this package creates carry; remove it with `cluster.mode: existing`"
            )
    if config.queues.flavors is None:
        for flavor in config.flavors:
            if any(key == CAPACITY_LABEL for key, _ in flavor.node_labels):
                problems.append(
                    f".tpuPools: slices of one shape mix capacity modes, so flavor {flavor.name!r} would select the "
                    f"node label {CAPACITY_LABEL!r}, which only pools this package creates carry; with "
                    "`cluster.mode: existing` declare `queues.flavors` per topology (without `capacity`)"
                )
                break
    if config.hotswap.enabled and config.hotswap.image is None:
        problems.append(
            ".hotswap.image: required with `cluster.mode: existing`: building the reconciler image would create an "
            "Artifact Registry repository; push `hotswap/Dockerfile` to your registry and set the reference "
            "(ideally `…@sha256:…`), or set `hotswap.enabled: false`"
        )
    return problems


def parse_platform_config(raw: Any, *, stack_file: bool = False) -> PlatformConfig:
    """Validate the raw `gke-tpu-priority:platform` object; raise ConfigError listing every problem."""
    if not isinstance(raw, dict):
        raise ConfigError(CONFIG_KEY, [f"{CONFIG_KEY}: expected an object, got {type(raw).__name__}"])
    # Only a stack file is held to camelCase: components built from other languages' typed inputs arrive with
    # field names.
    cleaned, spelling = camel_case_keys(PlatformConfig, raw, CONFIG_KEY) if stack_file else (raw, [])
    try:
        config = PlatformConfig.model_validate(cleaned)
    except ValidationError as err:
        formatted = format_validation_error(CONFIG_KEY, err, model=PlatformConfig)
        # The cross-field checks pydantic skipped because of these errors, on the fields that are valid.
        skipped = skipped_checks(PlatformConfig, cleaned, error_places(err), CONFIG_KEY)
        raise ConfigError(CONFIG_KEY, list(dict.fromkeys([*spelling, *formatted.problems, *skipped]))) from None
    if spelling:
        raise ConfigError(CONFIG_KEY, spelling)
    return config


def starvation_grace_problems(config: PlatformConfig) -> list[str]:
    """The reconciler acts on a starved JobSet after `starvationGrace`; its victims' termination and the JobSet's
    start-up must then fit in what is left of Kueue's `waitForPodsReady.timeout`, or Kueue evicts the JobSet the
    reconciler is freeing slices for. Half the timeout is the most the grace may take."""
    if not config.hotswap.enabled:
        return []
    from pydantic import ValidationError

    from gke_tpu_priority.hotswap.config import HotswapConfig

    try:
        grace = HotswapConfig.model_validate({**config.hotswap.settings, "mode": config.hotswap.mode.value})
    except ValidationError:
        return []  # reported by hotswap.settings' own check
    timeout = duration_seconds(config.kueue.wait_for_pods_ready.timeout)
    seconds = grace.starvation_grace.total_seconds()
    if seconds * 2 <= timeout:
        return []
    return [
        f".hotswap.settings.starvationGrace: {seconds:g}s is more than half of kueue.waitForPodsReady.timeout "
        f"({config.kueue.wait_for_pods_ready.timeout}); after the grace the victims must terminate and the JobSet "
        "start before the timeout, or Kueue evicts the JobSet the reconciler frees slices for; lower "
        f"starvationGrace to {timeout / 2:g}s or less (default 60s), or raise the timeout"
    ]


def flavor_slice_chips(flavor: Flavor) -> int:
    """Chips of one slice of the topology a flavor selects; 0 when it selects none (any slice may land on it)."""
    topology = dict(flavor.node_labels).get(TOPOLOGY_LABEL)
    return min((s.chips for s in SHAPES if s.topology == topology), default=0)
