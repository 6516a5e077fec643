"""Pulumi components of gke-tpu-priority (importable from other Pulumi Python projects)."""

from components.cluster import TpuCluster, TpuClusterArgs
from components.platform import TpuPlatform, TpuPlatformArgs

__all__ = ["TpuCluster", "TpuClusterArgs", "TpuPlatform", "TpuPlatformArgs"]
