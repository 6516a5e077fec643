"""Reconciler configuration: one validated, immutable model; a loader for a file + `HOTSWAP_*` overrides."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from datetime import timedelta
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Self

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

ENV_PREFIX = "HOTSWAP_"
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_GO_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
# Below this every fresh admission would look starved before kube-scheduler had a chance to bind its pods.
_MIN_STARVATION_GRACE = timedelta(seconds=5)


def _parse_duration(value: Any) -> Any:
    """Accept Go/Kubernetes-style `20s`, `1h30m`, `500ms` and bare numeric strings (seconds) besides what
    pydantic already takes (numbers, ISO 8601 `PT20S`, timedelta)."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return timedelta(seconds=float(text))
    if text and _GO_DURATION_PART.sub("", text) == "":
        return timedelta(seconds=sum(float(n) * _UNIT_SECONDS[u] for n, u in _GO_DURATION_PART.findall(text)))
    return value


Duration = Annotated[timedelta, BeforeValidator(_parse_duration)]


class Mode(StrEnum):
    """Which component preempts TPU work: the reconciler alone, or kube-scheduler with the reconciler completing."""

    RECONCILER = "reconciler"
    SCHEDULER_ASSISTED = "scheduler-assisted"


class Scope(StrEnum):
    """Where a preemptor may take victims from: its ClusterQueue, its cohort, or the whole cluster."""

    CLUSTER_QUEUE = "ClusterQueue"
    COHORT = "Cohort"
    CLUSTER = "Cluster"


class ReleaseOnPreemptorGone(StrEnum):
    """What happens to held victims whose preemptor finished, failed, was deleted, suspended or evicted."""

    CAPACITY = "capacity"
    IMMEDIATE = "immediate"


class ConfigError(ValueError):
    """Configuration is invalid; the message names each bad field, its value and what is allowed."""


def _duration(minimum: timedelta, maximum: timedelta, default: timedelta, description: str) -> Any:
    return Field(default=default, ge=minimum, le=maximum, description=description)


class FastFailConfig(BaseModel):
    """Opt-in force-failing of a preemptor's pods stuck on unreachable nodes, before the taint manager evicts them."""

    model_config = ConfigDict(frozen=True, extra="forbid", alias_generator=to_camel, populate_by_name=True)

    enabled: bool = Field(
        default=False,
        description="Allow force-failing pods of JobSets annotated `<domain>/fast-fail=true`.",
    )
    after: Duration = _duration(
        timedelta(seconds=10),
        timedelta(hours=1),
        timedelta(seconds=60),
        "How long a node must be unreachable before its opted-in pods are force-failed.",
    )


class LeaderElectionConfig(BaseModel):
    """Lease-based leader election so only one replica writes."""

    model_config = ConfigDict(frozen=True, extra="forbid", alias_generator=to_camel, populate_by_name=True)

    enabled: bool = Field(default=True, description="Run leader election; disable only for a single replica.")
    lease_name: str = Field(default="hotswap-reconciler", description="Name of the coordination/v1 Lease.")
    lease_namespace: str = Field(
        default="hotswap-system", description="Namespace holding the Lease (normally the reconciler's own)."
    )
    lease_duration: Duration = _duration(
        timedelta(seconds=2), timedelta(minutes=5), timedelta(seconds=15), "How long a lease is valid."
    )
    renew_deadline: Duration = _duration(
        timedelta(seconds=1),
        timedelta(minutes=5),
        timedelta(seconds=10),
        "How long the leader keeps retrying renewal before it gives up leadership.",
    )
    retry_period: Duration = _duration(
        timedelta(milliseconds=200),
        timedelta(minutes=1),
        timedelta(seconds=2),
        "Interval between acquire/renew attempts.",
    )

    @field_validator("lease_name", "lease_namespace")
    @classmethod
    def _dns_name(cls, value: str) -> str:
        if not _DNS_LABEL.match(value) or len(value) > 63:
            raise ValueError(f"{value!r} is not a DNS-1123 label (lowercase alphanumerics and '-', ≤63 chars)")
        return value

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if not self.lease_duration > self.renew_deadline > self.retry_period:
            raise ValueError(
                "leaseDuration > renewDeadline > retryPeriod must hold; got "
                f"leaseDuration={self.lease_duration.total_seconds()}s, "
                f"renewDeadline={self.renew_deadline.total_seconds()}s, "
                f"retryPeriod={self.retry_period.total_seconds()}s"
            )
        return self


class HotswapConfig(BaseModel):
    """Everything the reconciler can be told; durations accept seconds or ISO-8601 (`PT20S`)."""

    model_config = ConfigDict(frozen=True, extra="forbid", alias_generator=to_camel, populate_by_name=True)

    mode: Mode = Field(
        default=Mode.RECONCILER,
        description="Who preempts TPU work: `reconciler` (the reconciler alone, whole JobSets through Kueue) or "
        "`scheduler-assisted` (kube-scheduler preempts pods by priority; the reconciler completes whole-slice "
        "evictions). The platform sets it from `hotswap.mode`.",
    )
    scope: Scope = Field(
        default=Scope.COHORT,
        description="Victims must share the preemptor's ClusterQueue, its cohort, or just the cluster.",
    )
    unhealthy_grace: Duration = _duration(
        timedelta(0),
        timedelta(minutes=30),
        timedelta(seconds=20),
        "A slice is Unhealthy only after a bad condition has lasted this long (a flapping condition triggers nothing).",
    )
    confirmed_unhealthy_grace: Duration = _duration(
        timedelta(0),
        timedelta(minutes=30),
        timedelta(0),
        "A slice is Unhealthy after this long instead of unhealthyGrace once a JobSet pod on it has failed with the "
        "bad condition: the workload restarts anyway, and its new attempt should not wait for the flap filter. "
        "Set it to unhealthyGrace to wait the full grace always.",
    )
    recovery_stabilization: Duration = _duration(
        timedelta(0),
        timedelta(hours=2),
        timedelta(seconds=120),
        "A slice is Healthy again only after all its nodes have been good this long; until then it is "
        "Recovering: no preemptor is sent there, but a held victim may go back onto it (a flap costs it only what "
        "it ran since its restart).",
    )
    attribution_window: Duration = _duration(
        timedelta(seconds=10),
        timedelta(hours=2),
        timedelta(minutes=10),
        "A preemptor counts as infra-disrupted by pods that left an Unhealthy slice this recently.",
    )
    inversion_grace: Duration = _duration(
        timedelta(0),
        timedelta(minutes=30),
        timedelta(seconds=15),
        "A slice priority inversion (lower-priority pods in the slice where a higher-priority JobSet cannot place "
        "its pods) is resolved only after it has lasted this long, so normal scheduling churn is not acted on.",
    )
    starvation_grace: Duration = _duration(
        timedelta(0),
        timedelta(minutes=30),
        timedelta(seconds=60),
        "An admitted JobSet whose pods have stayed unbound this long because lower-priority JobSets occupy the "
        "slices it needs (reconciler mode: kube-scheduler does not preempt TPU pods) takes whole slices from them "
        "like an infra-disrupted one. 0 disables starvation preemption; otherwise at least 5s, and keep it well "
        "below Kueue's waitForPodsReady timeout, or Kueue evicts the JobSet first.",
    )
    eviction_delay: Duration = _duration(
        timedelta(0),
        timedelta(minutes=10),
        timedelta(seconds=60),
        "An infra-disrupted JobSet takes victims only once its failure has lasted this long (spare slices at once). "
        "If the failed slices are back by then, it restarts in place and nobody is evicted: a transient costs a "
        "victim its progress since its last checkpoint and buys nothing. Once the delay plus a victim's termination "
        "grace outlasts the JobSet's own restart (its pods draining and being recreated), each further second adds "
        "a second to every lasting repair (about 3 s of slack with the defaults); 0 evicts at detection.",
    )
    eviction_delay_min_loss: Duration = _duration(
        timedelta(0),
        timedelta(hours=24),
        timedelta(minutes=10),
        "`evictionDelay` holds back only victim sets in which some victim would lose more than this much training "
        "(its progress since its last published checkpoint, or since its attempt started): a victim that has just "
        "checkpointed is taken at detection, and the restart floor kept; a costly one only once the failure has "
        "outlasted the delay, by when a transient has healed or a cheaper victim may have appeared. 0 delays every "
        "eviction.",
    )
    lower_tier_eviction_delay: Duration = _duration(
        timedelta(0),
        timedelta(hours=24),
        timedelta(minutes=20),
        "`evictionDelay` for preemptors below `topTierPriority`: how long their failure must last before they take "
        "costly victims (`evictionDelayMinLoss`; spare slices and cheap victims at once) of a tier that may preempt "
        "itself (victims below `preemptorMinPriority` are opportunistic: `evictionDelay`); a starved one (its pods "
        "unbound while lower work holds the slices) waits as long from when its pods began to wait, since Kueue "
        "re-admits a JobSet whose slices stay down and it then starves; each re-admission starts that wait again, so "
        "with a waitForPodsReady timeout below this delay (the platform's 15 min) a starved lower tier takes only "
        "cheap and opportunistic victims; one admitted to the spot rung does not wait again (its VMs were reclaimed, "
        "it waited from then until Kueue requeued it, and they return on GCP's schedule). A failure that cannot be a "
        "transient (a node deleted or shutting down) is waited out too: the delay is the price of a costly victim "
        "close in rank, not a bet on the slice coming back. A victim loses its "
        "progress since its last checkpoint and waits out the repair in the preemptor's place, so for a tier that "
        "outranks it by less, only a long repair repays the eviction; the default waits out the common 10-20 min "
        "repairs. Equal to `evictionDelay`: every tier waits the same.",
    )
    top_tier_priority: int | None = Field(
        default=None,
        description="Workload priority of the highest tier that may preempt: preemptors below it wait "
        "`lowerTierEvictionDelay` instead of `evictionDelay`. Unset: every preemptor waits `evictionDelay`.",
    )
    spot_rung_switch: bool = Field(
        default=True,
        description="Move a JobSet of a tier that may preempt (not below `preemptorMinPriority`) whose spot VMs GCP "
        "reclaimed to its ClusterQueue's queued flex-start rung instead of evicting lower-priority work on spot, "
        "higher tiers first, when Kueue can admit it there (free quota, or quota lower-priority work holds, which "
        "Kueue's own preemption takes): hold its Workload, pin the suspended JobSet's TPU pod templates to the queued "
        "capacity "
        "(nodeSelector `gke-tpu-priority.io/capacity: flex-start-queued`) and delete the held Workload, which Kueue "
        "recreates from the pinned template and admits there. Quota-only Kueue would otherwise re-admit it to the spot "
        "quota its own eviction freed, where reclamations keep striking it. The pin stays for the JobSet's life. "
        "Needs `patch` on JobSets and `delete` on Workloads; false grants neither.",
    )
    rung_switch_timeout: Duration = _duration(
        timedelta(seconds=30),
        timedelta(hours=1),
        timedelta(minutes=5),
        "A rung switch whose JobSet Kueue has not suspended this long after the hold is given up: the Workload is "
        "reactivated as it was.",
    )
    fast_fail: FastFailConfig = Field(
        default_factory=FastFailConfig, description="Opt-in fast-fail of pods stuck on unreachable nodes."
    )
    eviction_timeout: Duration = _duration(
        timedelta(seconds=10),
        timedelta(hours=2),
        timedelta(seconds=90),
        "After this long a held victim's pods still on healthy nodes raise a warning (never a force delete).",
    )
    max_hold: Duration = _duration(
        timedelta(minutes=1),
        timedelta(days=7),
        timedelta(hours=6),
        "Backstop: a held victim is released after this long whatever else holds.",
    )
    release_settle: Duration = _duration(
        timedelta(0),
        timedelta(hours=1),
        timedelta(minutes=5),
        "After a release the victim's demand stays booked this long (or until its pods run) so the same free "
        "slices are not promised to several victims.",
    )
    max_holds_per_window: int = Field(
        default=3, ge=1, le=100, description="A Workload held this many times within holdWindow is protected."
    )
    hold_window: Duration = _duration(
        timedelta(minutes=1), timedelta(days=30), timedelta(hours=24), "Window for maxHoldsPerWindow."
    )
    release_on_preemptor_gone: ReleaseOnPreemptorGone = Field(
        default=ReleaseOnPreemptorGone.CAPACITY,
        description="Release victims of a vanished preemptor when capacity exists, or immediately.",
    )
    priority_boost_enabled: bool = Field(
        default=False,
        description="Kueue's PriorityBoost gate is on: add the `kueue.x-k8s.io/priority-boost` annotation.",
    )
    tolerated_taint_keys: tuple[str, ...] = Field(
        default=("google.com/tpu", "cloud.google.com/gke-spot", "cloud.google.com/gke-preemptible"),
        description="NoSchedule/NoExecute taint keys that workloads tolerate, so they do not make a slice "
        "Unhealthy (GKE puts `google.com/tpu` on every TPU node).",
    )
    quarantine_unhealthy_slices: bool = Field(
        default=True,
        description="Taint every host of a Suspect or Unhealthy slice `<domain>/unhealthy-slice:NoSchedule` while "
        "it is so, and remove the taint once the slice is back (needs `patch` on nodes). Without it "
        "kube-scheduler places a restarted JobSet on the failed slice's surviving hosts, where it waits for the "
        "repair although a healthy slice was freed for it.",
    )
    fence_holds_per_slice: int = Field(
        default=2,
        ge=0,
        le=100,
        description="Admission fence bound: at most this many fresh admissions held per slice an operation "
        "reserves, over the whole operation (0 turns the fence off). Each fence hold frees Kueue quota that the "
        "next queued workload takes; past the bound, a newcomer that lands on a reserved slice is held by the op "
        "extension instead, after its pods bound.",
    )
    max_victims_per_pass: int = Field(
        default=16, ge=1, le=10_000, description="Safety valve: at most this many victims held in one pass."
    )
    preemptor_min_priority: int | None = Field(
        default=None,
        description="JobSets whose Workload priority (its WorkloadPriorityClass value) is below this never take "
        "slices from others, after an infrastructure failure or starvation alike: the tiers declared with "
        "`preempts: false`. Unset: every tier with a lower one below it may preempt.",
    )
    max_preemptor_priority: dict[str, int] = Field(
        default_factory=dict,
        description="Namespace -> the highest Workload priority a JobSet there may preempt with (its team's "
        "entitlement, `teams[].maxTier`): a JobSet above it, which got in before the rule existed or around it, "
        "never takes slices from anyone. Namespaces not listed: no ceiling.",
    )
    protect_namespaces: tuple[str, ...] | None = Field(
        default=None,
        description="Namespaces where the `protect` annotation is honoured (teams with `mayProtect`); elsewhere it "
        "is ignored, so a team cannot opt its JobSets out of eviction. Unset: honoured everywhere.",
    )
    resync_period: Duration = _duration(
        timedelta(seconds=1), timedelta(hours=1), timedelta(seconds=30), "Full re-plan period without events."
    )
    debounce: Duration = _duration(
        timedelta(0), timedelta(seconds=60), timedelta(milliseconds=500), "Coalesce bursts of watch events."
    )
    namespaces: tuple[str, ...] = Field(
        default=(), description="Namespaces to watch and act in; empty means all namespaces."
    )
    label_selector: str = Field(
        default="", description="Kubernetes label selector restricting which JobSets are considered."
    )
    annotation_domain: str = Field(
        default="hotswap.gke-tpu-priority.io",
        description="DNS subdomain prefixing every annotation the reconciler reads or writes.",
    )
    dry_run: bool = Field(default=False, description="Plan and log, but send no writes.")
    leader_election: LeaderElectionConfig = Field(
        default_factory=LeaderElectionConfig, description="Leader election settings."
    )
    writes_per_second: float = Field(
        default=5.0, gt=0, le=1000, description="Client-side token-bucket rate for API writes."
    )
    write_burst: int = Field(default=10, ge=1, le=10_000, description="Token-bucket burst for API writes.")
    metrics_port: int = Field(default=8080, ge=1, le=65535, description="Port for /metrics.")
    health_port: int = Field(default=8081, ge=1, le=65535, description="Port for /healthz and /readyz.")

    @field_validator("annotation_domain")
    @classmethod
    def _domain(cls, value: str) -> str:
        if len(value) > 253 or not _DNS_SUBDOMAIN.match(value):
            raise ValueError(f"{value!r} is not a DNS-1123 subdomain (e.g. hotswap.example.com)")
        return value

    @field_validator("namespaces")
    @classmethod
    def _namespaces(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        bad = [ns for ns in value if not _DNS_LABEL.match(ns) or len(ns) > 63]
        if bad:
            raise ValueError(f"not valid namespace names: {bad}")
        return tuple(sorted(set(value)))

    @model_validator(mode="after")
    def _cross_field(self) -> Self:
        if self.metrics_port == self.health_port:
            raise ValueError(f"metricsPort and healthPort must differ; both are {self.metrics_port}")
        if self.confirmed_unhealthy_grace > self.unhealthy_grace:
            raise ValueError(
                f"confirmedUnhealthyGrace ({self.confirmed_unhealthy_grace}) must not exceed unhealthyGrace "
                f"({self.unhealthy_grace}): a failure the workload confirmed is never waited on longer than an "
                "unconfirmed one; lower confirmedUnhealthyGrace or raise unhealthyGrace"
            )
        if timedelta(0) < self.starvation_grace < _MIN_STARVATION_GRACE:
            raise ValueError(
                f"starvationGrace ({self.starvation_grace.total_seconds()}s) is shorter than kube-scheduler needs to "
                f"bind freshly created pods; set it to 0 to disable starvation preemption or to at least "
                f"{_MIN_STARVATION_GRACE.total_seconds():.0f}s"
            )
        if self.max_hold <= self.resync_period:
            raise ValueError("maxHold must be longer than resyncPeriod")
        if self.lower_tier_eviction_delay < self.eviction_delay:
            raise ValueError(
                f"lowerTierEvictionDelay ({self.lower_tier_eviction_delay.total_seconds():g}s) is shorter than "
                f"evictionDelay ({self.eviction_delay.total_seconds():g}s): tiers below the top would evict sooner "
                "than the top tier; set lowerTierEvictionDelay to at least evictionDelay (equal: every tier waits "
                "the same)"
            )
        return self


def _flatten_errors(error: ValidationError) -> str:
    lines = []
    for item in error.errors():
        field = ".".join(str(part) for part in item["loc"]) or "<root>"
        value = item.get("input")
        lines.append(f"{field}: {item['msg']} (got {value!r})")
    return "invalid hotswap configuration:\n  " + "\n  ".join(lines)


def _env_overrides(env: Mapping[str, str]) -> dict[str, Any]:
    """Map `HOTSWAP_LEADER_ELECTION__LEASE_NAME=x` to {"leaderElection": {"leaseName": "x"}}.

    `__` separates nesting levels, `_` separates words; list fields take comma-separated values.
    """
    result: dict[str, Any] = {}
    for key, raw in env.items():
        # HOTSWAP_CONFIG and HOTSWAP_LOG_LEVEL are read by the CLI, not configuration fields.
        if not key.startswith(ENV_PREFIX) or key in (f"{ENV_PREFIX}CONFIG", f"{ENV_PREFIX}LOG_LEVEL"):
            continue
        path = [to_camel(part.lower()) for part in key[len(ENV_PREFIX) :].split("__")]
        target = result
        for part in path[:-1]:
            target = target.setdefault(part, {})
        value: Any = raw
        if path[-1] == "namespaces":
            value = [ns.strip() for ns in raw.split(",") if ns.strip()]
        target[path[-1]] = value
    return result


def _merge(base: dict[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def load_config(path: str | Path | None = None, env: Mapping[str, str] | None = None) -> HotswapConfig:
    """Read a YAML/JSON file (optional; `HOTSWAP_CONFIG` names one too) and apply `HOTSWAP_*` overrides."""
    environ = os.environ if env is None else env
    path = path if path is not None else environ.get(f"{ENV_PREFIX}CONFIG")
    data: dict[str, Any] = {}
    if path is not None:
        text = Path(path).read_text(encoding="utf-8")
        try:
            loaded = json.loads(text) if str(path).endswith(".json") else yaml.safe_load(text)
        except (json.JSONDecodeError, yaml.YAMLError) as exc:
            raise ConfigError(f"cannot parse hotswap configuration file {path}: {exc}") from exc
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"hotswap configuration file {path} must hold a mapping, got {type(loaded).__name__}")
        data = loaded
    data = _merge(data, _env_overrides(environ))
    try:
        return HotswapConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_flatten_errors(exc)) from exc
