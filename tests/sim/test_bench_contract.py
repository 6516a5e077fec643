"""`hotswap.json` is a contract other tools read: its shape is checked on a tiny bench run."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from sim.bench import RECONCILER_COST, bench, run_cost
from sim.params import Scenario
from sim.plot import mttr_figure
from sim.report import best_online, markdown

POLICY_FIELDS: dict[str, type | tuple[type, ...]] = {
    "incidents": int,
    "lost_victims": int,
    "partial_preemptions": int,
    "permanent_victim_failures": int,
    "victims_per_incident": (int, float),
    "utilisation": (int, float),
}


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    out = tmp_path_factory.mktemp("bench")
    bench(out, scale=0.003, workers=1, passes=3, progress=False, seeds=1, sizes=(32,))
    return json.loads((out / "hotswap.json").read_text(encoding="utf-8")), out


def test_the_json_keeps_the_documented_shape(report: tuple[dict[str, Any], Path]) -> None:
    data, _ = report
    assert set(data["scenarios"]) == {
        "steady_1x",
        "steady_3x",
        "storm_4_in_60s",
        "long_repairs",
        "spare_4",
        "spare_nodes",
        "multi_disruption",
        "ladder",
        "multi_team",
    }
    for name, block in data["scenarios"].items():
        assert isinstance(block["params"], dict) and block["params"]["name"] == name
        assert isinstance(block["seed"], int)
        assert set(block["policies"]) == {
            "none",
            "scheduler",
            "scheduler-recreate",
            "reconciler",
            "kueue-tas",
            "hero",
            "hindsight",
        }
        for stats in block["policies"].values():
            for field, kind in POLICY_FIELDS.items():
                assert isinstance(stats[field], kind), (name, field, stats[field])
            assert set(stats["mttr_s"]) >= {"p50", "p95", "p99"}
    fleet = data["fleet"]
    assert fleet["scenario"] == "region_degraded" and set(fleet["modes"]) == {"multikueue", "independent"}
    for block in fleet["modes"].values():
        assert set(block["policies"]) == {"none", "scheduler", "reconciler"}
        for stats in block["policies"].values():
            assert 0.0 < stats["fleet_goodput"] <= 1.0 and 0.0 < stats["high_goodput"] <= 1.0
    (row,) = data["planner_scaling"]
    assert row["slices"] == 32 and row["jobsets"] == 128
    for field in ("p50_ms", "p99_ms", "cpu_p50_ms", "cpu_p99_ms", "peak_mb"):
        assert isinstance(row[field], float) and row[field] > 0
    for block in data["scenarios"].values():
        assert set(block["tier_weights"]) == {c["name"] for c in block["params"]["classes"]}
        assert block["params"]["checkpoint_signal"] is False  # the headline: nothing publishes
        for stats in block["policies"].values():
            assert set(stats["badput_by_tier_chip_h"]) == set(block["tier_weights"])
            assert isinstance(stats["weighted_badput_chip_h"], float)
            assert {"kueue_admission_preemptions", "kube_scheduler_pod_preemptions", "holds"} <= set(stats["actions"])
    assert data["signal"] and all(b["params"]["checkpoint_signal"] for b in data["signal"].values())
    for block in data["signal"].values():
        assert {"reconciler", "no-signal reconciler", "kueue-tas", "hero"} <= set(block["policies"])
    assert {"scale", "seeds", "commit", "wall_s"} <= set(data["run"])
    assert {t["target"].split(" (")[0] for t in data["targets"]} >= {
        "reconciler MTTR p50 <= 60 s",
        "reconciler lost victims == 0",
    }


def test_the_plot_has_one_panel_per_scenario_titled_by_it(report: tuple[dict[str, Any], Path]) -> None:
    data, out = report
    assert (out / "mttr.png").stat().st_size > 10_000
    titles = [ax.get_title() for ax in mttr_figure(data).axes]
    assert [t for t in titles if not t.endswith(": goodput")] == list(data["scenarios"])
    assert [t for t in titles if t.endswith(": goodput")] == [f"{name}: goodput" for name in data["scenarios"]]


def test_every_policy_reports_fleet_goodput_badput_and_an_exchange_rate(report: tuple[dict[str, Any], Path]) -> None:
    data, _ = report
    for block in data["scenarios"].values():
        for policy, stats in block["policies"].items():
            useful = sum(stats["useful_chip_s_by_tier"].values())
            assert 0.0 < stats["fleet_goodput"] <= 1.0
            assert stats["fleet_goodput"] == pytest.approx(useful / stats["provisioned_chip_s"], abs=1e-4)
            assert set(stats["goodput_by_tier"]) == {c["name"] for c in block["params"]["classes"]}
            assert set(stats["badput_s"]) >= {
                "own_disruption_wasted_progress",
                "victim_wasted_progress",
                "restart_initialisation",
                "idle_while_queued",
                "reserved_unused",
            }
            assert useful + sum(stats["badput_s"].values()) == pytest.approx(stats["provisioned_chip_s"], rel=1e-6)
            assert isinstance(stats["victim_lost_chip_h_per_incident"], float)
            assert isinstance(stats["exchange_rate"], float)
            if policy == "none":
                assert stats["high_gain_over_none_chip_h"] == 0.0


def test_every_policy_is_measured_against_the_hindsight_bound(report: tuple[dict[str, Any], Path]) -> None:
    data, _ = report
    for name, block in data["scenarios"].items():
        bound = block["policies"]["hindsight"]
        assert bound["high_badput_vs_hindsight"] == 1.0 and bound["victim_loss_vs_hindsight"] == 1.0
        for policy, stats in block["policies"].items():
            assert stats["high_badput_chip_h"] >= 0 and stats["victim_lost_chip_h"] >= 0, (name, policy)
            assert stats["victim_lost_chip_h"] == pytest.approx(
                stats["badput_s"]["victim_wasted_progress"] / 3600.0, abs=1e-3
            )
            if bound["high_badput_chip_h"] > 0:
                assert stats["high_badput_vs_hindsight"] == pytest.approx(
                    stats["high_badput_chip_h"] / bound["high_badput_chip_h"], abs=1e-3
                )
            for seed_runs in block["per_seed"].values():
                assert "high_badput_vs_hindsight" in seed_runs[policy]


def test_the_table_prints_the_hindsight_ratios(report: tuple[dict[str, Any], Path]) -> None:
    from sim.bench import table

    text = table(data := report[0])
    assert "hi bad/hs" in text and "vic loss/hs" in text
    for name in data["scenarios"]:
        assert f"== {name} " in text
    assert text.count("vs hindsight (high badput chip-h") == len(data["scenarios"])


def test_the_reconciler_runs_are_scheduled_first_unless_another_run_is_far_longer() -> None:
    short, long = Scenario(name="short", seed=1, horizon_h=100.0), Scenario(name="long", seed=1, horizon_h=1000.0)
    assert run_cost(short, "reconciler") == 100.0 * RECONCILER_COST
    assert run_cost(short, "reconciler") > run_cost(long, "hindsight") == 1000.0
    assert run_cost(long, "none") > run_cost(Scenario(name="x", seed=1, horizon_h=40.0), "reconciler")


def test_the_markdown_report_quotes_every_figure_row(report: tuple[dict[str, Any], Path]) -> None:
    data, _ = report
    text = markdown(data)
    named = [re.match(r"\| (\S+) \(\d+ x [\d,.]+ h\) \|", line) for line in text.splitlines()]
    assert [m[1] for m in named if m] == list(data["scenarios"])
    reconciler = data["scenarios"]["steady_1x"]["policies"]["reconciler"]
    assert f"| reconciler | {reconciler['incidents']:,} |" in text
    assert f"{reconciler['high_goodput']:,.5f}" in text
    assert text.count("| multikueue |") == 3 and text.count("| independent |") == 3
    assert text.count("| met |") + text.count("| **not met** |") == len(data["targets"])


def test_best_online_ignores_none_and_hindsight_and_breaks_ties_in_order() -> None:
    block = {
        "policies": {
            "none": {"victim_lost_chip_h": 0.0},
            "scheduler": {"victim_lost_chip_h": 5.0},
            "reconciler": {"victim_lost_chip_h": 2.0},
            "kueue-tas": {"victim_lost_chip_h": 2.0},
            "hero": {"victim_lost_chip_h": 3.0},
            "hindsight": {"victim_lost_chip_h": 1.0},
        }
    }
    assert best_online(block, "victim_lost_chip_h") == ("reconciler", 2.0)
    block["policies"]["hero"]["victim_lost_chip_h"] = 1.5
    assert best_online(block, "victim_lost_chip_h") == ("hero", 1.5)


def test_slice_struck_scenarios_run_under_more_seeds(report: tuple[dict[str, Any], Path]) -> None:
    from sim.scenarios import SEED_MULTIPLIER

    data, _ = report
    for name, block in data["scenarios"].items():
        expected = SEED_MULTIPLIER.get(name, 1)  # the fixture asks for one seed
        assert len(block["seeds"]) == len(block["per_seed"]) == expected, name
        assert block["seeds"] == list(range(block["seed"], block["seed"] + expected))


def _paired_block(reconciler: list[float], peer: list[float]) -> dict[str, Any]:
    per_seed = {
        str(i): {"reconciler": {"high_badput_chip_h": r}, "hero": {"high_badput_chip_h": p}}
        for i, (r, p) in enumerate(zip(reconciler, peer, strict=True))
    }
    return {"per_seed": per_seed, "policies": {"reconciler": {}, "hero": {}}}


def test_the_paired_comparison_calls_a_lead_only_outside_the_seed_spread() -> None:
    from sim.report import half_width, paired_difference, verdict

    # Differences -10, -12, -8, -10: mean -10, SE 0.816, t(3) 3.182 -> -10 ± 2.6, ahead.
    block = _paired_block([90.0, 88.0, 92.0, 90.0], [100.0, 100.0, 100.0, 100.0])
    mean, se, n = paired_difference(block, "hero", "high_badput_chip_h")
    assert (mean, n) == (-10.0, 4) and se == pytest.approx(0.8165, abs=1e-4)
    assert half_width(se, n) == pytest.approx(3.182 * 0.8165, abs=1e-3)
    assert verdict(mean, half_width(se, n)) == "ahead"
    # The same pooled lead made by one lucky seed (-40, 0, 0, 0) is no lead: -10 ± 31.8.
    lucky = _paired_block([60.0, 100.0, 100.0, 100.0], [100.0, 100.0, 100.0, 100.0])
    mean, se, n = paired_difference(lucky, "hero", "high_badput_chip_h")
    assert mean == -10.0 and verdict(mean, half_width(se, n)) == "tie"
    behind = _paired_block([110.0, 112.0, 108.0, 110.0], [100.0, 100.0, 100.0, 100.0])
    mean, se, n = paired_difference(behind, "hero", "high_badput_chip_h")
    assert verdict(mean, half_width(se, n)) == "**behind**"
    # A constant sub-0.05 chip-h gap has no spread at all; it is still a tie, and one seed says nothing.
    assert verdict(-0.01, 0.0) == "tie"
    one = _paired_block([90.0], [100.0])
    mean, se, n = paired_difference(one, "hero", "high_badput_chip_h")
    assert n == 1 and verdict(mean, half_width(se, n)) == "?"


def test_the_report_has_the_paired_table(report: tuple[dict[str, Any], Path]) -> None:
    data, _ = report
    text = markdown(data)
    section = text.split("### Reconciler against each peer, paired by seed")[1].split("###")[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| scenario")]
    assert [row.split(" | ")[0].removeprefix("| ") for row in rows] == list(data["scenarios"])
    assert all(row.count("±") == 12 for row in rows)
