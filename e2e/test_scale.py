"""The reconciler on a full fleet of fake TPU v6e slices (e2e/scale_run.py), at a size CI affords: E2E_SCALE_SLICES
(default 32). The full sizes are one command, `python -m e2e.scale_run --slices 256,1024`, whose committed figures
(docs/results/scale.json) the report carries beside this run's. It has a cluster of its own, so it runs before the
session's (e2e/conftest.py)."""

from __future__ import annotations

import io
import json
import os

from e2e import report
from e2e.conftest import BUILD_DIR
from e2e.scale import HOSTS_PER_SLICE, JOBSETS_PER_SLICE
from e2e.scale_run import measure
from testkit.mock_runtime import PROJECT_ROOT

SLICES = int(os.environ.get("E2E_SCALE_SLICES", "32"))
WINDOW = float(os.environ.get("E2E_SCALE_WINDOW", "30"))
FULL_RESULT = PROJECT_ROOT / "docs" / "results" / "scale.json"


def test_the_reconciler_lists_plans_and_holds_on_a_full_fleet() -> None:
    out = io.StringIO()
    try:
        result = measure(SLICES, BUILD_DIR / "scale", out, WINDOW)
    finally:
        print(out.getvalue())
    section = report.section("scale")
    section["ci"] = result.as_report()
    if FULL_RESULT.is_file():
        section["full"] = {"from": "docs/results/scale.json", **json.loads(FULL_RESULT.read_text())}
    assert result.nodes == SLICES * HOSTS_PER_SLICE
    assert result.jobsets == SLICES * JOBSETS_PER_SLICE
    # One JobSet runs per slice, four pods (one per host); the other three wait in Kueue without pods.
    assert result.pods == SLICES * HOSTS_PER_SLICE, out.getvalue()
    assert result.passes >= 5, out.getvalue()
    assert 0 < result.p50_ms <= result.p99_ms
    assert result.list_s > 0 and result.peak_mb > 0
    assert result.fault_to_hold_s > 0
