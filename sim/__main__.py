"""CLI: `python -m sim [run] ...` for a custom fleet,
`python -m sim bench --out DIR`,
`python -m sim sweep --scenario NAME --param FIELD=v1,v2 ...` for parameter sensitivity."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from pydantic import ValidationError

from sim.bench import (
    SCALING_SIZES,
    bench,
    rescore,
    run_scenarios,
    seeds_for,
    table,
)
from sim.fleet_bench import fleet_bench, fleet_table
from sim.metrics import add_exchange_rates
from sim.params import Failures, Fleet, JobClass, Scenario
from sim.report import markdown, scenarios_markdown
from sim.runner import POLICIES, run_one
from sim.scenarios import DEFAULT_SEED, DEFAULT_SEEDS, standard_scenarios
from sim.sweep import SweepError, parse_param, render, sweep


def _job_class(text: str) -> JobClass:
    """NAME:PRIORITY:SLICES:POPULATION:MEAN_HOURS, e.g. high:2000000:2:4:72."""
    parts = text.split(":")
    if len(parts) != 5:
        raise argparse.ArgumentTypeError(f"--class {text!r}: expected NAME:PRIORITY:SLICES:POPULATION:MEAN_HOURS")
    name, prio, slices, pop, hours = parts
    try:
        return JobClass(
            name=name, priority=int(prio), slices=int(slices), population=int(pop), mean_duration_h=float(hours)
        )
    except (ValueError, ValidationError) as exc:
        raise argparse.ArgumentTypeError(f"--class {text!r}: {exc}") from exc


def _sizes(text: str) -> tuple[int, ...]:
    """Comma-separated fleet sizes in slices, e.g. 32,256 (a quick look skips the 16,384-slice snapshot)."""
    try:
        sizes = tuple(int(part) for part in text.split(","))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--sizes {text!r}: expected comma-separated integers") from exc
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"--sizes {text!r}: sizes must be >= 1")
    return sizes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sim", description=__doc__)
    sub = parser.add_subparsers(dest="command")
    run = sub.add_parser("run", help="simulate a custom fleet under one or all policies (default command)")
    run.add_argument("--slices", type=int, default=32, help="TPU slices (node pools), default 32")
    run.add_argument("--hosts-per-slice", type=int, default=4, help="hosts per slice (v6e 4x4 = 4)")
    run.add_argument("--mtbf-h", type=float, default=3200.0, help="mean hours between failures per slice")
    run.add_argument("--rate", type=float, default=1.0, help="failure-rate multiplier")
    run.add_argument("--unreachable-fraction", type=float, default=0.0, help="share of unreachable-kubelet faults")
    run.add_argument("--horizon-h", type=float, default=2000.0, help="simulated hours")
    run.add_argument("--seed", type=int, default=DEFAULT_SEED)
    run.add_argument("--policy", choices=[*POLICIES, "all"], default="all")
    run.add_argument(
        "--class",
        dest="classes",
        action="append",
        type=_job_class,
        help="job class NAME:PRIORITY:SLICES:POPULATION:MEAN_HOURS (repeatable; default: S1 mix)",
    )
    run.add_argument("--json", action="store_true", help="print the JSON summaries instead of a table")
    b = sub.add_parser("bench", help="standard scenarios + reconciler scaling -> hotswap.json, mttr.png")
    b.add_argument("--out", type=Path, default=Path("build/bench"))
    b.add_argument("--seed", type=int, default=DEFAULT_SEED)
    b.add_argument("--scale", type=float, default=1.0, help="multiply every scenario horizon")
    b.add_argument("--workers", type=int, default=None, help="worker processes (default min(2, cpus))")
    b.add_argument("--passes", type=int, default=200, help="reconciler passes per scaling point (p99 needs ~100+)")
    b.add_argument(
        "--seeds",
        type=int,
        default=DEFAULT_SEEDS,
        help=f"seeds per scenario, from --seed on (default {DEFAULT_SEEDS}; three times as many for the scenarios "
        "whose failures strike slices, SEED_MULTIPLIER)",
    )
    b.add_argument(
        "--sizes",
        type=_sizes,
        default=SCALING_SIZES,
        help="reconciler scaling fleet sizes in slices, comma-separated (default: "
        + ",".join(map(str, SCALING_SIZES))
        + "; the largest builds a 65,536-JobSet snapshot)",
    )
    sw = sub.add_parser("sweep", help="one standard scenario over a grid of parameter values -> table, sweep.json")
    sw.add_argument(
        "--scenario", required=True, choices=[sc.name for sc in standard_scenarios()], help="standard scenario"
    )
    sw.add_argument(
        "--param",
        dest="params",
        action="append",
        required=True,
        metavar="FIELD=v1,v2,...",
        help="dotted scenario field and its values, e.g. timing.pod_termination_grace_s=30,60,120 (repeatable: "
        "the grid is the Cartesian product)",
    )
    sw.add_argument("--seed", type=int, default=DEFAULT_SEED)
    sw.add_argument(
        "--seeds", type=int, default=DEFAULT_SEEDS, help=f"seeds per point, from --seed on (default {DEFAULT_SEEDS})"
    )
    sw.add_argument("--scale", type=float, default=1.0, help="multiply the scenario horizon")
    sw.add_argument("--workers", type=int, default=None, help="worker processes (default: number of CPUs)")
    sw.add_argument("--out", type=Path, default=Path("build/bench/sweep.json"))
    sw.add_argument("--markdown", action="store_true", help="print the table as markdown")
    fl = sub.add_parser("fleet", help="the region_degraded MultiKueue fleet scenario, both modes -> table, fleet.json")
    fl.add_argument("--out", type=Path, default=Path("build/bench/fleet.json"))
    fl.add_argument("--seed", type=int, default=DEFAULT_SEED)
    fl.add_argument("--seeds", type=int, default=1, help="seeds, from --seed on (default 1)")
    fl.add_argument("--scale", type=float, default=1.0, help="multiply the scenario horizon")
    fl.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    wi = sub.add_parser(
        "whatif", help="what a mechanism would be worth: the reconciler with a perfect signal, against it and hindsight"
    )
    wi.add_argument("--signal", choices=["repair"], default="repair", help="repair: the repair time, at each fault")
    wi.add_argument(
        "--scenarios", default="steady_1x,steady_3x,storm_4_in_60s,long_repairs", help="standard scenarios, by name"
    )
    wi.add_argument("--seed", type=int, default=DEFAULT_SEED)
    wi.add_argument("--seeds", type=int, default=2, help="seeds, from --seed on (default 2)")
    wi.add_argument("--scale", type=float, default=0.25, help="multiply the horizons (default 0.25)")
    wi.add_argument("--workers", type=int, default=None, help="worker processes (default min(2, cpus))")
    wi.add_argument("--out", type=Path, default=Path("build/bench/whatif.json"))
    rs = sub.add_parser(
        "rescore",
        help="recompute a bench's per-tier and weighted badput from its recorded per-seed figures (no simulation), "
        "in place",
    )
    rs.add_argument("json", type=Path, nargs="?", default=Path("build/bench/hotswap.json"))
    rp = sub.add_parser("report", help="a bench's hotswap.json as the Markdown tables docs/benchmarks.md quotes")
    rp.add_argument("json", type=Path, nargs="?", default=Path("build/bench/hotswap.json"))
    args = parser.parse_args(argv if argv is not None else sys.argv[1:] or ["run", "--help"])

    if args.command == "whatif":
        return _whatif(parser, args)

    if args.command == "rescore":
        try:
            data = rescore(json.loads(args.json.read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError) as exc:
            parser.error(f"cannot rescore a bench report from {args.json}: {exc!r}")
        args.json.write_text(json.dumps(data, indent=2, allow_nan=True) + "\n", encoding="utf-8")
        print(f"rescored {args.json}")
        return 0

    if args.command == "report":
        try:
            print(markdown(json.loads(args.json.read_text(encoding="utf-8"))), end="")
        except (OSError, ValueError, KeyError) as exc:
            parser.error(f"cannot read a bench report from {args.json}: {exc!r}")
        return 0

    if args.command == "fleet":
        return _fleet(parser, args)

    if args.command == "sweep":
        return _sweep(parser, args)

    if args.command == "bench":
        if args.seeds < 1:
            parser.error(f"--seeds must be >= 1, got {args.seeds}")
        report = bench(
            args.out,
            seed=args.seed,
            scale=args.scale,
            workers=args.workers,
            passes=args.passes,
            seeds=args.seeds,
            sizes=args.sizes,
        )
        print(table(report))
        print()
        print(fleet_table(report["fleet"]))
        print(f"\nwrote {args.out / 'hotswap.json'} and {args.out / 'mttr.png'}")
        return 0
    try:
        scenario = Scenario(
            name="custom",
            seed=args.seed,
            horizon_h=args.horizon_h,
            fleet=Fleet(slices=args.slices, hosts_per_slice=args.hosts_per_slice),
            failures=Failures(
                slice_mtbf_h=args.mtbf_h, rate_multiplier=args.rate, unreachable_fraction=args.unreachable_fraction
            ),
            **({"classes": tuple(args.classes)} if args.classes else {}),
        )
    except ValidationError as exc:
        parser.error(str(exc))
    policies = list(POLICIES) if args.policy == "all" else [args.policy]
    summaries = {p: run_one(scenario, p).summary for p in policies}
    if "none" in summaries:
        add_exchange_rates(summaries)
    if args.json:
        for s in summaries.values():
            s.pop("mttr_samples_s", None)
        print(json.dumps(summaries, indent=2))
    else:
        report = {
            "scenarios": {
                "custom": {
                    "seed": args.seed,
                    "params": {"horizon_h": args.horizon_h},
                    "policies": summaries,
                    "ratios": _ratios(summaries),
                }
            },
            "planner_scaling": [],
        }
        print(table(report))
    return 0


def _sweep(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    if args.seeds < 1:
        parser.error(f"--seeds must be >= 1, got {args.seeds}")
    if args.scale <= 0:
        parser.error(f"--scale must be > 0, got {args.scale}")
    workers = args.workers if args.workers is not None else os.cpu_count() or 1
    if workers < 1:
        parser.error(f"--workers must be >= 1, got {workers}")
    (base,) = (sc for sc in standard_scenarios(args.seed, args.scale) if sc.name == args.scenario)
    try:
        axes = [parse_param(text) for text in args.params]
        report = sweep(base, axes, seeds_for(args.seed, args.seeds), workers)
    except SweepError as exc:
        parser.error(str(exc))
    print(render(report, markdown=args.markdown))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, allow_nan=True) + "\n", encoding="utf-8")
    print(f"\nwrote {args.out}")
    return 0


def _fleet(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    if args.seeds < 1 or args.scale <= 0 or args.workers < 1:
        parser.error("--seeds and --workers must be >= 1 and --scale > 0")
    report = fleet_bench(seed=args.seed, scale=args.scale, seeds=args.seeds, workers=args.workers)
    print(fleet_table(report))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, allow_nan=True) + "\n", encoding="utf-8")
    print(f"\nwrote {args.out}")
    return 0


def _ratios(summaries: dict[str, dict[str, object]]) -> dict[str, float]:
    from sim.bench import ratio

    out: dict[str, float] = {}
    for base in ("none", "scheduler"):
        for q in ("p50", "p95", "p99"):
            r = summaries.get("reconciler", {}).get("mttr_s", {})
            o = summaries.get(base, {}).get("mttr_s", {})
            out[f"reconciler/{base}_{q}"] = ratio(
                float(r.get(q, float("nan"))) if isinstance(r, dict) else float("nan"),
                float(o.get(q, float("nan"))) if isinstance(o, dict) else float("nan"),
            )
    return out


def _whatif(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    known = {sc.name: sc for sc in standard_scenarios(args.seed, args.scale)} if args.scale > 0 else {}
    names = [n.strip() for n in args.scenarios.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if args.scale <= 0 or args.seeds < 1 or unknown or not names:
        parser.error(
            f"--scale must be > 0 and --seeds >= 1; --scenarios must name standard scenarios "
            f"(unknown: {', '.join(unknown) or 'none'}; known: {', '.join(known)})"
        )
    policies = ("none", "reconciler", "reconciler+repair-signal", "hindsight")
    workers = args.workers if args.workers is not None else min(2, os.cpu_count() or 1)
    report = run_scenarios([known[n] for n in names], workers, True, seeds_for(args.seed, args.seeds), policies)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, allow_nan=True, default=str) + "\n", encoding="utf-8")
    print(scenarios_markdown({"scenarios": report}))
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
