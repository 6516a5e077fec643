"""GKE cluster, network, system node pool and maintenance settings."""

from __future__ import annotations

import ipaddress
import re
from datetime import datetime, timedelta
from enum import StrEnum

import pulumi
from pydantic import Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

from gke_tpu_priority.components import tpu_shapes
from gke_tpu_priority.components.config.base import ConfigModel, problems_error
from gke_tpu_priority.components.config.inputs import InputStr
from gke_tpu_priority.components.config.maintenance import availability_problem, parse_rfc3339

_GKE_VERSION = re.compile(r"^(\d+)\.(\d+)(?:\.(\d+))?(?:-gke\.(\d+))?$")
# GKE versions features of this package need (GKE docs of each feature).
JOBSET_MONITORING_MIN_VERSION = "1.32.1-gke.1357001"
FLEX_START_TPU_MIN_VERSION = "1.33.0-gke.1712000"
# Maintenance exclusion limits: at most 20 per cluster (pulumi-gcp / Terraform schema), at most three of scope
# NO_UPGRADES, each at most 30 days (GKE maintenance exclusion docs; Cluster API provider GCP enforces the same).
MAX_EXCLUSIONS = 20
MAX_NO_UPGRADES_EXCLUSIONS = 3
NO_UPGRADES_MAX_DAYS = 30


def gke_version_key(version: str) -> tuple[int, int, int, int]:
    match = _GKE_VERSION.match(version)
    if not match:
        raise ValueError(f"{version!r} is not a GKE version (expected e.g. `1.33.2-gke.1043000`)")
    major, minor, patch, gke = match.groups()
    return int(major), int(minor), int(patch or 0), int(gke or 0)


def gke_version_at_least(version: str, floor: str) -> bool:
    """Whether `version` is `floor` or newer. A prefix such as `1.33` or `1.33.1` names GKE's newest release of
    that line (that is how GKE resolves it), so it meets every floor within the line it names."""
    match = _GKE_VERSION.match(version)
    if not match:
        raise ValueError(f"{version!r} is not a GKE version (expected e.g. `1.33.2-gke.1043000`)")
    given = [int(p) for p in match.groups() if p is not None]
    return tuple(given) >= gke_version_key(floor)[: len(given)]


def gke_version_needs(flex_start_pools: list[int]) -> dict[str, str]:
    """The GKE version each feature the stack uses needs; JOBSET monitoring is always on."""
    needs = {"the JOBSET monitoring component": JOBSET_MONITORING_MIN_VERSION}
    if flex_start_pools:
        where = ", ".join(f"tpuPools[{i}]" for i in flex_start_pools)
        needs[f"flex-start TPU capacity ({where})"] = FLEX_START_TPU_MIN_VERSION
    return needs


def version_floor_problems(min_master_version: str | None, needs: dict[str, str]) -> list[str]:
    """`needs` maps a feature in use to the GKE version it requires; each floor above minMasterVersion is a problem.

    Unset, minMasterVersion lets the release channel pick its default version, which is newer than every floor here.
    """
    if min_master_version is None or _GKE_VERSION.match(min_master_version) is None:
        return []
    return [
        f".cluster.minMasterVersion: {min_master_version!r} is older than {floor}, which {feature} needs; "
        f"set it to {floor} or newer (or leave it unset to get the release channel's default)"
        for feature, floor in needs.items()
        if not gke_version_at_least(min_master_version, floor)
    ]


def _cidr(value: str, field: str) -> str:
    try:
        ipaddress.ip_network(value, strict=True)
    except ValueError as exc:
        raise ValueError(f"{field}: {value!r} is not a valid CIDR block ({exc})") from None
    return value


class NetworkMode(StrEnum):
    CREATE = "create"
    EXISTING = "existing"


class NetworkConfig(ConfigModel):
    mode: NetworkMode = Field(
        default=NetworkMode.CREATE,
        description="`create` a dedicated VPC, subnet, Cloud Router and NAT; or use an `existing` VPC and subnet.",
    )
    name: str = Field(
        default="tpu-platform",
        pattern=r"^[a-z]([-a-z0-9]*[a-z0-9])?$",
        max_length=50,
        description="`create`: base name of the VPC, subnet, router and NAT. `existing`: the VPC's name or self link.",
    )
    subnetwork: InputStr | None = Field(
        default=None,
        description="`existing` only: the subnet (name or self link) in the stack's region (may be an output).",
    )
    subnet_cidr: str = Field(default="10.10.0.0/20", description="`create`: primary range of the subnet (nodes).")
    pods_cidr: str = Field(default="10.64.0.0/14", description="`create`: secondary range for pods.")
    services_cidr: str = Field(default="10.68.0.0/20", description="`create`: secondary range for services.")
    pods_range_name: str = Field(default="pods", description="Name of the subnet's secondary range for pods.")
    services_range_name: str = Field(default="services", description="Name of the secondary range for services.")

    @model_validator(mode="after")
    def _check(self) -> NetworkConfig:
        problems = []
        for field, value in (
            ("subnetCidr", self.subnet_cidr),
            ("podsCidr", self.pods_cidr),
            ("servicesCidr", self.services_cidr),
        ):
            try:
                _cidr(value, f".{field}")
            except ValueError as exc:
                problems.append(str(exc))
        if not problems:
            nets = {
                "subnetCidr": ipaddress.ip_network(self.subnet_cidr),
                "podsCidr": ipaddress.ip_network(self.pods_cidr),
                "servicesCidr": ipaddress.ip_network(self.services_cidr),
            }
            names = list(nets)
            for i, a in enumerate(names):
                for b in names[i + 1 :]:
                    if nets[a].overlaps(nets[b]):
                        problems.append(f".{b}: {nets[b]} overlaps {a} {nets[a]}; choose disjoint ranges")
        if self.mode is NetworkMode.EXISTING and not self.subnetwork:
            problems.append(
                ".subnetwork: mode `existing` needs the subnet name (with pod and service secondary ranges)"
            )
        if self.mode is NetworkMode.CREATE and self.subnetwork:
            problems.append(".subnetwork: only valid with mode `existing`; mode `create` makes its own subnet")
        if problems:
            raise problems_error(problems)
        return self


class ReleaseChannel(StrEnum):
    RAPID = "RAPID"
    REGULAR = "REGULAR"
    STABLE = "STABLE"
    EXTENDED = "EXTENDED"


class ControlPlaneAccess(StrEnum):
    PUBLIC = "public"
    DNS = "dns"
    PRIVATE = "private"


class AuthorizedNetwork(ConfigModel):
    cidr_block: str = Field(description="CIDR allowed to reach the control plane's IP endpoint.")
    display_name: str = Field(default="", description="Label shown in the console.")

    @field_validator("cidr_block")
    @classmethod
    def _valid(cls, value: str) -> str:
        return _cidr(value, "cidrBlock")


class MaintenanceExclusionScope(StrEnum):
    NO_UPGRADES = "NO_UPGRADES"
    NO_MINOR_UPGRADES = "NO_MINOR_UPGRADES"
    NO_MINOR_OR_NODE_UPGRADES = "NO_MINOR_OR_NODE_UPGRADES"


class MaintenanceExclusion(ConfigModel):
    name: str = Field(min_length=1, description="Exclusion name, e.g. the training campaign it protects.")
    start_time: str = Field(description="RFC 3339 start, e.g. `2027-01-10T00:00:00Z`.")
    end_time: str = Field(description="RFC 3339 end.")
    scope: MaintenanceExclusionScope = Field(
        default=MaintenanceExclusionScope.NO_MINOR_OR_NODE_UPGRADES,
        description=(
            "What GKE may not do during the exclusion; node upgrades are what interrupt TPU training. "
            f"`NO_UPGRADES` may last at most {NO_UPGRADES_MAX_DAYS} days."
        ),
    )

    @model_validator(mode="after")
    def _check(self) -> MaintenanceExclusion:
        problems = []
        times: dict[str, datetime] = {}
        for field, value in (("startTime", self.start_time), ("endTime", self.end_time)):
            try:
                times[field] = parse_rfc3339(value)
            except ValueError as exc:
                problems.append(f".{field}: {exc}")
        if len(times) == 2:
            length = times["endTime"] - times["startTime"]
            if length <= timedelta(0):
                problems.append(f".endTime: {self.end_time!r} is not after startTime {self.start_time!r}")
            elif self.scope is MaintenanceExclusionScope.NO_UPGRADES and length > timedelta(days=NO_UPGRADES_MAX_DAYS):
                problems.append(
                    f".endTime: a NO_UPGRADES exclusion of {length.total_seconds() / 86400:g} days exceeds GKE's "
                    f"{NO_UPGRADES_MAX_DAYS}; end it by "
                    f"{(times['startTime'] + timedelta(days=NO_UPGRADES_MAX_DAYS)).strftime('%Y-%m-%dT%H:%M:%SZ')} "
                    "or use scope NO_MINOR_OR_NODE_UPGRADES, which may run longer"
                )
        if problems:
            raise problems_error(problems)
        return self


class Maintenance(ConfigModel):
    window_start: str = Field(
        default="2026-01-03T02:00:00Z",
        description="RFC 3339 start (UTC) of the first recurring maintenance window.",
    )
    window_end: str = Field(default="2026-01-03T08:00:00Z", description="RFC 3339 end of that first window.")
    recurrence: str = Field(
        default="FREQ=WEEKLY;BYDAY=SA,SU",
        description=(
            "RFC 5545 RRULE for the window, in UTC; GKE upgrades nodes (and so interrupts TPU slices) only inside it. "
            "GKE requires 48 h of availability in every 32 days, counting blocks of 4 h or more."
        ),
    )
    exclusions: list[MaintenanceExclusion] = Field(
        default_factory=list,
        max_length=MAX_EXCLUSIONS,
        description=(
            f"Periods with no upgrades, e.g. during a long training campaign; at most {MAX_EXCLUSIONS}, "
            f"of which at most {MAX_NO_UPGRADES_EXCLUSIONS} `NO_UPGRADES`."
        ),
    )

    @model_validator(mode="after")
    def _check(self) -> Maintenance:
        problems = []
        parsed = True
        for field, value in (("windowStart", self.window_start), ("windowEnd", self.window_end)):
            try:
                parse_rfc3339(value)
            except ValueError as exc:
                problems.append(f".{field}: {exc}")
                parsed = False
        if parsed:
            try:
                problem = availability_problem(self.window_start, self.window_end, self.recurrence)
            except ValueError as exc:
                problem = str(exc)
            if problem is not None:
                problems.append(f".recurrence: {problem}")
        no_upgrades = [i for i, e in enumerate(self.exclusions) if e.scope is MaintenanceExclusionScope.NO_UPGRADES]
        if len(no_upgrades) > MAX_NO_UPGRADES_EXCLUSIONS:
            problems.append(
                f".exclusions: {len(no_upgrades)} exclusions (indexes {no_upgrades}) have scope NO_UPGRADES; GKE "
                f"allows {MAX_NO_UPGRADES_EXCLUSIONS}: merge them or use NO_MINOR_OR_NODE_UPGRADES"
            )
        seen: dict[str, int] = {}
        for i, exclusion in enumerate(self.exclusions):
            if exclusion.name in seen:
                problems.append(
                    f".exclusions[{i}].name: {exclusion.name!r} is already used by exclusions[{seen[exclusion.name]}]; "
                    "GKE keys exclusions by name"
                )
            seen.setdefault(exclusion.name, i)
        if problems:
            raise problems_error(problems)
        return self


class KubernetesAuth(StrEnum):
    ADC = "adc"
    GCLOUD = "gcloud"


class ClusterMode(StrEnum):
    CREATE = "create"
    EXISTING = "existing"


# Settings that shape a cluster the package creates; with `mode: existing` they would silently do nothing.
CREATED_CLUSTER_ONLY = (
    "release_channel",
    "min_master_version",
    "private_nodes",
    "control_plane_access",
    "master_ipv4_cidr_block",
    "authorized_networks",
    "deletion_protection",
    "maintenance",
)
EXISTING_CLUSTER_ONLY = ("location", "kubeconfig_context", "system_node_selector")


class ClusterSettings(ConfigModel):
    mode: ClusterMode = Field(
        default=ClusterMode.CREATE,
        description=(
            "`create`: the package creates the GKE cluster, its network and node pools. `existing`: it creates no "
            "GCP resource and installs Kueue, JobSet, the tiers, the queues and the reconciler into the cluster "
            "`name` in `location`; `tpuPools` then describe that cluster's TPU node pools."
        ),
    )
    name: InputStr = Field(
        default="tpu-platform",
        pattern=r"^[a-z]([-a-z0-9]*[a-z0-9])?$",
        max_length=40,
        description=(
            "GKE cluster name. With `mode: existing`, the cluster to install into (may be another resource's "
            "output, e.g. a cluster made elsewhere in the program)."
        ),
    )
    location: str | None = Field(
        default=None,
        pattern=r"^[a-z]+-[a-z]+[0-9]+(-[a-z])?$",
        description=(
            "`existing` only: region or zone of the existing cluster; defaults to the stack's `region`. Its endpoint "
            "and CA certificate are read from the GKE API (a lookup, not a resource)."
        ),
    )
    kubeconfig_context: str | None = Field(
        default=None,
        min_length=1,
        description=(
            "`existing` only: use this context of the local kubeconfig (`KUBECONFIG` or `~/.kube/config`) instead "
            "of looking the cluster up in the GKE API, e.g. for a cluster reached through a bastion or Connect "
            "gateway."
        ),
    )
    system_node_selector: dict[str, str] = Field(
        default_factory=dict,
        description=(
            "`existing` only: node labels of the non-TPU nodes that run Kueue, JobSet and the reconciler, e.g. "
            "`{cloud.google.com/gke-nodepool: default-pool}`. Unset: any schedulable node; TPU nodes carry GKE's "
            "`google.com/tpu` taint, so the controllers never land there."
        ),
    )
    release_channel: ReleaseChannel = Field(
        default=ReleaseChannel.REGULAR,
        description="GKE release channel; it picks and upgrades the GKE version.",
    )
    min_master_version: str | None = Field(
        default=None,
        description=f"Optional minimum GKE version; TPU v6e needs {tpu_shapes.MIN_GKE_VERSION} or newer.",
    )
    private_nodes: bool = Field(default=True, description="Nodes get no public IPs (egress through Cloud NAT).")
    control_plane_access: ControlPlaneAccess = Field(
        default=ControlPlaneAccess.PUBLIC,
        description=(
            "`public`: IP endpoint limited to `authorizedNetworks`; `dns`: GKE's DNS-based endpoint (IAM-gated, "
            "reachable from anywhere with credentials; the IP endpoint is disabled); `private`: private IP endpoint "
            "only, so `pulumi up` must run inside the VPC."
        ),
    )
    master_ipv4_cidr_block: str = Field(
        default="172.16.0.0/28", description="/28 for the control plane's private endpoint peering."
    )
    authorized_networks: list[AuthorizedNetwork] = Field(
        default_factory=list,
        description="CIDRs allowed to reach the IP endpoint; must include where `pulumi up` runs for `public`.",
    )
    deletion_protection: bool | None = Field(
        default=None, description="GKE deletion protection; defaults to the stack's `protect` setting."
    )
    maintenance: Maintenance = Field(default_factory=Maintenance, description="Maintenance window and exclusions.")
    kubernetes_auth: KubernetesAuth = Field(
        default=KubernetesAuth.ADC,
        description=(
            "Credentials the Kubernetes provider's gke-gcloud-auth-plugin uses: `adc` (Application Default "
            "Credentials, the same identity pulumi-gcp uses; works on CI runners with only ADC or Workload Identity "
            "Federation) or `gcloud` (the active `gcloud auth login` account)."
        ),
    )

    def is_existing(self) -> bool:
        return self.mode is ClusterMode.EXISTING

    def changed_from_default(self, fields: tuple[str, ...]) -> list[str]:
        """Fields (camelCase) whose value differs from the default: set by the user, whatever dumped them."""
        changed = []
        for field in fields:
            default = type(self).model_fields[field].get_default(call_default_factory=True)
            if getattr(self, field) != default:
                changed.append(to_camel(field))
        return changed

    @model_validator(mode="after")
    def _check(self) -> ClusterSettings:
        problems = []
        if not self.is_existing() and isinstance(self.name, pulumi.Output):
            problems.append(
                ".name: an output is accepted only with `mode: existing`; a created cluster's name also names its "
                "node service account, so give it as a plain string"
            )
        if self.is_existing():
            problems += [
                f".{field}: only applies to a cluster this package creates; remove it with `mode: existing` "
                "(the existing cluster keeps its own setting)"
                for field in self.changed_from_default(CREATED_CLUSTER_ONLY)
            ]
        else:
            problems += [
                f".{field}: only valid with `mode: existing`; a created cluster's controllers run on its system pool"
                if field == "systemNodeSelector"
                else f".{field}: only valid with `mode: existing`"
                for field in self.changed_from_default(EXISTING_CLUSTER_ONLY)
            ]
        if self.min_master_version is not None:
            try:
                if not gke_version_at_least(self.min_master_version, tpu_shapes.MIN_GKE_VERSION):
                    problems.append(
                        f".minMasterVersion: {self.min_master_version!r} is too old for TPU v6e; "
                        f"use {tpu_shapes.MIN_GKE_VERSION} or newer"
                    )
            except ValueError as exc:
                problems.append(f".minMasterVersion: {exc}")
        try:
            net = _cidr(self.master_ipv4_cidr_block, ".masterIpv4CidrBlock")
            if ipaddress.ip_network(net).prefixlen != 28:
                problems.append(f".masterIpv4CidrBlock: {net!r} must be a /28")
        except ValueError as exc:
            problems.append(str(exc))
        if self.control_plane_access is ControlPlaneAccess.PRIVATE and not self.private_nodes:
            problems.append(".controlPlaneAccess: `private` requires `privateNodes: true`")
        if self.control_plane_access is ControlPlaneAccess.DNS and self.authorized_networks:
            problems.append(
                ".authorizedNetworks: unused with `controlPlaneAccess: dns` (the IP endpoint is off); remove them"
            )
        if problems:
            raise problems_error(problems)
        return self


class SystemPool(ConfigModel):
    machine_type: str = Field(
        default="e2-standard-4",
        description="Machine type of the non-TPU pool running Kueue, JobSet, the reconciler.",
    )
    node_count_per_zone: int = Field(default=1, ge=1, le=100, description="Nodes per zone (autoscaling minimum).")
    max_node_count_per_zone: int = Field(default=3, ge=1, le=100, description="Autoscaling maximum per zone.")
    zones: list[str] = Field(
        default_factory=list, description="Zones of the system pool; defaults to the TPU pools' zones."
    )
    disk_size_gb: int = Field(default=100, ge=20, le=2000, description="Boot disk size in GB.")

    @model_validator(mode="after")
    def _check(self) -> SystemPool:
        if self.max_node_count_per_zone < self.node_count_per_zone:
            raise ValueError(
                f".maxNodeCountPerZone: {self.max_node_count_per_zone} is below nodeCountPerZone "
                f"{self.node_count_per_zone}; raise it to at least {self.node_count_per_zone}"
            )
        return self
