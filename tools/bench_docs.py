"""The benchmark's figures in the docs, generated from committed results files.

    python -m tools.bench_docs extract build/bench/hotswap.json --machine loaded --note "..."
    python -m tools.bench_docs extract-e2e build/e2e/report.json --note "..."
    python -m tools.bench_docs render            # rewrite every marked block in README.md and docs/*.md
    python -m tools.bench_docs render --check    # exit 1 naming each stale block

`extract` keeps, of a full `make bench` JSON (tens of megabytes), only what the docs' tables need and the run's
metadata, and writes docs/results/bench.json; it refuses to write a file that would not render the same tables and
targets as the full JSON. `extract-e2e` does the same for `make e2e`'s report.json (docs/results/e2e.json).
`render` fills every block between `<!-- bench:NAME:begin -->` and `<!-- bench:NAME:end -->` from those two files,
with the table code `python -m sim report` and `make bench` use, so a figure in a
generated block is never typed by hand, and the targets' met / not met is what `make bench` prints.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from sim import report as tables
from sim.bench import fmt, restart_floor_s
from sim.bench import targets as bench_targets

JsonObj = dict[str, Any]

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path("docs/results/bench.json")
E2E_RESULTS = Path("docs/results/e2e.json")
RENDER_COMMAND = "python -m tools.bench_docs render"

# --- extract: the full bench JSON -> the small results file -------------------------------------------------------

SCENARIO_POLICY_FIELDS = (
    "incidents",
    "mttr_s",
    "mttr_lasting_s",
    "high_goodput",
    "fleet_goodput",
    "exchange_rate",
    "high_gain_over_none_chip_h",
    "policy_victim_lost_chip_s",
    "high_badput_chip_h",
    "high_badput_vs_hindsight",
    "weighted_badput_chip_h",
    "victim_lost_chip_h",
    "victim_loss_vs_hindsight",
    "victims",
    "partial_preemptions",
    "lost_victims",
)
"""What the scenario tables and the targets read of a pooled policy block."""
QUANTILE_FIELDS = ("p50", "p95", "p99", "n")
PER_SEED_FIELDS = tuple(field for field, _ in tables.PAIRED_FIELDS)
TIMING_FIELDS = (
    "fault_to_pod_failed_s",
    "pod_termination_grace_s",
    "jobset_recreate_s",
    "follower_create_s",
    "pod_start_s",
)
"""The timings of the restart floors (`restart_floor_s`, `no_drain_floor_s`)."""
FLEET_POLICY_FIELDS = ("mttr_lasting_s", "high_goodput", "fleet_goodput", "exchange_rate", "dispatch")
SCALING_FIELDS = (
    "slices",
    "jobsets",
    "pods",
    "passes",
    "p50_ms",
    "p99_ms",
    "cpu_p50_ms",
    "cpu_p99_ms",
    "plan_p50_ms",
    "plan_p99_ms",
    "list_s",
    "peak_mb",
)
RUN_FIELDS = ("commit", "wall_s", "workers", "scale", "seeds", "seed", "load_average_start", "load_average_end")
MACHINES = ("alone", "loaded")
E2E_RUN_FIELDS = (
    "mode",
    "fault",
    "recoverySeconds",
    "recoveredBeforeRepair",
    "victimsEvicted",
    "victimsRequeued",
    "victimsBack",
    "partialEvictions",
    "lostWorkloads",
    "restartedOntoFailedSlice",
)


class ResultsError(ValueError):
    """A results file or a document that cannot be used as it is; the message says what and why."""


def _pick(block: Mapping[str, Any], fields: Iterable[str]) -> JsonObj:
    return {f: block[f] for f in fields if f in block}


def _policy(stats: Mapping[str, Any], fields: Sequence[str]) -> JsonObj:
    out = _pick(stats, fields)
    for key in ("mttr_s", "mttr_lasting_s"):
        if key in out:
            out[key] = _pick(out[key], QUANTILE_FIELDS)
    return out


def _per_seed(block: Mapping[str, Any], policies: Sequence[str], fields: Sequence[str]) -> JsonObj:
    return {
        seed: {p: _pick(runs[p], fields) for p in policies if p in runs}
        for seed, runs in block.get("per_seed", {}).items()
    }


def _scenario(block: Mapping[str, Any]) -> JsonObj:
    params = block["params"]
    return {
        "params": {"horizon_h": params["horizon_h"], "timing": _pick(params["timing"], TIMING_FIELDS)},
        "seeds": list(block["seeds"]),
        "policies": {p: _policy(s, SCENARIO_POLICY_FIELDS) for p, s in block["policies"].items()},
        "per_seed": _per_seed(block, tables.ONLINE, PER_SEED_FIELDS),
    }


SIGNAL_POLICIES = ("reconciler", "no-signal reconciler")
"""The signal table's pooled columns; its paired cells read the peers per seed."""


def _signal(block: Mapping[str, Any]) -> JsonObj:
    fields = tuple(field for field, _ in tables.SIGNAL_FIELDS)
    return {
        "scenario": block["scenario"],
        "checkpoint_share": block["checkpoint_share"],
        "seeds": list(block["seeds"]),
        "policies": {p: _policy(block["policies"][p], SCENARIO_POLICY_FIELDS) for p in SIGNAL_POLICIES},
        "per_seed": _per_seed(block, tables.ONLINE, fields),
    }


def _fleet(fleet: Mapping[str, Any]) -> JsonObj:
    return {
        "scenario": fleet["scenario"],
        "modes": {
            mode: {"policies": {p: _policy(s, FLEET_POLICY_FIELDS) for p, s in block["policies"].items()}}
            for mode, block in fleet["modes"].items()
        },
    }


def extract(full: Mapping[str, Any], machine: str, note: str, date: str) -> JsonObj:
    """The small results file of one full bench JSON: the tables' inputs and the run's metadata. `machine` says
    whether the run had the machine to itself (`alone`) or shared it (`loaded`); `note` says how."""
    if machine not in MACHINES:
        raise ResultsError(f"machine: {machine!r} is not one of {', '.join(MACHINES)}")
    run = full.get("run", {})
    missing = [f for f in ("commit", "wall_s", "workers", "scale", "seeds") if f not in run]
    if missing:
        raise ResultsError(f"run: the bench JSON lacks {', '.join(missing)} (written by `make bench`)")
    small: JsonObj = {
        "run": {**_pick(run, RUN_FIELDS), "date": date, "machine": machine, "note": note},
        "scenarios": {n: _scenario(b) for n, b in full["scenarios"].items()},
        "signal": {n: _signal(b) for n, b in (full.get("signal") or {}).items()},
        "planner_scaling": [_pick(r, SCALING_FIELDS) for r in full.get("planner_scaling", [])],
    }
    if "fleet" in full:
        small["fleet"] = _fleet(full["fleet"])
    _same_as_full(full, small)
    return small


def _same_as_full(full: Mapping[str, Any], small: Mapping[str, Any]) -> None:
    """Refuse a results file whose tables or targets differ from those of the run it was extracted from."""
    if bench_targets(dict(small)) != full.get("targets"):
        raise ResultsError("targets: the extracted figures give other targets than the bench recorded")
    for name, make in RUN_TABLES.items():
        if make(small) != make(full):
            raise ResultsError(f"{name}: the extracted figures render another table than the full bench JSON")


def extract_e2e(report: Mapping[str, Any], note: str) -> JsonObj:
    """The small results file of `make e2e`'s report.json: the hotswap runs' table fields and their conditions."""
    hotswap = report.get("hotswap") or {}
    if not hotswap.get("runs"):
        raise ResultsError("hotswap.runs: the report has no hotswap runs (`make e2e` writes them)")
    return {
        "run": {"commit": report.get("commit", "unknown"), "date": report.get("generated", "unknown"), "note": note},
        "hotswap": {
            "repairAfterSeconds": hotswap.get("repairAfterSeconds"),
            "reconcilerOverrides": hotswap.get("reconcilerOverrides", {}),
            "runs": [_pick(r, E2E_RUN_FIELDS) for r in hotswap["runs"]],
        },
    }


# --- render: the results files -> the generated blocks ------------------------------------------------------------


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|")


def _table(head: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _scenario_suffix(target: str, scenarios: Iterable[str]) -> tuple[str, str] | None:
    """("condition", "scenario") of a per-scenario target row such as "... >= scheduler (steady_1x)"."""
    for name in scenarios:
        suffix = f" ({name})"
        if target.endswith(suffix):
            return target.removesuffix(suffix).removeprefix("reconciler "), name
    return None


def _result(row: Mapping[str, Any]) -> str:
    return "met" if row["met"] else "**not met**"


def _split_targets(results: Mapping[str, Any]) -> tuple[list[JsonObj], dict[str, dict[str, JsonObj]]]:
    """The targets as `make bench` computes them, split into the fleet-wide rows and, per condition that every
    scenario is judged on, the rows by scenario."""
    names = list(results["scenarios"])
    rows = bench_targets(dict(results))
    by_condition: dict[str, dict[str, JsonObj]] = {}
    for row in rows:
        found = _scenario_suffix(row["target"], names)
        if found:
            by_condition.setdefault(found[0], {})[found[1]] = row
    per_scenario = {c: cells for c, cells in by_condition.items() if len(cells) > 1}
    general = [r for r in rows if not ((f := _scenario_suffix(r["target"], names)) and f[0] in per_scenario)]
    return general, per_scenario


def targets_block(results: Mapping[str, Any]) -> str:
    general, _ = _split_targets(results)
    return _table(("target", "figure", "result"), [(r["target"], r["figure"], _result(r)) for r in general])


def targets_by_scenario_block(results: Mapping[str, Any]) -> str:
    _, per_scenario = _split_targets(results)
    head = ["scenario", *(f"reconciler {c}" for c in per_scenario)]
    rows = []
    for name in results["scenarios"]:
        cells = [per_scenario[c].get(name) for c in per_scenario]
        rows.append([name, *("" if r is None else f"{r['figure']}: {_result(r)}" for r in cells)])
    return _table(head, rows)


def _targets_met(results: Mapping[str, Any]) -> tuple[int, int]:
    rows = bench_targets(dict(results))
    return sum(1 for r in rows if r["met"]), len(rows)


def run_block(results: Mapping[str, Any]) -> str:
    run = results["run"]
    seeds = run["seeds"]
    loads = "/".join(f"{x:g}" for x in run.get("load_average_start", [])[:1] + run.get("load_average_end", [])[:1])
    met, total = _targets_met(results)
    return (
        f"{_which_run(run)}, {run['date']}: {seeds} seeds per scenario ({seeds * 3} where "
        f"failures strike slices), {_workers(run)}, {run['wall_s'] / 60:.0f} min wall, the machine "
        f"{run['machine']} ({run['note']}; load average {loads} at start / end). {met} of {total} targets met. The "
        f"commit it ran is in [docs/results/bench.json](results/bench.json)."
    )


def _which_run(run: Mapping[str, Any]) -> str:
    """`make bench`, or the bench at a shortened horizon: a reduced run says so wherever its figures appear."""
    scale = float(run["scale"])
    if scale == 1:
        return "One `make bench`"
    return f"One bench run with every horizon at {scale:g} of `make bench`'s (`bench --scale {scale:g}`)"


def _workers(run: Mapping[str, Any]) -> str:
    n = int(run["workers"])
    return f"{n} worker process" + ("" if n == 1 else "es")


def _lasting(stats: Mapping[str, Any], q: str = "p50") -> str:
    return f"{fmt(float(stats['mttr_lasting_s'][q]))} s"


def _verdict_counts(block: Mapping[str, Any], field: str) -> str:
    found = tables.verdicts(block, (field,))
    counts = {label: sum(1 for v in found.values() if v == key) for key, label in VERDICT_LABELS}
    return ", ".join(f"{n} {label}" for label, n in counts.items() if n) or "-"


VERDICT_LABELS = (("ahead", "ahead"), ("tie", "tied"), ("**behind**", "**behind**"), ("?", "undecided"))


def summary_block(results: Mapping[str, Any]) -> str:
    """README's table: per scenario, the reconciler's lasting-repair MTTR beside the fastest peer's, and how many
    peers it is ahead of, tied with and behind on weighted badput and on victims' loss (paired by seed)."""
    rows = []
    for name, block in results["scenarios"].items():
        policies = block["policies"]
        peers = [p for p in tables.PEERS if p in policies]
        fastest = min(peers, key=lambda p: (float(policies[p]["mttr_lasting_s"]["p50"]), peers.index(p)))
        rows.append(
            [
                name,
                _lasting(policies["reconciler"]),
                f"{_lasting(policies[fastest])} ({fastest})",
                _verdict_counts(block, "weighted_badput_chip_h"),
                _verdict_counts(block, "victim_lost_chip_h"),
            ]
        )
    head = (
        "scenario",
        "reconciler lasting MTTR p50",
        "fastest peer",
        f"weighted badput vs the {len(tables.PEERS)} peers",
        "victims' loss vs the peers",
    )
    run = results["run"]
    source = (
        f"{_which_run(run)}, {run['date']}, {_workers(run)}, the machine {run['machine']} "
        "([docs/results/bench.json](docs/results/bench.json)); no JobSet publishes a checkpoint."
    )
    return _table(head, rows) + "\n\n" + source


def _mttr_line(results: Mapping[str, Any], name: str) -> str:
    policies = results["scenarios"][name]["policies"]
    peers = ", ".join(f"`{p}` {_lasting(policies[p])}" for p in tables.PEERS if p in policies)
    return f"{name}: reconciler {_lasting(policies['reconciler'])}; {peers}"


def _signal_line(results: Mapping[str, Any]) -> str:
    full = [b for b in results.get("signal", {}).values() if b["checkpoint_share"] == 1]
    return "; ".join(
        f"{b['scenario']} {_lasting(b['policies']['reconciler'])} (without: "
        f"{_lasting(b['policies']['no-signal reconciler'])})"
        for b in full
    )


def _behind_cells(results: Mapping[str, Any]) -> list[str]:
    cells = []
    for name, block in results["scenarios"].items():
        for peer in tables.PEERS:
            if peer not in block["policies"]:
                continue
            for field, label in tables.PAIRED_FIELDS:
                mean, se, n = tables.paired_difference(block, peer, field)
                half = tables.half_width(se, n)
                if tables.verdict(mean, half, tables.practical_margin(block, peer, field)) == "**behind**":
                    cells.append(f"{name} {label} against `{peer}` ({tables.paired_cell(block, peer, field)})")
    return cells


def gaps_block(results: Mapping[str, Any]) -> str:
    """Where the reconciler is behind, in figures of the results file (the prose around the block says why)."""
    scenarios = results["scenarios"]
    lines = []
    if "steady_1x" in scenarios:
        floor = restart_floor_s(scenarios["steady_1x"]["params"]["timing"])
        lines.append(
            f"- **Lasting-repair MTTR p50 without a checkpoint signal** ({_mttr_line(results, 'steady_1x')}; the "
            f"restart floor is {fmt(floor)} s). With every JobSet publishing: {_signal_line(results) or 'not run'}."
        )
    if "ladder" in scenarios:
        policies = scenarios["ladder"]["policies"]
        peers = ", ".join(
            f"`{p}` {_lasting(policies[p])} / {_lasting(policies[p], 'p95')}" for p in tables.PEERS if p in policies
        )
        lines.append(
            f"- **The ladder's wait for queued capacity**: lasting MTTR p50 / p95 reconciler "
            f"{_lasting(policies['reconciler'])} / {_lasting(policies['reconciler'], 'p95')}; {peers}."
        )
    scaling = {row["slices"]: row for row in results.get("planner_scaling", [])}
    if 4096 in scaling:
        row = scaling[4096]
        verdict = "met" if row["p99_ms"] <= 100 else "**not met**"
        lines.append(
            f"- **The 4,096-slice pass**: p50 {row['p50_ms']:.1f} ms, p99 {row['p99_ms']:.1f} ms (CPU "
            f"{row.get('cpu_p99_ms', math.nan):.1f} ms) against the 100 ms p99 target: {verdict}."
        )
    mine = [b["policies"]["reconciler"] for b in scenarios.values()]
    lost, partial = sum(int(p["lost_victims"]) for p in mine), sum(int(p["partial_preemptions"]) for p in mine)
    lines.append(
        f"- **What is never lost**: over every scenario and seed the reconciler lost {lost} victims and preempted "
        f"{partial} slices in part."
    )
    behind = _behind_cells(results)
    lines.append(
        "- **Paired cells behind a peer** (weighted badput, high badput, victims' loss): "
        + ("; ".join(behind) if behind else "none")
        + "."
    )
    met, total = _targets_met(results)
    lines.append(f"- **Targets**: {met} of {total} met; each row not met is in the tables below.")
    return "\n".join(lines)


E2E_TABLE_HEADER = (
    "| mode | fault | recovery s | before the repair | victims evicted / requeued / back | partial evictions "
    "| lost workloads | restarted onto the failed slice |\n"
    "|---|---|---:|---|---|---:|---:|---|"
)


def hotswap_runs_table(runs: list[Mapping[str, Any]]) -> str:
    """The report's hotswap runs as the side-by-side table of docs/benchmarks.md."""
    rows = [E2E_TABLE_HEADER]
    for run in runs:
        recovery = "-" if run["recoverySeconds"] is None else f"{run['recoverySeconds']:.1f}"
        rows.append(
            f"| {run['mode']} | {run['fault']} | {recovery} | {'yes' if run['recoveredBeforeRepair'] else 'no'} "
            f"| {run['victimsEvicted']} / {run['victimsRequeued']} / {run['victimsBack']} "
            f"| {run['partialEvictions']} | {run['lostWorkloads']} "
            f"| {'yes' if run['restartedOntoFailedSlice'] else 'no'} |"
        )
    return "\n".join(rows)


def e2e_block(e2e: Mapping[str, Any]) -> str:
    return hotswap_runs_table(list(e2e["hotswap"]["runs"]))


def e2e_run_block(e2e: Mapping[str, Any]) -> str:
    run, hotswap = e2e["run"], e2e["hotswap"]
    overrides = ", ".join(f"`{k}={v}`" for k, v in sorted(hotswap.get("reconcilerOverrides", {}).items()))
    return (
        f"One `make e2e` run per row, {run['date']} ({run['note']}). The repair comes "
        f"{fmt(float(hotswap['repairAfterSeconds']))} s after the fault; the reconciler runs with the stack's "
        f"configuration but {overrides or 'no override'}."
    )


RUN_TABLES: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "scenarios": tables.scenarios_markdown,
    "paired": tables.paired_markdown,
    "standing": tables.standing_markdown,
    "signal": tables.signal_markdown,
    "fleet": lambda r: tables.fleet_markdown(r["fleet"]) if "fleet" in r else "",
    "scaling": lambda r: tables.scaling_markdown(r["planner_scaling"]),
}
"""Blocks rendered by the bench's own report code; `extract` checks that the small file renders each the same."""
BENCH_BLOCKS: dict[str, Callable[[Mapping[str, Any]], str]] = {
    **RUN_TABLES,
    "run": run_block,
    "summary": summary_block,
    "gaps": gaps_block,
    "targets": targets_block,
    "targets-by-scenario": targets_by_scenario_block,
}
E2E_BLOCKS: dict[str, Callable[[Mapping[str, Any]], str]] = {"e2e": e2e_block, "e2e-run": e2e_run_block}

BLOCK = re.compile(r"(<!-- bench:(?P<name>[a-z0-9-]+):begin -->\n)(?P<body>.*?)(<!-- bench:(?P=name):end -->)", re.S)
MARKER = re.compile(r"<!-- bench:([a-z0-9-]+):(begin|end) -->")


def render_blocks(bench: Mapping[str, Any] | None, e2e: Mapping[str, Any] | None) -> dict[str, str]:
    blocks: dict[str, str] = {}
    if bench is not None:
        blocks |= {name: make(bench) for name, make in BENCH_BLOCKS.items()}
    if e2e is not None:
        blocks |= {name: make(e2e) for name, make in E2E_BLOCKS.items()}
    return blocks


def _check_markers(text: str, where: str) -> None:
    """Every begin has its end, in order, and no block nests in another."""
    open_name: str | None = None
    for match in MARKER.finditer(text):
        name, kind = match.groups()
        if kind == "begin" and open_name is None:
            open_name = name
        elif kind == "end" and open_name == name:
            open_name = None
        else:
            raise ResultsError(f"{where}: marker bench:{name}:{kind} out of place (each block is begin ... end)")
    if open_name is not None:
        raise ResultsError(f"{where}: bench:{open_name}:begin has no bench:{open_name}:end")


def fill(text: str, blocks: Mapping[str, str], where: str) -> str:
    """`text` with every marked block's body replaced by its rendering; an unknown block name is an error."""
    _check_markers(text, where)

    def body(match: re.Match[str]) -> str:
        name = match.group("name")
        if name not in blocks:
            raise ResultsError(f"{where}: unknown block bench:{name} (known: {', '.join(sorted(blocks))})")
        return f"{match.group(1)}{blocks[name].rstrip()}\n{match.group(4)}"

    return BLOCK.sub(body, text)


def documents(root: Path = ROOT) -> list[Path]:
    """README.md and docs/*.md (design records included): every file a generated block may live in."""
    found = [root / "README.md", *sorted((root / "docs").rglob("*.md"))]
    return [p for p in found if p.is_file()]


def _load(path: Path) -> JsonObj | None:
    if not path.is_file():
        return None
    loaded: JsonObj = json.loads(path.read_text(encoding="utf-8"))
    return loaded


def stale_blocks(root: Path = ROOT) -> list[str]:
    """`path: bench:NAME` for every marked block whose body is not what `render` would write."""
    blocks = render_blocks(_load(root / RESULTS), _load(root / E2E_RESULTS))
    stale = []
    for path in documents(root):
        where = str(path.relative_to(root))
        text = path.read_text(encoding="utf-8")
        fresh = fill(text, blocks, where)
        old = {m.group("name"): m.group("body") for m in BLOCK.finditer(text)}
        new = {m.group("name"): m.group("body") for m in BLOCK.finditer(fresh)}
        stale += [f"{where}: bench:{name}" for name in old if old[name] != new[name]]
    return stale


def render(root: Path = ROOT) -> list[Path]:
    """Rewrite every document whose blocks are stale; the paths written."""
    blocks = render_blocks(_load(root / RESULTS), _load(root / E2E_RESULTS))
    written = []
    for path in documents(root):
        text = path.read_text(encoding="utf-8")
        fresh = fill(text, blocks, str(path.relative_to(root)))
        if fresh != text:
            path.write_text(fresh, encoding="utf-8")
            written.append(path)
    return written


def dumps(value: Any, depth: int = 0, nested: int = 4) -> str:
    """JSON with one line per value `nested` levels down (a policy's figures, a seed's runs) and per element of a
    list of objects (a scaling row, an e2e run): small, and a rerun diffs line by line."""
    pad = " " * (depth + 1)
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        items = [f"{pad}{json.dumps(v, separators=(', ', ': '), allow_nan=True)}" for v in value]
        return "[\n" + ",\n".join(items) + "\n" + " " * depth + "]"
    if depth >= nested or not isinstance(value, dict) or not value:
        return json.dumps(value, separators=(", ", ": "), allow_nan=True)
    items = [f"{pad}{json.dumps(k)}: {dumps(v, depth + 1, nested)}" for k, v in value.items()]
    return "{\n" + ",\n".join(items) + "\n" + " " * depth + "}"


def _write_json(path: Path, data: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dumps(data) + "\n", encoding="utf-8")


def _date_of(path: Path) -> str:
    return datetime.datetime.fromtimestamp(path.stat().st_mtime, datetime.UTC).strftime("%Y-%m-%d")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench_docs", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    ex = sub.add_parser("extract", help="a full `make bench` JSON -> docs/results/bench.json")
    ex.add_argument("full", type=Path, help="the bench's hotswap.json")
    ex.add_argument("--machine", choices=MACHINES, required=True, help="whether the run had the machine to itself")
    ex.add_argument("--note", required=True, help="how it ran, e.g. 'nice 10, beside other builds'")
    ex.add_argument("--date", help="the run's date (default: the JSON file's modification date, UTC)")
    ex.add_argument("--out", type=Path, default=ROOT / RESULTS)
    ee = sub.add_parser("extract-e2e", help="`make e2e`'s report.json -> docs/results/e2e.json")
    ee.add_argument("report", type=Path, help="build/e2e/report.json")
    ee.add_argument("--note", required=True, help="how it ran, e.g. '12 passed in 22 min; 2 cores shared'")
    ee.add_argument("--out", type=Path, default=ROOT / E2E_RESULTS)
    rd = sub.add_parser("render", help="fill every marked block of README.md and docs/*.md")
    rd.add_argument("--check", action="store_true", help="write nothing; exit 1 naming each stale block")
    args = parser.parse_args(argv)
    try:
        if args.command == "extract":
            full = json.loads(args.full.read_text(encoding="utf-8"))
            _write_json(args.out, extract(full, args.machine, args.note, args.date or _date_of(args.full)))
            print(f"wrote {args.out}; now run `{RENDER_COMMAND}`")
        elif args.command == "extract-e2e":
            _write_json(args.out, extract_e2e(json.loads(args.report.read_text(encoding="utf-8")), args.note))
            print(f"wrote {args.out}; now run `{RENDER_COMMAND}`")
        elif args.check:
            stale = stale_blocks()
            for entry in stale:
                print(f"stale: {entry}", file=sys.stderr)
            if stale:
                print(f"regenerate with `{RENDER_COMMAND}`", file=sys.stderr)
                return 1
        else:
            for path in render():
                print(f"wrote {path.relative_to(ROOT)}")
    except KeyError as err:
        print(f"bench_docs: the input lacks the field {err}; extract the results file again", file=sys.stderr)
        return 2
    except (OSError, json.JSONDecodeError, ResultsError) as err:
        print(f"bench_docs: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
