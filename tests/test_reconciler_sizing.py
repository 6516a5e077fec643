"""The reconciler's default resources follow the fleet, as Kueue's and JobSet's do."""

from __future__ import annotations

from gke_tpu_priority.components.config import parse_platform_config
from gke_tpu_priority.components.reconciler.objects import deployment
from testkit.platform import platform, tpu_pool


def resources(slices: int, **hotswap: object) -> dict[str, dict[str, str]]:
    pools = [tpu_pool(name=f"train{i}", slices=min(1000, slices - 1000 * i)) for i in range(-(-slices // 1000))]
    config = parse_platform_config(platform(*pools, queues={"allowOvercommit": False}, hotswap=hotswap or {}))
    pod = deployment(config, "image@sha256:" + "0" * 64, "hash", pinned=True)["spec"]["template"]["spec"]
    return pod["containers"][0]["resources"]


def mebibytes(value: str) -> int:
    return int(value.removesuffix("Mi")) if value.endswith("Mi") else 1024 * int(value.removesuffix("Gi"))


def test_memory_grows_with_the_fleet_and_covers_the_measured_peak() -> None:
    small, mid, large = resources(64), resources(4096), resources(16384)
    assert (
        mebibytes(small["limits"]["memory"]) < mebibytes(mid["limits"]["memory"]) < mebibytes(large["limits"]["memory"])
    )
    # docs/benchmarks.md "Reconciler scaling": the process peaks well under these at 4,096 / 16,384 slices.
    assert mebibytes(mid["limits"]["memory"]) >= 512 and mebibytes(large["limits"]["memory"]) >= 1536
    for sized in (small, mid, large):
        assert sized["requests"]["memory"] == sized["limits"]["memory"]
        # A quarter-core limit throttled every pass to four times its CPU time: one core whatever the size.
        assert sized["limits"]["cpu"] == "1000m"


def test_explicit_resources_win() -> None:
    sized = resources(4096, resources={"cpu": "2", "memory": "3Gi"})
    assert sized == {"requests": {"cpu": "2", "memory": "3Gi"}, "limits": {"cpu": "2", "memory": "3Gi"}}
