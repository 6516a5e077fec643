"""Simulation parameters: every timing is named, defaulted and sourced.

Tags in the descriptions say where a figure comes from: [V] verified upstream/docs, [S] secondary,
[I] inference, [U] unverified assumption (swept in the benchmark where it matters).
"""

from __future__ import annotations

from datetime import timedelta
from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, model_validator

from gke_tpu_priority.hotswap.config import HotswapConfig

HOUR = 3600.0
MINUTE = 60.0

Seconds = Annotated[float, Field(ge=0.0)]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Timing(_Frozen):
    """Latencies of the Kubernetes / Kueue / JobSet machinery the simulator replays."""

    fault_to_pod_failed_s: Seconds = Field(
        10.0,
        description="Hardware fault -> the workload's containers on the slice exit and the pods are Failed. "
        "[U] libtpu/ICI errors surface within seconds; no public v6e figure.",
    )
    fault_to_node_unhealthy_s: Seconds = Field(
        10.0,
        description="Hardware fault -> nodes of the slice report NotReady / get a NoSchedule taint "
        "(GKE TPU health checks). [U]",
    )
    node_monitor_grace_s: Seconds = Field(
        50.0,
        description="Unreachable kubelet -> node NotReady/unreachable taint (node-monitor-grace-period). "
        "[V] KEP-6757 citing k8s docs.",
    )
    taint_eviction_s: Seconds = Field(
        300.0,
        description="Default toleration of node.kubernetes.io/unreachable before taint eviction. [V] KEP-6757.",
    )
    fast_fail_after_s: Seconds = Field(
        60.0,
        description="Unreachable for this long -> opt-in fast-fail (or Kueue FailureRecoveryPolicy) force-"
        "deletes the zombie pods. [V] the fast-fail default / KEP-6757 (grace + 60 s).",
    )
    fast_fail: bool = Field(
        True,
        description="Whether zombie pods on unreachable nodes are force-deleted after fast_fail_after_s "
        "(opt-in fast-fail or Kueue FailureRecoveryPolicy). Off = zombies block until repair [V] sec. 2.4.",
    )
    pod_termination_grace_s: Seconds = Field(
        30.0,
        description="terminationGracePeriodSeconds of training pods; victims and restarted pods need it to "
        "leave a node. [V] k8s default 30 s; TPU checkpoint-on-SIGTERM may take 30-120 s [U].",
    )
    jobset_recreate_s: Seconds = Field(
        5.0,
        description="All old pods gone -> new child Jobs and pods created (BlockingRecreate). [V] lower bound "
        "measured on the real JobSet v0.12.0 and Job controller v1.35.4 (e2e, a 2-slice 4x4 JobSet): a pod Failed "
        "with DisruptionTarget -> old pods gone in 1.6-2.8 s, first new pod 0-0.6 s later, on a loopback API server "
        "whose fake kubelet deletes pods at once (docs/benchmarks.md, 'Hotswap on real Kueue and JobSet'). Kept at "
        "5 s [U] for GKE's remote control plane and real kubelets; KEP-467 gives ~130 s only at 5,000 nodes.",
    )
    pod_start_s: Seconds = Field(
        15.0,
        description="Pod bound -> Running (image cached, hostNetwork). Together with jobset_recreate_s this is "
        "the low end of the 20-60 s restart range of anchor (d). [U] The e2e's ~1 s (create -> Running) does not "
        "carry over: its fake kubelet (kwok) pulls no image and starts no container.",
    )
    follower_create_s: Seconds = Field(
        1.0,
        description="Leader bound -> follower pods admitted by the JobSet webhook and created (the Job "
        "controller retries rejected followers). [I] sec. 2.5; [V] lower bound: first to last pod of a 2-slice "
        "restart 0.5-1.1 s apart on the real JobSet v0.12.0 webhook and Job controller (e2e, loopback API "
        "server; docs/benchmarks.md, 'Hotswap on real Kueue and JobSet').",
    )
    kueue_admission_s: Seconds = Field(
        1.0,
        description="Kueue admission/eviction/requeue reaction. [V] ~40 admissions/s in Kueue perf tests (the "
        "figure under load). Measured on Kueue v0.19.2 with a handful of Workloads (e2e): spec.active=false -> "
        "Evicted within 0.5 s, Evicted -> quota released in 0-0.6 s, spec.active=true -> admitted again within "
        "0.5 s (docs/benchmarks.md, 'Hotswap on real Kueue and JobSet'): an idle-cluster lower bound.",
    )
    reconciler_reaction_s: Seconds = Field(
        1.0,
        description="Watch event -> reconciler pass starts (event-driven informers). [I] design; the e2e "
        "measures fault -> the victim's spec.active=false written in 0.6-0.7 s, debounce included "
        "(docs/benchmarks.md, 'Hotswap on real Kueue and JobSet'), so 1 s is an upper bound.",
    )
    unhealthy_grace_s: Seconds = Field(
        20.0,
        description="Bad node condition -> slice Unhealthy for the hotswap reconciler (HotswapConfig "
        "unhealthyGrace default); only used to split MTTR into repairs that outlast detection and transients. "
        "[design]",
    )
    confirmed_grace_s: Seconds = Field(
        0.0,
        description="Bad node condition confirmed by a failed pod of the slice -> slice Unhealthy (HotswapConfig "
        "confirmedUnhealthyGrace default); only used to split MTTR, like unhealthy_grace_s. [design]",
    )
    reconciler_resync_s: Seconds = Field(
        30.0,
        description="Reconciler periodic resync while anything is unhealthy, held or in flight. [design]",
    )
    api_write_s: Seconds = Field(
        0.5,
        description="One Workload update (spec.active) reaching Kueue. [V] consistent with the e2e on Kueue "
        "v0.19.2: the write and Kueue's eviction together within one 0.5 s sample (docs/benchmarks.md, 'Hotswap "
        "on real Kueue and JobSet'); was [U].",
    )
    pods_ready_timeout_s: Seconds = Field(
        15 * MINUTE,
        description="Kueue waitForPodsReady timeout: an admitted workload whose pods are not all ready this long "
        "is evicted (PodsReadyTimeout) and requeued. [platform] what the KueueJobSet component deploys by default "
        "(components/config/kueue.py).",
    )
    pods_ready_recovery_timeout_s: Seconds = Field(
        20 * MINUTE,
        description="Kueue waitForPodsReady recoveryTimeout: a running workload whose PodsReady turned False "
        "(a pod failed, the JobSet restarts) is evicted after this long. [platform] KueueJobSet default.",
    )
    requeue_backoff_base_s: Seconds = Field(
        60.0, description="Kueue requeuingStrategy backoffBaseSeconds. [V] Kueue default 60 s; KueueJobSet too."
    )
    requeue_backoff_max_s: Seconds = Field(
        1800.0,
        description="Kueue requeuingStrategy backoffMaxSeconds. [platform] KueueJobSet default (Kueue's: 3600 s).",
    )
    checkpoint_interval_s: Seconds = Field(
        30 * MINUTE,
        description="Training checkpoint period: a restart loses the progress since the last checkpoint. [U]",
    )
    spot_notice_s: Seconds = Field(
        30.0,
        description="Spot preemption notice -> the VMs are gone: GKE gives pods 30 s of graceful node shutdown "
        "after the notice (ACPI G2 soft off). [V] GKE 'Spot VMs' concept page.",
    )
    spot_pod_grace_s: Seconds = Field(
        15.0,
        description="Spot preemption notice -> non-system pods are killed (the first half of the 30 s shutdown; "
        "critical system pods get the second). [V] GKE 'Spot VMs' concept page.",
    )
    queued_provisioning_s: Seconds = Field(
        10 * MINUTE,
        description="ProvisioningRequest created (quota reserved on a queued flex-start flavor) -> GKE has made all "
        "the slices and the admission check is Ready. [U] DWS gives no figure; 'minutes' when capacity exists.",
    )


class RepairBand(_Frozen):
    """One component of the repair-time mixture: uniform between low_s and high_s."""

    weight: float = Field(gt=0.0, description="Relative probability of this band.")
    low_s: Seconds = Field(description="Shortest repair in this band, seconds.")
    high_s: Seconds = Field(description="Longest repair in this band, seconds.")

    @model_validator(mode="after")
    def _ordered(self) -> RepairBand:
        if self.high_s < self.low_s:
            raise ValueError(f"high_s={self.high_s} must be >= low_s={self.low_s}")
        return self


class FailureKind(StrEnum):
    CRASH = "crash"  # hardware fault, kubelet alive: pods fail fast, node marked unhealthy
    UNREACHABLE = "unreachable"  # kubelet silent: NotReady after grace, zombies until fast-fail or repair
    SPOT_PREEMPTION = "spot-preemption"  # GCP reclaims a spot slice: 30 s notice, then the VMs are gone


class Capacity(StrEnum):
    """Capacity mode of a simulated slice: the values of the platform's `gke-tpu-priority.io/capacity` node label
    (components/config/tpu.py), in ladder order (components/config/queues.py LADDER_ORDER)."""

    RESERVATION = "reservation"
    SPOT = "spot"
    QUEUED = "flex-start-queued"


def _default_spot_return_mixture() -> tuple[RepairBand, ...]:
    return (
        RepairBand(weight=0.50, low_s=10 * MINUTE, high_s=1 * HOUR),
        RepairBand(weight=0.40, low_s=1 * HOUR, high_s=4 * HOUR),
        RepairBand(weight=0.10, low_s=4 * HOUR, high_s=12 * HOUR),
    )


def _default_repair_mixture() -> tuple[RepairBand, ...]:
    return (
        RepairBand(weight=0.50, low_s=5.0, high_s=1 * MINUTE),
        RepairBand(weight=0.45, low_s=10 * MINUTE, high_s=20 * MINUTE),
        RepairBand(weight=0.05, low_s=1 * HOUR, high_s=4 * HOUR),
    )


class StormArrivals(StrEnum):
    """When correlated storms come."""

    POISSON = "poisson"
    """Gaps drawn from an exponential distribution of mean `storm_every_h`: storms keep no clock. A fixed period
    that is a multiple of the checkpoint interval (24 h and 30 min) would strike every JobSet restarted by the
    previous storm at the same phase of its checkpoint cycle, just before its next checkpoint when it restarted
    quickly, which charges fast recovery for an alignment real fleets do not have (docs/benchmarks.md)."""
    PERIODIC = "periodic"
    """Exactly every `storm_every_h` (tests that need a storm at a known time)."""


class FailureClock(StrEnum):
    """Whose random stream decides when a slice fails; every healthy slice fails at the same Poisson rate either way."""

    OCCUPANT = "occupant"
    """A slice held by a JobSet replica fails on that replica's own clock, an empty slice on its own: under every
    policy the same replica is hit at the same moments (common random numbers), so comparisons between policies
    are not swamped by which job happened to sit on a failing slice."""
    SLICE = "slice"
    """Every slice on its own clock, whoever runs on it."""


class Failures(_Frozen):
    """Whole-slice infrastructure failures: Poisson per healthy slice, repair from a mixture."""

    slice_mtbf_h: float = Field(
        3200.0,
        gt=0.0,
        description="Mean hours between failures of one 16-chip slice. [S] Llama-3 GPU proxy "
        "(1 per ~5e4 accelerator-hours), anchor (d).",
    )
    rate_multiplier: float = Field(
        1.0, gt=0.0, description="Sensitivity factor on the failure rate (anchor (d) suggests 0.3 ... 3)."
    )
    repair_mixture: tuple[RepairBand, ...] = Field(
        default_factory=_default_repair_mixture,
        description="Repair-time mixture. Bands [V] (GKE ~10 min auto-repair, TPU 'up to a few hours'); "
        "weights 50/45/5 % are [I] assumptions.",
    )
    unreachable_fraction: float = Field(
        0.0,
        ge=0.0,
        le=1.0,
        description="Share of failures where the kubelet goes silent (zombie pods) instead of crashing the "
        "workload. [U]; scenario S4 sweeps it.",
    )
    clock: FailureClock = Field(
        FailureClock.OCCUPANT,
        description="Whose random stream times the Poisson failures (not the storms): the occupying JobSet "
        "replica's (same rate, common random numbers across policies) or the slice's.",
    )
    storm_slices: int = Field(0, ge=0, description="Extra correlated storm: this many slices fail ...")
    storm_window_s: Seconds = Field(60.0, description="... uniformly within this window ...")
    storm_every_h: float = Field(
        0.0, ge=0.0, description="... on average every this many hours (0 = no storms). Scenario S2."
    )
    storm_arrivals: StormArrivals = Field(
        StormArrivals.POISSON,
        description="Storm times: a Poisson process of mean gap `storm_every_h` (default), or exactly periodic.",
    )
    spot_mtbf_h: float = Field(
        100.0,
        gt=0.0,
        description="Mean hours between GCP preemptions of one spot slice (Poisson, on top of hardware failures; "
        "only spot slices). [U] GCP publishes no spot TPU preemption rate; it varies by zone and hour.",
    )
    spot_return_mixture: tuple[RepairBand, ...] = Field(
        default_factory=_default_spot_return_mixture,
        description="VMs gone -> GCP gives the spot capacity back (the MIG recreates the VMs). [U] no public "
        "figure; bands of tens of minutes to half a day.",
    )

    @property
    def rate_per_slice_s(self) -> float:
        return self.rate_multiplier / (self.slice_mtbf_h * HOUR)

    @property
    def spot_rate_per_slice_s(self) -> float:
        return 1.0 / (self.spot_mtbf_h * HOUR)


class JobClass(_Frozen):
    """A closed population of JobSets of one priority: every finished job is replaced at once."""

    name: str = Field(description="Class name, e.g. 'high'.")
    priority: int = Field(description="PriorityClass value (Kueue and pod priority agree).")
    slices: int = Field(ge=1, description="Replicas = TPU slices per JobSet (one child Job per slice).")
    population: int = Field(ge=0, description="JobSets of this class submitted at any time.")
    mean_duration_h: float = Field(
        gt=0.0, description="Mean useful run time (exponential), hours. [U] training runs of hours to days."
    )
    max_restarts: int = Field(10, ge=0, description="JobSet failurePolicy.maxRestarts. [V] Google example.")
    restarts_ignore_disruption: bool = Field(
        False,
        description="JobSet rule RestartJobSetAndIgnoreMaxRestarts on PodFailurePolicy. Off in "
        "Google's hotswap example [V], so preemptions burn maxRestarts.",
    )
    queue: str = Field(
        "",
        description="The ClusterQueue (Scenario.cluster_queues) this class submits to; '' with no cluster_queues "
        "(one ClusterQueue whose quota is the fleet).",
    )


class ClusterQueueSpec(_Frozen):
    """One ClusterQueue of a cohort (Scenario.cluster_queues): a team's nominal quota, what it lends and borrows."""

    name: str = Field(description="ClusterQueue name; JobClass.queue refers to it.")
    nominal_slices: int = Field(ge=0, description="Nominal quota in slices (chips = slices x chips per slice).")
    lending_limit_slices: int | None = Field(
        None,
        ge=0,
        description="lendingLimit in slices: how much of the nominal quota the cohort may borrow (None: all).",
    )
    borrowing_limit_slices: int | None = Field(
        None, ge=0, description="borrowingLimit in slices: how far above nominal it may borrow (None: no limit)."
    )

    @model_validator(mode="after")
    def _lending_within_nominal(self) -> ClusterQueueSpec:
        if self.lending_limit_slices is not None and self.lending_limit_slices > self.nominal_slices:
            raise ValueError(
                f"cluster_queues[{self.name}].lending_limit_slices={self.lending_limit_slices} exceeds "
                f"nominal_slices={self.nominal_slices}"
            )
        return self


class Fleet(_Frozen):
    """Slices of one shape (the planner handles several; the standard scenarios use v6e 4x4)."""

    slices: int = Field(ge=1, description="Number of TPU slices (node pools).")
    hosts_per_slice: int = Field(4, ge=1, description="Hosts per slice: v6e 4x4 = 4 hosts x 4 chips. [V]")
    chips_per_host: int = Field(4, ge=1, description="google.com/tpu per host. [V]")
    topology: str = Field("4x4", description="cloud.google.com/gke-tpu-topology of every slice.")
    accelerator: str = Field("tpu-v6e-slice", description="cloud.google.com/gke-tpu-accelerator.")
    machine_type: str = Field("ct6e-standard-4t", description="Machine type of the hosts.")
    spot_slices: int = Field(
        0,
        ge=0,
        description="Of `slices`, how many are spot node pools (after the reservation ones). 0 with queued_slices 0: "
        "one capacity-less pool group, the model of every scenario before the ladder.",
    )
    queued_slices: int = Field(
        0,
        ge=0,
        description="Of `slices`, how many are queued flex-start capacity (the last ones): they exist only while a "
        "workload admitted through a ProvisioningRequest holds them; the number is the flavor's quota.",
    )
    spot_max_priority: int | None = Field(
        None,
        description="Highest workload priority Kueue may admit on the spot rung; None: every tier. Models a platform "
        "that keeps its top tier off capacity GCP reclaims (such a JobSet's required node affinity excludes the spot "
        "flavor's capacity label, so Kueue's flavor assigner skips that flavor for it).",
    )

    @model_validator(mode="after")
    def _ladder_fits(self) -> Fleet:
        if self.spot_slices + self.queued_slices > self.slices:
            raise ValueError(
                f"spot_slices={self.spot_slices} + queued_slices={self.queued_slices} exceed slices={self.slices}"
            )
        return self

    @property
    def ladder(self) -> bool:
        """Capacity modes are modelled (labels, flavors, spot preemptions); off: one plain pool group."""
        return self.spot_slices > 0 or self.queued_slices > 0

    @property
    def reservation_slices(self) -> int:
        return self.slices - self.spot_slices - self.queued_slices

    def capacity_of(self, index: int) -> Capacity | None:
        """Capacity of slice `index`: reservation first, then spot, then queued; None without a ladder."""
        if not self.ladder:
            return None
        if index < self.reservation_slices:
            return Capacity.RESERVATION
        if index < self.reservation_slices + self.spot_slices:
            return Capacity.SPOT
        return Capacity.QUEUED

    def slices_of(self, capacity: Capacity) -> int:
        return {
            Capacity.RESERVATION: self.reservation_slices,
            Capacity.SPOT: self.spot_slices,
            Capacity.QUEUED: self.queued_slices,
        }[capacity]


def _default_classes() -> tuple[JobClass, ...]:
    return (
        JobClass(name="high", priority=2_000_000, slices=2, population=4, mean_duration_h=72.0),
        JobClass(name="medium", priority=1_500_000, slices=1, population=8, mean_duration_h=24.0),
        JobClass(name="low", priority=1_000_000, slices=1, population=20, mean_duration_h=12.0),
    )


class ReconcilerKnobs(_Frozen):
    """Reconciler settings a scenario may change (the rest are `HotswapConfig` defaults), so a sweep can trace
    their trade-offs. Defaults equal `HotswapConfig`'s (tested); bounds are `HotswapConfig`'s own."""

    eviction_delay_s: Seconds = Field(
        60.0,
        description="HotswapConfig `evictionDelay`: seconds a disrupted JobSet waits before taking costly victims.",
    )
    eviction_delay_min_loss_s: Seconds = Field(
        600.0,
        description="HotswapConfig `evictionDelayMinLoss`: the delay holds back only victims that would lose more "
        "than this many seconds of training (0: every victim).",
    )
    lower_tier_eviction_delay_s: Seconds = Field(
        1200.0,
        description="HotswapConfig `lowerTierEvictionDelay`: `eviction_delay_s` for preemptors below the top class "
        "(the platform sets `topTierPriority` from its tiers; the simulator from the scenario's classes).",
    )

    @model_validator(mode="after")
    def _valid_reconciler_config(self) -> ReconcilerKnobs:
        self.hotswap_config()
        return self

    def hotswap_config(self) -> HotswapConfig:
        return HotswapConfig(
            eviction_delay=timedelta(seconds=self.eviction_delay_s),
            eviction_delay_min_loss=timedelta(seconds=self.eviction_delay_min_loss_s),
            lower_tier_eviction_delay=timedelta(seconds=self.lower_tier_eviction_delay_s),
        )


class Scenario(_Frozen):
    """Everything one simulation run needs besides the policy."""

    name: str = Field("custom", description="Scenario name used in reports.")
    seed: int = Field(1, description="Seed of every random stream; identical across policies.")
    horizon_h: float = Field(24 * 365.0, gt=0.0, description="Simulated time, hours.")
    fleet: Fleet = Field(default_factory=lambda: Fleet(slices=32))
    classes: tuple[JobClass, ...] = Field(default_factory=_default_classes)
    failures: Failures = Field(default_factory=Failures)
    timing: Timing = Field(default_factory=Timing)
    checkpoint_signal: bool = Field(
        True,
        description="The training code keeps its JobSet's `last-checkpoint` annotation current, so the reconciler "
        "can prefer victims that have just checkpointed. [design] optional per workload; off = the planner only "
        "knows when each attempt started.",
    )
    checkpoint_share: float = Field(
        1.0,
        ge=0.0,
        le=1.0,
        description="With checkpoint_signal: the share of JobSets whose training code publishes `last-checkpoint` "
        "(each JobSet draws once, by its name and the seed, the same under every policy); the rest publish "
        "nothing. [U] what a platform inherits varies: 0 (nothing publishes) is the bench's headline.",
    )
    reconciler: ReconcilerKnobs = Field(
        default_factory=ReconcilerKnobs, description="Reconciler settings for the `reconciler` policy."
    )
    high_priority: int | None = Field(
        None, description="Priorities >= this count as 'high' in metrics (default: the top class)."
    )
    cluster_queues: tuple[ClusterQueueSpec, ...] = Field(
        (),
        description="Several ClusterQueues in one cohort (the multi-team scenario), each class submitting "
        "to its `queue`; empty: one ClusterQueue whose quota is the fleet. Not combined with a capacity ladder.",
    )

    @model_validator(mode="after")
    def _classes_fit(self) -> Scenario:
        names = [c.name for c in self.classes]
        if len(set(names)) != len(names):
            raise ValueError(f"classes: names must be unique, got {names}")
        for c in self.classes:
            if c.slices > self.fleet.slices:
                raise ValueError(f"classes[{c.name}].slices={c.slices} exceeds fleet.slices={self.fleet.slices}")
        queues = {q.name for q in self.cluster_queues}
        if len(queues) != len(self.cluster_queues):
            raise ValueError(f"cluster_queues: names must be unique, got {[q.name for q in self.cluster_queues]}")
        for c in self.classes:
            if queues and c.queue not in queues:
                raise ValueError(
                    f"classes[{c.name}].queue={c.queue!r}: must name one of cluster_queues {sorted(queues)}"
                )
            if not queues and c.queue:
                raise ValueError(f"classes[{c.name}].queue={c.queue!r}: needs cluster_queues (empty: leave queue '')")
        if queues and self.fleet.ladder:
            raise ValueError(
                "cluster_queues: not modelled together with a capacity ladder (fleet.spot_slices/queued_slices)"
            )
        return self

    @property
    def high_threshold(self) -> int:
        if self.high_priority is not None:
            return self.high_priority
        return max(c.priority for c in self.classes)
