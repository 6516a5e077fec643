"""`python -m sim sweep`: grid expansion, parameter validation, determinism across workers,
the table."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from sim.__main__ import main
from sim.params import Scenario
from sim.runner import POLICIES
from sim.sweep import (
    SweepError,
    expand_grid,
    parse_param,
    render,
    sweep,
    sweepable_fields,
    table_rows,
)
from tests.sim.builders import small

GRACE = "timing.pod_termination_grace_s"


def _small(horizon_h: float = 80.0) -> Scenario:
    return small(horizon_h=horizon_h)


def test_the_grid_is_the_product_of_the_axes_first_axis_slowest() -> None:
    base = _small()
    points = expand_grid(
        base, [(GRACE, ["30", "120"]), ("fleet.slices", ["8", "10"]), ("classes.low.population", ["4"])]
    )
    assert [p.values for p in points] == [
        {GRACE: 30.0, "fleet.slices": 8, "classes.low.population": 4},
        {GRACE: 30.0, "fleet.slices": 10, "classes.low.population": 4},
        {GRACE: 120.0, "fleet.slices": 8, "classes.low.population": 4},
        {GRACE: 120.0, "fleet.slices": 10, "classes.low.population": 4},
    ]
    last = points[-1].scenario
    assert last.timing.pod_termination_grace_s == 120.0 and last.fleet.slices == 10
    assert [c.population for c in last.classes] == [1, 4]  # only the named class changed
    assert last.timing.pod_start_s == base.timing.pod_start_s and last.failures == base.failures
    assert isinstance(points[0].values["fleet.slices"], int)  # parsed by the field's own type


def test_parse_param_splits_field_and_values() -> None:
    assert parse_param("timing.pod_start_s=15, 45") == ("timing.pod_start_s", ["15", "45"])
    for bad in ("timing.pod_start_s", "timing.pod_start_s=", "=15", "timing.pod_start_s=15,,45"):
        with pytest.raises(SweepError, match="expected FIELD=v1,v2"):
            parse_param(bad)


def test_an_unknown_field_is_named_and_the_valid_ones_listed() -> None:
    fields = sweepable_fields(_small())
    assert {GRACE, "timing.pod_start_s", "failures.rate_multiplier", "classes.high.population"} <= set(fields)
    assert "seed" not in fields and "name" not in fields  # seeds are the --seeds axis
    assert "classes.high.name" not in fields  # classes are addressed by name
    with pytest.raises(SweepError) as err:
        expand_grid(_small(), [("timing.pod_grace_s", ["30"])])
    message = str(err.value)
    assert message.startswith("--param timing.pod_grace_s: unknown field")
    assert GRACE in message and "failures.rate_multiplier" in message
    with pytest.raises(SweepError, match=r"classes\.medium\.population: unknown field"):
        expand_grid(_small(), [("classes.medium.population", ["1"])])  # _small has no medium class


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        (
            GRACE,
            "-1",
            f"--param {GRACE}=-1: {GRACE}: Input should be greater than or equal to 0 (allowed: float >= 0.0)",
        ),
        ("fleet.slices", "1.5", "--param fleet.slices=1.5: fleet.slices: Input should be a valid integer"),
        ("failures.unreachable_fraction", "2", "(allowed: float >= 0.0 and <= 1.0)"),
        ("timing.fast_fail", "maybe", "timing.fast_fail: Input should be a valid boolean"),
        ("classes.high.population", "-2", "--param classes.high.population=-2: classes.0.population: Input should"),
        ("fleet.slices", "1", "--param fleet.slices=1: Value error, classes[high].slices=2 exceeds fleet.slices=1"),
    ],
)
def test_a_bad_value_names_field_value_and_what_is_allowed(field: str, value: str, expected: str) -> None:
    with pytest.raises(SweepError) as err:
        expand_grid(_small(), [(field, ["30", value] if field == GRACE else [value])])
    assert expected in str(err.value)


def test_repeated_fields_and_values_are_rejected() -> None:
    with pytest.raises(SweepError, match="given twice"):
        expand_grid(_small(), [(GRACE, ["30"]), (GRACE, ["60"])])
    with pytest.raises(SweepError, match=r"value '30\.0' is repeated"):
        expand_grid(_small(), [(GRACE, ["30", "30.0"])])


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    return sweep(_small(), [(GRACE, ["30", "120"])], seeds=[3, 4], workers=1, progress=False)


def test_results_do_not_depend_on_the_number_of_workers(report: dict[str, Any]) -> None:
    parallel = sweep(_small(), [(GRACE, ["30", "120"])], seeds=[3, 4], workers=2, progress=False)
    assert json.dumps(parallel, allow_nan=True) == json.dumps(report, allow_nan=True)


def test_a_longer_termination_grace_raises_the_restart_floor_and_mttr(report: dict[str, Any]) -> None:
    short, long_ = report["points"]
    assert (short["params"], long_["params"]) == ({GRACE: 30.0}, {GRACE: 120.0})
    assert long_["restart_floor_s"] - short["restart_floor_s"] == 90.0
    for policy in POLICIES:
        assert short["policies"][policy]["mttr_lasting_s"]["n"] > 0, policy
    rec = [p["policies"]["reconciler"]["mttr_lasting_s"]["p50"] for p in (short, long_)]
    sched = [p["policies"]["scheduler"]["mttr_lasting_s"]["p50"] for p in (short, long_)]
    # The reconciler's lasting repairs sit on the restart floor, so they move with the grace one for one;
    # the scheduler waits for a victim grace in each of its two preemption waves.
    assert rec[1] - rec[0] >= 80.0
    assert sched[1] - sched[0] >= 2 * 80.0
    assert set(short["per_seed"]) == {"3", "4"}


def test_the_table_has_one_row_per_point_and_the_documented_columns(report: dict[str, Any]) -> None:
    header, rows = table_rows(report)
    assert header == [
        "pod_termination_grace_s",
        "floor s",
        *(f"{p} p50/p95 (n)" for p in POLICIES),
        "rec/none p50",
        "rec/sched p50",
        "xr s/r",
        "fleet gp s/r",
        "lost n/s/r",
        "partial n/s/r",
    ]
    assert [r[:2] for r in rows] == [["30", "61"], ["120", "151"]]
    for point, row in zip(report["points"], rows, strict=True):
        pol = point["policies"]
        assert row[header.index("fleet gp s/r")] == "/".join(
            f"{pol[p]['fleet_goodput']:.5f}" for p in ("scheduler", "reconciler")
        )
        assert "exchange_rate" in pol["reconciler"] and math.isnan(pol["none"]["exchange_rate"])
    assert all(len(r) == len(header) for r in rows)
    lines = render(report).splitlines()
    assert len(lines) == 1 + 1 + len(rows) and lines[0].startswith("== sweep small (2 seeds from 3")
    markdown = render(report, markdown=True).splitlines()
    assert len(markdown) == 2 + len(rows) and {line.count("|") for line in markdown} == {len(header) + 1}


def test_the_cli_writes_the_json_and_rejects_unknown_fields(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sweep.json"
    argv = ["sweep", "--scenario", "steady_3x", "--seeds", "1", "--scale", "0.002", "--workers", "1"]
    assert main([*argv, "--param", "timing.pod_start_s=15,45", "--out", str(out)]) == 0
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["scenario"] == "steady_3x" and data["seeds"] == [20260901]
    assert data["axes"] == {"timing.pod_start_s": [15.0, 45.0]}
    assert [p["restart_floor_s"] for p in data["points"]] == [61.0, 91.0]
    assert "== sweep steady_3x" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_:
        main([*argv, "--param", "timing.nope=1", "--out", str(out)])
    assert exit_.value.code == 2
    assert "--param timing.nope: unknown field" in capsys.readouterr().err
