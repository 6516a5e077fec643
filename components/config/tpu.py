"""TPU v6e slice pool groups: topology, slice count, capacity mode, placement."""

from __future__ import annotations

import re
from enum import StrEnum

from pydantic import Field, ValidationInfo, field_validator, model_validator

from gke_tpu_priority.components import tpu_shapes
from gke_tpu_priority.components.config.base import ConfigModel, problems_error

# GKE node pool names: RFC 1035, at most 40 characters. A multi-host group gets "-<index>" per slice.
POOL_NAME_PATTERN = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"
MAX_POOL_NAME = 40
# Node label set on every TPU node by the pool, so flavors can split a shape by capacity mode.
CAPACITY_LABEL = "gke-tpu-priority.io/capacity"
# Flex-start (Dynamic Workload Scheduler) provisions capacity for at most seven days (GKE, Cloud TPU flex-start docs).
FLEX_START_MAX_RUN_SECONDS = 7 * 24 * 3600
# Capacity label value of flex-start pools with queued provisioning: their nodes only come through ProvisioningRequests,
# so a flavor must never mix them with flex-start pools that scale on pending pods.
QUEUED_CAPACITY = "flex-start-queued"
# What GKE puts on nodes it creates for flex-start and queued provisioning (GKE provisioningrequest and flex-start docs;
# XPK's flex-start node selector and Cluster Toolkit's DWS module use the same keys). The package never sets these: it
# tolerates the taint on queued flavors and selects its own CAPACITY_LABEL.
# Taint `=true:NoSchedule` and label `=true` on queued-provisioning nodes.
GKE_QUEUED_KEY = "cloud.google.com/gke-queued"
GKE_FLEX_START_LABEL = "cloud.google.com/gke-flex-start"  # `=true` on flex-start nodes
GKE_PROVISIONING_REQUEST_LABEL = "autoscaling.gke.io/provisioning-request"  # the ResizeRequest a node was made for
LABEL_KEY_PATTERN = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")


class CapacityMode(StrEnum):
    ON_DEMAND = "on-demand"
    SPOT = "spot"
    RESERVATION = "reservation"
    FLEX_START = "flex-start"


class TaintEffect(StrEnum):
    NO_SCHEDULE = "NO_SCHEDULE"
    PREFER_NO_SCHEDULE = "PREFER_NO_SCHEDULE"
    NO_EXECUTE = "NO_EXECUTE"


class Reservation(ConfigModel):
    name: str = Field(
        description="Name of the Compute Engine reservation that holds the TPU capacity.",
        pattern=r"^[a-z]([-a-z0-9]*[a-z0-9])?$",
        max_length=63,
    )
    project: str | None = Field(
        default=None,
        description="Project that owns the reservation, for shared reservations; defaults to the stack's project.",
    )


class Capacity(ConfigModel):
    mode: CapacityMode = Field(
        description=(
            "How TPU capacity is obtained: `on-demand`, `spot` (cheaper, preemptible by GCE), `reservation` "
            "(a specific reservation, set `reservation`), or `flex-start` (Dynamic Workload Scheduler; nodes "
            "appear when capacity is found, pools scale 0..full)."
        )
    )
    reservation: Reservation | None = Field(
        default=None,
        description="The reservation to consume; required when mode is `reservation`, else unset.",
    )
    max_run_duration: str | None = Field(
        default=None,
        pattern=r"^\d+s$",
        description=(
            "flex-start only: maximum VM run time in seconds, e.g. `86400s`; at most `604800s` (7 days, flex-start's "
            "limit), GKE's default (7 days) when unset. With `queuedProvisioning` it becomes the ProvisioningRequest "
            "parameter `maxRunDurationSeconds` (all queued pools share one ProvisioningRequestConfig, so they must "
            "agree)."
        ),
    )
    queued_provisioning: bool = Field(
        default=False,
        description=(
            "flex-start only: queued provisioning (Dynamic Workload Scheduler's ProvisioningRequest API). The pool "
            "gets `queuedProvisioning.enabled`, so its nodes come only through a ProvisioningRequest, which Kueue's "
            "`kueue.x-k8s.io/provisioning-request` admission check creates for workloads admitted on its flavor; all "
            "slices of a workload arrive together or not at all."
        ),
    )

    @property
    def capacity_class(self) -> str:
        """The value of the pool's capacity node label: the mode, or `flex-start-queued`."""
        return QUEUED_CAPACITY if self.queued_provisioning else self.mode.value

    @model_validator(mode="after")
    def _reservation_matches_mode(self) -> Capacity:
        problems = []
        if self.mode is CapacityMode.RESERVATION and self.reservation is None:
            problems.append(".reservation: mode `reservation` needs `reservation.name` (the reservation to consume)")
        if self.mode is not CapacityMode.RESERVATION and self.reservation is not None:
            problems.append(
                f".reservation: only valid with mode `reservation` (mode is `{self.mode.value}`); "
                "spot, on-demand and flex-start capacity cannot consume a reservation — remove it or change mode"
            )
        if self.queued_provisioning and self.mode is not CapacityMode.FLEX_START:
            problems.append(
                f".queuedProvisioning: only valid with mode `flex-start` (mode is `{self.mode.value}`); GKE queues "
                "capacity requests only for flex-start pools — set `mode: flex-start` or remove it"
            )
        if self.max_run_duration is not None and self.mode is not CapacityMode.FLEX_START:
            problems.append(".maxRunDuration: only valid with mode `flex-start`")
        elif self.max_run_duration is not None:
            seconds = int(self.max_run_duration.removesuffix("s"))
            if not 0 < seconds <= FLEX_START_MAX_RUN_SECONDS:
                problems.append(
                    f".maxRunDuration: {self.max_run_duration!r} is outside flex-start's "
                    f"1s..{FLEX_START_MAX_RUN_SECONDS}s; flex-start VMs run at most 7 days"
                )
        if problems:
            raise problems_error(problems)
        return self


class Taint(ConfigModel):
    key: str = Field(description="Taint key.")
    value: str = Field(default="", description="Taint value.")
    effect: TaintEffect = Field(description="NO_SCHEDULE, PREFER_NO_SCHEDULE or NO_EXECUTE.")


class TpuPoolGroup(ConfigModel):
    name: str = Field(
        description=(
            "Group name. A multi-host group creates one node pool per slice named `<name>-<i>`; a single-host "
            "group creates one node pool named `<name>`."
        ),
        pattern=POOL_NAME_PATTERN,
        max_length=MAX_POOL_NAME,
    )
    topology: str = Field(description=f"v6e slice topology, one of: {', '.join(tpu_shapes.TOPOLOGIES)}.")
    machine_type: str | None = Field(
        default=None,
        validate_default=True,
        description=(
            "v6e machine type. Optional where the topology allows one; required for 2x4: `ct6e-standard-8t` "
            "(one 8-chip VM) or `ct6e-standard-4t` (two 4-chip VMs)."
        ),
    )
    slices: int = Field(ge=1, le=1000, description="Number of slices of this shape (each multi-host slice is a pool).")
    zone: str = Field(
        description="Zone for this group's node pools (must be in the stack's region, with v6e capacity)."
    )
    capacity: Capacity = Field(description="Capacity mode of every slice in the group.")
    scale_to_zero: bool = Field(
        default=False,
        description=(
            "Enable the cluster autoscaler between 0 and the full slice (never partially). Flex-start pools always "
            "scale 0..full."
        ),
    )
    labels: dict[str, str] = Field(default_factory=dict, description="Extra Kubernetes labels on the TPU nodes.")
    taints: list[Taint] = Field(
        default_factory=list, description="Extra taints, besides GKE's `google.com/tpu` taint on TPU nodes."
    )

    @field_validator("topology")
    @classmethod
    def _known_topology(cls, value: str) -> str:
        if value not in tpu_shapes.TOPOLOGIES:
            raise ValueError(f"{value!r} is not a TPU v6e topology; allowed: {', '.join(tpu_shapes.TOPOLOGIES)}")
        return value

    @field_validator("machine_type")
    @classmethod
    def _fits_topology(cls, value: str | None, info: ValidationInfo) -> str | None:
        topology = info.data.get("topology")
        if topology is not None:
            tpu_shapes.resolve_shape(topology, value)
        return value

    @property
    def shape(self) -> tpu_shapes.SliceShape:
        return tpu_shapes.resolve_shape(self.topology, self.machine_type)

    @property
    def chips(self) -> int:
        return self.shape.chips * self.slices

    @property
    def nodes(self) -> int:
        return self.shape.vms * self.slices

    def node_pool_names(self) -> list[str]:
        if self.shape.multi_host:
            return [f"{self.name}-{i}" for i in range(self.slices)]
        return [self.name]

    @model_validator(mode="after")
    def _shape_is_valid(self) -> TpuPoolGroup:
        problems = []
        shape = self.shape
        longest = f"{self.name}-{self.slices - 1}" if shape.multi_host else self.name
        if len(longest) > MAX_POOL_NAME:
            problems.append(
                f".name: node pool name {longest!r} would exceed GKE's {MAX_POOL_NAME} characters; "
                f"shorten the group name to at most {MAX_POOL_NAME - len(str(self.slices - 1)) - 1}"
            )
        if self.zone.count("-") != 2 or not self.zone[-1].isalpha():
            problems.append(f".zone: {self.zone!r} is not a zone name (expected e.g. `us-east5-b`)")
        for key in self.labels:
            if not LABEL_KEY_PATTERN.match(key):
                problems.append(f".labels: {key!r} is not a valid Kubernetes label key")
            if key.startswith("cloud.google.com/"):
                problems.append(f".labels: {key!r} is reserved by GKE; choose a key outside cloud.google.com/")
        if problems:
            raise problems_error(problems)
        return self
