"""The benchmark's figures in README.md and docs/ are generated from the committed results files, and stay so."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from sim.bench import targets as bench_targets
from tools import bench_docs
from tools.bench_docs import (
    E2E_RESULTS,
    RENDER_COMMAND,
    RESULTS,
    ROOT,
    ResultsError,
    extract,
    extract_e2e,
    fill,
    render_blocks,
    stale_blocks,
)

MAX_BENCHMARK_LINES = 500


def _results() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((ROOT / RESULTS).read_text())
    return loaded


def _e2e() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((ROOT / E2E_RESULTS).read_text())
    return loaded


def _as_full(results: dict[str, Any]) -> dict[str, Any]:
    """A results file as the bench JSON it came from would look to `extract`: the same figures, and the targets
    the bench recorded."""
    full = copy.deepcopy(results)
    full["targets"] = bench_targets(copy.deepcopy(results))
    return full


def test_every_generated_block_in_readme_and_docs_is_current() -> None:
    stale = stale_blocks()
    assert stale == [], f"stale generated blocks {stale}: regenerate with `{RENDER_COMMAND}`"


def test_benchmarks_page_has_every_bench_block_and_fits_its_length() -> None:
    text = (ROOT / "docs/benchmarks.md").read_text()
    assert len(text.splitlines()) <= MAX_BENCHMARK_LINES
    for name in ("run", "gaps", "scenarios", "paired", "standing", "signal", "fleet", "scaling", "targets", "e2e"):
        assert f"<!-- bench:{name}:begin -->" in text, name


def test_results_file_records_how_the_run_ran() -> None:
    run = _results()["run"]
    for field in ("commit", "wall_s", "workers", "scale", "seeds", "date", "machine", "note"):
        assert run.get(field) not in (None, ""), field
    assert run["machine"] in bench_docs.MACHINES
    assert run["wall_s"] > 0 and run["workers"] >= 1


def test_extracting_a_results_file_again_renders_the_same_blocks() -> None:
    results = _results()
    again = extract(_as_full(results), results["run"]["machine"], results["run"]["note"], results["run"]["date"])
    assert render_blocks(again, None) == render_blocks(results, None)


def test_extract_refuses_a_file_whose_targets_differ_from_the_run() -> None:
    full = _as_full(_results())
    full["targets"][0]["met"] = not full["targets"][0]["met"]
    with pytest.raises(ResultsError, match="targets"):
        extract(full, "alone", "nothing else running", "2026-01-01")


def test_extract_refuses_an_unknown_machine_and_a_run_without_metadata() -> None:
    full = _as_full(_results())
    with pytest.raises(ResultsError, match="machine: 'quiet' is not one of alone, loaded"):
        extract(full, "quiet", "", "2026-01-01")
    del full["run"]["wall_s"]
    with pytest.raises(ResultsError, match="run: the bench JSON lacks wall_s"):
        extract(full, "alone", "", "2026-01-01")


def test_extract_keeps_only_what_the_tables_need() -> None:
    full = _as_full(_results())
    block = next(iter(full["scenarios"].values()))
    block["policies"]["reconciler"]["badput_s"] = {"idle_no_demand": 1.0}
    block["params"]["fleet"] = {"slices": 32}
    small = extract(full, "alone", "", "2026-01-01")
    first = next(iter(small["scenarios"].values()))
    assert "badput_s" not in first["policies"]["reconciler"]
    assert set(first["params"]) == {"horizon_h", "timing"}


def test_targets_blocks_show_every_target_once_with_make_bench_s_verdict() -> None:
    results = _results()
    rows = bench_targets(copy.deepcopy(results))
    rendered = bench_docs.targets_block(results) + "\n" + bench_docs.targets_by_scenario_block(results)
    for row in rows:
        verdict = "met" if row["met"] else "**not met**"
        scenario = next((n for n in results["scenarios"] if row["target"].endswith(f" ({n})")), None)
        if f"| {row['target']} | {row['figure']} | {verdict} |" in rendered:
            continue
        assert scenario is not None, row
        line = next(line for line in rendered.splitlines() if line.startswith(f"| {scenario} |"))
        assert f"{row['figure']}: {verdict}" in [cell.strip(" |") for cell in line.split(" | ")], row


def _pass_line(results: dict[str, Any]) -> str:
    return next(line for line in bench_docs.targets_block(results).splitlines() if "pass p99 <= 100 ms" in line)


def test_the_pass_target_follows_the_figure() -> None:
    results = _results()
    scaling = next(r for r in results["planner_scaling"] if r["slices"] == 4096)
    scaling["p99_ms"] = 50.0
    assert _pass_line(results).endswith("| 50.0 ms (CPU " + f"{scaling['cpu_p99_ms']:.1f} ms) | met |")
    scaling["p99_ms"] = 150.0
    assert _pass_line(results).endswith("| **not met** |")


def test_e2e_table_is_the_e2e_module_s_own_and_keeps_its_conditions() -> None:
    e2e = _e2e()
    table = bench_docs.e2e_block(e2e).splitlines()
    assert table[0] == bench_docs.E2E_TABLE_HEADER.splitlines()[0]
    assert len(table) == 2 + len(e2e["hotswap"]["runs"])
    assert e2e["hotswap"]["reconcilerOverrides"] == {"HOTSWAP_RECOVERY_STABILIZATION": "10s"}
    assert "HOTSWAP_RECOVERY_STABILIZATION=10s" in bench_docs.e2e_run_block(e2e)


def test_extract_e2e_keeps_the_table_fields_of_a_report() -> None:
    run = {**_e2e()["hotswap"]["runs"][0], "timelineSeconds": {"fault": 0.0}, "victims": ["lp-0"]}
    report = {
        "generated": "2026-01-01T00:00:00Z",
        "commit": "abc",
        "hotswap": {"repairAfterSeconds": 90.0, "reconcilerOverrides": {"X": "1"}, "runs": [run]},
    }
    small = extract_e2e(report, "alone")
    assert small["run"] == {"commit": "abc", "date": "2026-01-01T00:00:00Z", "note": "alone"}
    assert set(small["hotswap"]["runs"][0]) == set(bench_docs.E2E_RUN_FIELDS)
    assert bench_docs.e2e_block(small) == bench_docs.hotswap_runs_table([run])
    with pytest.raises(ResultsError, match=r"hotswap\.runs"):
        extract_e2e({"hotswap": {}}, "")


def test_fill_replaces_only_the_marked_bodies() -> None:
    text = (
        "intro\n<!-- bench:a:begin -->\nold\n<!-- bench:a:end -->\nmiddle\n"
        "<!-- bench:b:begin -->\n<!-- bench:b:end -->\n"
    )
    out = fill(text, {"a": "new a", "b": "new b\n"}, "doc.md")
    assert out == (
        "intro\n<!-- bench:a:begin -->\nnew a\n<!-- bench:a:end -->\nmiddle\n"
        "<!-- bench:b:begin -->\nnew b\n<!-- bench:b:end -->\n"
    )
    assert fill(out, {"a": "new a", "b": "new b\n"}, "doc.md") == out


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("<!-- bench:nope:begin -->\n<!-- bench:nope:end -->\n", r"doc.md: unknown block bench:nope \(known: a\)"),
        ("<!-- bench:a:begin -->\nbody\n", "doc.md: bench:a:begin has no bench:a:end"),
        ("<!-- bench:a:end -->\n", "doc.md: marker bench:a:end out of place"),
        (
            "<!-- bench:a:begin -->\n<!-- bench:a:begin -->\n<!-- bench:a:end -->\n",
            "doc.md: marker bench:a:begin out of place",
        ),
    ],
)
def test_fill_names_the_file_and_the_bad_marker(text: str, message: str) -> None:
    with pytest.raises(ResultsError, match=message):
        fill(text, {"a": "x"}, "doc.md")


def test_a_stale_block_is_reported_with_its_file(tmp_path: Path) -> None:
    (tmp_path / "docs/results").mkdir(parents=True)
    (tmp_path / RESULTS).write_text((ROOT / RESULTS).read_text())
    (tmp_path / "README.md").write_text("<!-- bench:summary:begin -->\nold figures\n<!-- bench:summary:end -->\n")
    (tmp_path / "docs/x.md").write_text("no blocks\n")
    assert stale_blocks(tmp_path) == ["README.md: bench:summary"]
    bench_docs.render(tmp_path)
    assert stale_blocks(tmp_path) == []
    assert "| scenario | reconciler lasting MTTR p50 |" in (tmp_path / "README.md").read_text()


def test_check_exits_1_naming_the_regenerate_command(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(bench_docs, "stale_blocks", lambda: ["README.md: bench:summary"])
    assert bench_docs.main(["render", "--check"]) == 1
    err = capsys.readouterr().err
    assert "stale: README.md: bench:summary" in err and RENDER_COMMAND in err


def test_summary_counts_every_peer_once_per_measure() -> None:
    results = _results()
    summary = bench_docs.summary_block(results)
    peers = len(bench_docs.tables.PEERS)
    for name in results["scenarios"]:
        line = next(line for line in summary.splitlines() if line.startswith(f"| {name} |"))
        for cell in line.split(" | ")[3:5]:
            counts = [int(part.split()[0]) for part in cell.strip(" |").split(", ")]
            assert sum(counts) == peers, (name, cell)


@pytest.mark.parametrize(
    "doc", ["docs/benchmarks.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs/design").glob("*.md"))]
)
def test_benchmark_and_design_links_resolve(doc: str) -> None:
    path = ROOT / doc
    for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", path.read_text()):
        assert (path.parent / target).exists(), f"{doc}: broken link {target}"


def test_every_design_record_is_listed_in_the_index() -> None:
    index = (ROOT / "docs/design/README.md").read_text()
    for record in (ROOT / "docs/design").glob("*.md"):
        if record.name != "README.md":
            assert f"]({record.name})" in index, record.name
