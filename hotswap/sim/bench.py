"""`python -m hotswap.sim bench`: standard scenarios x three policies, planner scaling, table, JSON, PNG."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from tqdm import tqdm

from hotswap.sim.params import Scenario
from hotswap.sim.plot import plot_mttr
from hotswap.sim.runner import POLICIES, run_one
from hotswap.sim.scaling import measure
from hotswap.sim.scenarios import DEFAULT_SEED, standard_scenarios
from hotswap.sim.simulator import RunResult

SCALING_SIZES = (32, 256, 1024)


def _ratio(a: float, b: float) -> float:
    if math.isnan(a) or math.isnan(b) or b == 0:
        return math.nan
    return round(a / b, 3)


def run_scenarios(scenarios: list[Scenario], workers: int, progress: bool = True) -> dict[str, Any]:
    tasks = [(sc, policy) for sc in scenarios for policy in POLICIES]
    results: dict[tuple[str, str], RunResult] = {}
    bar = tqdm(total=len(tasks), desc="scenarios x policies", disable=not progress)
    if workers <= 1:
        for sc, policy in tasks:
            results[(sc.name, policy)] = run_one(sc, policy)
            bar.update()
    else:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            futures = {pool.submit(run_one, sc, policy): (sc.name, policy) for sc, policy in tasks}
            for fut in as_completed(futures):
                results[futures[fut]] = fut.result()
                bar.update()
    bar.close()
    out: dict[str, Any] = {}
    for sc in scenarios:
        policies = {policy: results[(sc.name, policy)].summary for policy in POLICIES}
        r, n, s = (policies[p]["mttr_s"] for p in ("reconciler", "none", "scheduler"))
        out[sc.name] = {
            "params": sc.model_dump(mode="json"),
            "seed": sc.seed,
            "policies": policies,
            "ratios": {f"reconciler/none_{q}": _ratio(r[q], n[q]) for q in ("p50", "p95", "p99")}
            | {f"reconciler/scheduler_{q}": _ratio(r[q], s[q]) for q in ("p50", "p95", "p99")},
            "events": {policy: results[(sc.name, policy)].events for policy in POLICIES},
        }
    return out


def run_scaling(passes: int, sizes: tuple[int, ...] = SCALING_SIZES, progress: bool = True) -> list[dict[str, Any]]:
    return [measure(n, passes) for n in tqdm(sizes, desc="planner scaling", disable=not progress)]


def _fmt(x: Any) -> str:
    if isinstance(x, float):
        return "n/a" if math.isnan(x) else f"{x:.3g}" if abs(x) < 1000 else f"{x:.0f}"
    return str(x)


def table(report: dict[str, Any]) -> str:
    cols: list[tuple[str, Callable[[dict[str, Any]], Any]]] = [
        ("incidents", lambda p: p["incidents"]),
        ("MTTR p50 s", lambda p: p["mttr_s"]["p50"]),
        ("p95 s", lambda p: p["mttr_s"]["p95"]),
        ("p99 s", lambda p: p["mttr_s"]["p99"]),
        ("goodput", lambda p: p["high_goodput"]),
        ("victims/inc", lambda p: p["victims_per_incident"]),
        ("partial", lambda p: p["partial_preemptions"]),
        ("perm.fail", lambda p: p["permanent_victim_failures"]),
        ("lost", lambda p: p["lost_victims"]),
        ("idle freed h", lambda p: p["freed_idle_slice_h"]),
        ("victim down p50 s", lambda p: p["victim_downtime_s"]["p50"]),
        ("util", lambda p: p["utilisation"]),
    ]
    lines = []
    for name, block in report["scenarios"].items():
        lines.append(f"\n== {name} (seed {block['seed']}, {block['params']['horizon_h']:.0f} h)")
        header = f"{'policy':<11}" + "".join(f"{c:>13}" for c, _ in cols)
        lines.append(header)
        for policy, stats in block["policies"].items():
            lines.append(f"{policy:<11}" + "".join(f"{_fmt(get(stats)):>13}" for _, get in cols))
        ratios = block["ratios"]
        lines.append(
            "ratios MTTR  reconciler/none p50/p95/p99 "
            + " ".join(_fmt(ratios[f"reconciler/none_{q}"]) for q in ("p50", "p95", "p99"))
            + "   reconciler/scheduler p50/p95/p99 "
            + " ".join(_fmt(ratios[f"reconciler/scheduler_{q}"]) for q in ("p50", "p95", "p99"))
        )
    lines.append("\n== planner scaling (one plan() pass on a simulated snapshot)")
    lines.append(f"{'slices':>8}{'jobsets':>9}{'pods':>8}{'p50 ms':>10}{'p99 ms':>10}{'peak MB':>10}")
    for row in report["planner_scaling"]:
        lines.append(
            f"{row['slices']:>8}{row['jobsets']:>9}{row['pods']:>8}{row['p50_ms']:>10.2f}"
            f"{row['p99_ms']:>10.2f}{row['peak_mb']:>10.2f}"
        )
    return "\n".join(lines)


def bench(
    out: Path,
    seed: int = DEFAULT_SEED,
    scale: float = 1.0,
    workers: int | None = None,
    passes: int = 30,
    progress: bool = True,
) -> dict[str, Any]:
    workers = workers if workers is not None else min(2, os.cpu_count() or 1)
    report: dict[str, Any] = {
        "version": 1,
        "scenarios": run_scenarios(standard_scenarios(seed, scale), workers, progress),
        "planner_scaling": run_scaling(passes, progress=progress),
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "hotswap.json").write_text(json.dumps(report, indent=2, allow_nan=True) + "\n", encoding="utf-8")
    plot_mttr(report, out / "mttr.png")
    return report
