"""The root stack configuration object: everything one environment needs, validated before any resource."""

from __future__ import annotations

from typing import Any

from pydantic import Field, ValidationError, model_validator

from components.config.base import ConfigModel, problems_error
from components.config.cluster import ClusterSettings, NetworkConfig, SystemPool
from components.config.errors import ConfigError, format_validation_error
from components.config.tpu import TpuPoolGroup

CONFIG_KEY = "platform"
CONFIG_PATH = f"gke-tpu-priority:{CONFIG_KEY}"
SYSTEM_POOL_NAME = "system"


class PlatformConfig(ConfigModel):
    project: str = Field(
        pattern=r"^[a-z][-a-z0-9]{4,28}[a-z0-9]$", description="GCP project id that hosts the platform."
    )
    region: str = Field(pattern=r"^[a-z]+-[a-z]+[0-9]+$", description="GCP region of the cluster, e.g. `us-east5`.")
    protect: bool = Field(
        default=False,
        description=(
            "Production safety: Pulumi `protect` on the cluster, TPU pools and workload namespaces, GKE deletion "
            "protection and node pool `deletionPolicy: PREVENT`. Turn off (and `pulumi up`) before a destroy."
        ),
    )
    labels: dict[str, str] = Field(default_factory=dict, description="GCP resource labels added to every resource.")
    network: NetworkConfig = Field(default_factory=NetworkConfig, description="VPC settings.")
    cluster: ClusterSettings = Field(default_factory=ClusterSettings, description="GKE cluster settings.")
    system_pool: SystemPool = Field(default_factory=SystemPool, description="The non-TPU system node pool.")
    tpu_pools: list[TpuPoolGroup] = Field(
        min_length=1,
        description="TPU v6e slice pool groups; each group is one shape, zone and capacity mode.",
    )

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
            if not group.zone.startswith(f"{self.region}-"):
                problems.append(
                    f".tpuPools[{i}].zone: {group.zone!r} is not in region {self.region!r}; "
                    f"use a zone like `{self.region}-b` that offers TPU v6e"
                )
        for j, zone in enumerate(self.system_pool.zones):
            if not zone.startswith(f"{self.region}-"):
                problems.append(f".systemPool.zones[{j}]: {zone!r} is not in region {self.region!r}")
        if problems:
            raise problems_error(problems)
        return self


def parse_platform_config(raw: Any) -> PlatformConfig:
    """Validate the raw `gke-tpu-priority:platform` object; raise ConfigError listing every problem."""
    if not isinstance(raw, dict):
        raise ConfigError(CONFIG_KEY, [f"{CONFIG_KEY}: expected an object, got {type(raw).__name__}"])
    try:
        return PlatformConfig.model_validate(raw)
    except ValidationError as err:
        raise format_validation_error(CONFIG_KEY, err) from None
