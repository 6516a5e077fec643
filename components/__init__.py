"""Pulumi components of gke-tpu-priority (importable from other Pulumi Python projects)."""

from gke_tpu_priority.components.cluster import TpuCluster, TpuClusterArgs
from gke_tpu_priority.components.platform import TpuPlatform, TpuPlatformArgs

__all__ = ["TpuCluster", "TpuClusterArgs", "TpuPlatform", "TpuPlatformArgs"]
