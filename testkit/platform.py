"""Builders for platform stack config dicts (camelCase, as in stack YAML), valid unless a test changes them."""

from __future__ import annotations

import copy
from typing import Any


def tpu_pool(name: str = "train", topology: str = "4x4", slices: int = 2, **overrides: Any) -> dict[str, Any]:
    pool: dict[str, Any] = {
        "name": name,
        "topology": topology,
        "slices": slices,
        "zone": "us-east5-b",
        "capacity": {"mode": "spot"},
    }
    pool.update(overrides)
    return pool


def platform(*pools: dict[str, Any], **overrides: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "project": "my-tpu-project",
        "region": "us-east5",
        "tpuPools": list(pools) or [tpu_pool()],
    }
    config.update(copy.deepcopy(overrides))
    return config


def stack_config(platform_config: dict[str, Any]) -> dict[str, Any]:
    """A whole stack `config:` mapping around a platform object."""
    return {
        "gcp:project": platform_config["project"],
        "gcp:region": platform_config["region"],
        "gke-tpu-priority:platform": platform_config,
    }
