"""The fleet-size run's decisions (e2e/scale.py): the resized stack, the JobSets that fill it, the figures read back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from e2e.scale import (
    HIGH,
    LOW,
    MAX_SLICES_PER_GROUP,
    PLATFORM_KEY,
    beside_synthetic,
    pass_seconds,
    peak_rss_mib,
    percentile,
    point,
    pool_groups,
    scale_jobsets,
    scale_stack_config,
)
from gke_tpu_priority.components.config import parse_platform_config
from testkit.mock_runtime import load_stack_config


def test_the_resized_dev_stack_is_a_valid_platform_of_that_many_4x4_slices() -> None:
    original = load_stack_config("dev")
    config = scale_stack_config(original, 1024)
    platform = parse_platform_config(config[PLATFORM_KEY])
    assert sum(g.slices for g in platform.tpu_pools) == 1024
    assert {g.topology for g in platform.tpu_pools} == {"4x4"}
    assert max(g.slices for g in platform.tpu_pools) <= MAX_SLICES_PER_GROUP
    assert platform.hotswap.replicas == 1
    assert platform.hotswap.settings["resyncPeriod"] == "1s"
    # The stack file's own mapping is left as it was.
    assert [p["name"] for p in original[PLATFORM_KEY]["tpuPools"]] == ["dev-2x2", "dev-4x4"]


def test_pool_groups_split_at_the_per_group_limit_and_refuse_an_empty_fleet() -> None:
    assert [g["slices"] for g in pool_groups(2500)] == [1000, 1000, 500]
    assert [g["name"] for g in pool_groups(2)] == ["scale-0"]
    with pytest.raises(ValueError, match="slices: 0"):
        pool_groups(0)


def test_four_one_slice_jobsets_per_slice_one_in_sixteen_of_the_top_tier() -> None:
    workloads = scale_jobsets(32)
    assert len(workloads.all) == 128
    assert len(workloads.high) == 8
    names = [j["metadata"]["name"] for j in workloads.all]
    assert len(set(names)) == 128
    tiers = {j["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] for j in workloads.all}
    assert tiers == {HIGH, LOW}
    (replicated,) = workloads.high[0]["spec"]["replicatedJobs"]
    assert replicated["replicas"] == 1 and replicated["template"]["spec"]["parallelism"] == 4
    assert scale_jobsets(1).high and len(scale_jobsets(1).all) == 4


def test_pass_seconds_reads_only_the_pass_lines_of_the_json_log() -> None:
    lines = [
        json.dumps({"msg": "reconcile pass", "seconds": 0.0125, "pass": 1}),
        "not json, a stray line",
        json.dumps({"msg": "caches not synced and healthy yet; skipping pass"}),
        json.dumps({"msg": "reconcile pass", "seconds": 0.5}),
        json.dumps({"msg": "reconcile pass"}),  # an older reconciler without the field
    ]
    assert pass_seconds(lines) == [0.0125, 0.5]


def test_percentile_is_a_value_some_pass_took() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50.0
    assert percentile(values, 99) == 99.0
    assert percentile([3.0, 1.0, 2.0], 100) == 3.0
    with pytest.raises(ValueError):
        percentile([], 50)
    with pytest.raises(ValueError, match="q: 101"):
        percentile([1.0], 101)


def test_peak_rss_is_the_high_water_mark_in_mib() -> None:
    status = "Name:\tpython\nVmPeak:\t  900000 kB\nVmHWM:\t  133632 kB\nVmRSS:\t  120000 kB\n"
    assert peak_rss_mib(status) == 130.5
    with pytest.raises(ValueError, match="VmHWM"):
        peak_rss_mib("Name:\tpython\n")


def test_a_point_is_set_beside_the_synthetic_row_of_its_size(tmp_path: Path) -> None:
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps({"planner_scaling": [{"slices": 256, "jobsets": 1024, "pods": 1003, "p99_ms": 70.0}]}))
    points = [point(256, 1024, 1024, 5.7, 130.5, [0.01, 0.02, 0.08], 2.671), point(16, 64, 64, 1.2, 96.0, [0.01], 1.1)]
    rows = beside_synthetic(points, bench)
    assert rows[0]["nodes"] == 1024 and rows[0]["p50_ms"] == 20.0 and rows[0]["p99_ms"] == 80.0
    assert rows[0]["fault_to_hold_s"] == 2.67
    assert rows[0]["synthetic"]["p99_ms"] == 70.0 and rows[0]["synthetic"]["list_s"] is None
    assert rows[1]["synthetic"] is None
