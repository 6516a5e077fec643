"""The payback conditions per scenario in the bench's targets table: each one can fail on its own."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from sim.bench import pays_for_itself
from sim.params import Timing


def _stats(high: float, fleet: float, p50: float, p95: float, xr: float) -> dict[str, Any]:
    return {
        "high_goodput": high,
        "fleet_goodput": fleet,
        "mttr_lasting_s": {"p50": p50, "p95": p95},
        "exchange_rate": xr,
    }


def _block() -> dict[str, Any]:
    return {
        "params": {"timing": Timing().model_dump()},
        "policies": {
            "none": _stats(0.9990, 0.9990, 700.0, 1200.0, float("nan")),
            "scheduler": _stats(0.9993, 0.9989, 120.0, 120.0, 0.6),
            "reconciler": _stats(0.9994, 0.9991, 61.0, 61.0, 3.0),
        },
    }


def _failed(block: dict[str, Any]) -> list[str]:
    return [row["target"] for row in pays_for_itself("s", block) if not row["met"]]


def test_a_reconciler_that_pays_for_itself_meets_every_condition() -> None:
    rows = pays_for_itself("s", _block())
    assert len(rows) == 6 and all(row["met"] for row in rows)
    assert all(row["target"].endswith("(s)") for row in rows)


@pytest.mark.parametrize(
    ("field", "value", "failing"),
    [
        ("high_goodput", 0.9992, "reconciler high goodput >= scheduler (s)"),
        ("fleet_goodput", 0.9988, "reconciler fleet goodput >= scheduler (s)"),
        ("exchange_rate", 0.99, "reconciler exchange rate >= 1 (s)"),
    ],
)
def test_each_goodput_condition_fails_alone(field: str, value: float, failing: str) -> None:
    block = copy.deepcopy(_block())
    block["policies"]["reconciler"][field] = value
    assert _failed(block) == [failing]


def test_mttr_above_the_scheduler_or_far_above_the_floor_fails() -> None:
    block = copy.deepcopy(_block())
    block["policies"]["reconciler"]["mttr_lasting_s"] = {"p50": 77.0, "p95": 80.0}  # floor 61 + 15 = 76
    assert _failed(block) == ["reconciler lasting MTTR p50 <= drain floor + 15 s (s)"]
    block["policies"]["reconciler"]["mttr_lasting_s"] = {"p50": 70.0, "p95": 121.0}
    assert _failed(block) == ["reconciler lasting MTTR p50/p95 <= scheduler (s)"]


def test_high_goodput_below_none_fails() -> None:
    block = copy.deepcopy(_block())
    block["policies"]["none"]["high_goodput"] = 0.9995
    assert _failed(block) == ["reconciler high goodput >= none (s)"]


def test_no_exchange_rate_is_needed_when_no_victim_lost_anything() -> None:
    block = copy.deepcopy(_block())
    rec = block["policies"]["reconciler"]
    rec.update(exchange_rate=float("nan"), policy_victim_lost_chip_s=0.0, high_gain_over_none_chip_h=0.0)
    assert _failed(block) == []
    rec["policy_victim_lost_chip_s"] = 5.0  # lost something and gained nothing: NaN is no pass
    assert _failed(block) == ["reconciler exchange rate >= 1 (s)"]
