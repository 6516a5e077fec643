"""Validated per-stack configuration (pydantic v2)."""

from gke_tpu_priority.components.config.cluster import (
    AuthorizedNetwork,
    ClusterSettings,
    ControlPlaneAccess,
    Maintenance,
    MaintenanceExclusion,
    NetworkConfig,
    NetworkMode,
    ReleaseChannel,
    SystemPool,
)
from gke_tpu_priority.components.config.errors import ConfigError
from gke_tpu_priority.components.config.platform import CONFIG_KEY, CONFIG_PATH, PlatformConfig, parse_platform_config
from gke_tpu_priority.components.config.tpu import Capacity, CapacityMode, Reservation, Taint, TpuPoolGroup

__all__ = [
    "CONFIG_KEY",
    "CONFIG_PATH",
    "AuthorizedNetwork",
    "Capacity",
    "CapacityMode",
    "ClusterSettings",
    "ConfigError",
    "ControlPlaneAccess",
    "Maintenance",
    "MaintenanceExclusion",
    "NetworkConfig",
    "NetworkMode",
    "PlatformConfig",
    "ReleaseChannel",
    "Reservation",
    "SystemPool",
    "Taint",
    "TpuPoolGroup",
    "parse_platform_config",
]
