"""GKE cluster, network, system node pool and maintenance settings."""

from __future__ import annotations

import ipaddress
import re
from enum import StrEnum

from pydantic import Field, field_validator, model_validator

from components import tpu_shapes
from components.config.base import ConfigModel, problems_error

_GKE_VERSION = re.compile(r"^(\d+)\.(\d+)(?:\.(\d+))?(?:-gke\.(\d+))?$")


def gke_version_key(version: str) -> tuple[int, int, int, int]:
    match = _GKE_VERSION.match(version)
    if not match:
        raise ValueError(f"{version!r} is not a GKE version (expected e.g. `1.33.2-gke.1043000`)")
    major, minor, patch, gke = match.groups()
    return int(major), int(minor), int(patch or 0), int(gke or 0)


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
    subnetwork: str | None = Field(
        default=None, description="`existing` only: the subnet (name or self link) in the stack's region."
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
    name: str = Field(description="Exclusion name, e.g. the training campaign it protects.")
    start_time: str = Field(description="RFC 3339 start, e.g. `2027-01-10T00:00:00Z`.")
    end_time: str = Field(description="RFC 3339 end.")
    scope: MaintenanceExclusionScope = Field(
        default=MaintenanceExclusionScope.NO_MINOR_OR_NODE_UPGRADES,
        description="What GKE may not do during the exclusion; node upgrades are what interrupt TPU training.",
    )


class Maintenance(ConfigModel):
    window_start: str = Field(
        default="2026-01-03T02:00:00Z",
        description="RFC 3339 start of the first recurring maintenance window.",
    )
    window_end: str = Field(default="2026-01-03T08:00:00Z", description="RFC 3339 end of that first window.")
    recurrence: str = Field(
        default="FREQ=WEEKLY;BYDAY=SA,SU",
        description="RFC 5545 RRULE for the window; GKE upgrades nodes (and so interrupts TPU slices) only inside it.",
    )
    exclusions: list[MaintenanceExclusion] = Field(
        default_factory=list, description="Periods with no upgrades, e.g. during a long training campaign."
    )


class ClusterSettings(ConfigModel):
    name: str = Field(
        default="tpu-platform",
        pattern=r"^[a-z]([-a-z0-9]*[a-z0-9])?$",
        max_length=40,
        description="GKE cluster name.",
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

    @model_validator(mode="after")
    def _check(self) -> ClusterSettings:
        problems = []
        if self.min_master_version is not None:
            try:
                if gke_version_key(self.min_master_version) < gke_version_key(tpu_shapes.MIN_GKE_VERSION):
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
