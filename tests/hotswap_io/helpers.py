"""Small helpers shared by the I/O tests."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any


async def eventually(predicate: Callable[[], Any], timeout: float = 5.0, interval: float = 0.02) -> None:
    """Wait until ``predicate()`` is truthy; fail the test after ``timeout`` seconds (a hang guard)."""
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(interval)


def node(name: str, pool: str = "pool-a", ready: str = "True", **labels: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "labels": {
                "cloud.google.com/gke-nodepool": pool,
                "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
                "cloud.google.com/gke-tpu-topology": "4x4",
                **labels,
            },
        },
        "spec": {},
        "status": {
            "conditions": [{"type": "Ready", "status": ready, "lastTransitionTime": "2026-01-01T00:00:00Z"}],
            "allocatable": {"google.com/tpu": "4"},
        },
    }


def pod(name: str, jobset: str | None, namespace: str = "team-a", node_name: str | None = None) -> dict[str, Any]:
    labels = {"jobset.sigs.k8s.io/jobset-name": jobset} if jobset else {"app": "other"}
    return {
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"nodeName": node_name, "containers": [{"name": "c", "image": "x"}]},
        "status": {"phase": "Running"},
    }
