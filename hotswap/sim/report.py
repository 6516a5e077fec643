"""`python -m hotswap.sim report build/bench/hotswap.json`: the bench's figures as Markdown tables.

docs/benchmarks.md quotes these tables; generating them from the JSON keeps the document and the run it cites
in step (no figure typed by hand).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

ONLINE = ("scheduler", "reconciler", "kueue-tas", "hero")
"""Policies a real cluster could run that act on a failure. `none` (wait for repair) is left out: it loses no
victim's work by never acting, which would make it "best" on victims' loss for nothing; `hindsight` is the
clairvoyant reference the others are measured against."""


def _num(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:,.{digits}f}"


def _quantiles(block: Mapping[str, Any]) -> str:
    return "/".join(_num(block.get(q), 0) for q in ("p50", "p95", "p99"))


def _table(head: Iterable[str], rows: Iterable[Iterable[str]]) -> list[str]:
    head = list(head)
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def scenario_rows(name: str, block: Mapping[str, Any]) -> list[list[str]]:
    seeds = block.get("seeds") or [block.get("seed")]
    horizon = block["params"]["horizon_h"]
    rows = []
    for i, (policy, p) in enumerate(block["policies"].items()):
        lasting = p["mttr_lasting_s"]
        rows.append(
            [
                f"{name} ({len(seeds)} x {horizon:,.0f} h)" if i == 0 else "",
                policy,
                _num(p["incidents"]),
                f"{_quantiles(lasting)} ({_num(lasting.get('n'))})",
                _num(p["high_goodput"], 5),
                _num(p["fleet_goodput"], 5),
                _num(p.get("exchange_rate"), 2),
                f"{_num(p.get('high_badput_chip_h'), 0)} ({_num(p.get('high_badput_vs_hindsight'), 2)})",
                f"{_num(p.get('victim_lost_chip_h'), 0)} ({_num(p.get('victim_loss_vs_hindsight'), 2)})",
                _num(p["partial_preemptions"]),
                _num(p["lost_victims"]),
            ]
        )
    return rows


def best_online(block: Mapping[str, Any], field: str) -> tuple[str, float]:
    """The online policy with the least of `field` (ties: the earlier in ONLINE)."""
    policies = block["policies"]
    candidates = [(float(policies[p][field]), i, p) for i, p in enumerate(ONLINE) if p in policies]
    value, _, policy = min(candidates)
    return policy, value


def scenarios_markdown(report: Mapping[str, Any]) -> str:
    head = (
        "scenario",
        "policy",
        "high incidents",
        "lasting MTTR p50/p95/p99 s (n)",
        "high goodput",
        "fleet goodput",
        "exchange rate",
        "high badput chip-h (x hindsight)",
        "victims' lost chip-h (x hindsight)",
        "partial",
        "lost",
    )
    rows = [row for name, block in report["scenarios"].items() for row in scenario_rows(name, block)]
    return "\n".join(_table(head, rows))


def best_online_markdown(report: Mapping[str, Any]) -> str:
    """Per scenario, the best online policy on each distance to the bound, and where the reconciler stands."""
    rows = []
    for name, block in report["scenarios"].items():
        row = [name]
        for field in ("high_badput_chip_h", "victim_lost_chip_h"):
            policy, value = best_online(block, field)
            mine = float(block["policies"]["reconciler"][field])
            hindsight = float(block["policies"].get("hindsight", {}).get(field, math.nan))
            row += [f"{policy} {_num(value, 1)}", f"{_num(mine, 1)}", _num(hindsight, 1)]
        rows.append(row)
    head = (
        "scenario",
        "best online: high badput chip-h",
        "reconciler",
        "hindsight",
        "best online: victims' lost chip-h",
        "reconciler",
        "hindsight",
    )
    return "\n".join(_table(head, rows))


PEERS = tuple(p for p in ONLINE if p != "reconciler")
PAIRED_FIELDS = (("high_badput_chip_h", "high badput"), ("victim_lost_chip_h", "victims' loss"))


def paired_difference(block: Mapping[str, Any], peer: str, field: str) -> tuple[float, float, int]:
    """Reconciler minus `peer` on `field`, paired by seed (each seed is one event stream for every policy):
    the mean difference, its standard error over the seeds (nan with one seed) and the number of seeds."""
    per_seed = block.get("per_seed") or {}
    diffs = [
        float(runs["reconciler"][field]) - float(runs[peer][field])
        for runs in per_seed.values()
        if field in runs.get("reconciler", {}) and field in runs.get(peer, {})
    ]
    n = len(diffs)
    if n == 0:
        return math.nan, math.nan, 0
    mean = sum(diffs) / n
    if n == 1:
        return mean, math.nan, 1
    var = sum((d - mean) ** 2 for d in diffs) / (n - 1)
    return mean, math.sqrt(var / n), n


T_975 = {
    1: 12.706,
    2: 4.303,
    3: 3.182,
    4: 2.776,
    5: 2.571,
    6: 2.447,
    7: 2.365,
    8: 2.306,
    9: 2.262,
    10: 2.228,
    11: 2.201,
    12: 2.179,
    13: 2.160,
    14: 2.145,
    15: 2.131,
    20: 2.086,
    30: 2.042,
}
"""Student's t, two-sided 95 %, by degrees of freedom: with 4 seeds a 2-SE rule would call a lead that one
lucky seed makes (t = 3.18 at 3 degrees of freedom)."""
NEGLIGIBLE_CHIP_H = 0.05
"""Below this a mean difference is a tie whatever its spread (a constant sub-second gap has no spread at all)."""


def half_width(se: float, n: int) -> float:
    """Half-width of the 95 % confidence interval of a mean difference over `n` paired seeds."""
    if n < 2 or math.isnan(se):
        return math.nan
    df = n - 1
    # Between listed degrees of freedom the next lower one's t: slightly wider, never narrower.
    t = T_975[max(k for k in T_975 if k <= df)] if df <= 30 else 1.96
    return t * se


def verdict(mean: float, half: float) -> str:
    """Whether the reconciler is ahead of a peer (less badput or loss) outside the 95 % interval."""
    if math.isnan(mean):
        return "?"
    if abs(mean) < NEGLIGIBLE_CHIP_H:
        return "tie"
    if math.isnan(half):
        return "?"
    if mean + half < 0:
        return "ahead"
    if mean - half > 0:
        return "**behind**"
    return "tie"


def paired_markdown(report: Mapping[str, Any]) -> str:
    """Reconciler against each acting peer, per scenario, seed by seed: where the pooled ranking is noise.

    Storms and spot preemptions strike slices, so which JobSets they hit depends on where each policy placed
    them; the seed-to-seed spread of the difference says whether a pooled lead is more than that lottery."""
    rows = []
    for name, block in report["scenarios"].items():
        row = [name, str(len(block.get("per_seed") or {}))]
        for peer in PEERS:
            if peer not in block["policies"]:
                row += [""] * len(PAIRED_FIELDS)
                continue
            for field, _ in PAIRED_FIELDS:
                mean, se, n = paired_difference(block, peer, field)
                half = half_width(se, n)
                row.append(f"{_num(mean, 1)} ± {_num(half, 1)} {verdict(mean, half)}")
        rows.append(row)
    head = ["scenario", "seeds"] + [f"vs {peer}: {label}" for peer in PEERS for _, label in PAIRED_FIELDS]
    return "\n".join(_table(head, rows))


def fleet_markdown(fleet: Mapping[str, Any]) -> str:
    head = (
        "mode",
        "policy",
        "lasting MTTR p50/p95/p99 s (n)",
        "high goodput",
        "fleet goodput",
        "exchange rate",
        "re-dispatches (by hold)",
        "moves",
    )
    rows = []
    for mode, block in fleet["modes"].items():
        for policy, p in block["policies"].items():
            lasting, dispatch = p["mttr_lasting_s"], p.get("dispatch", {})
            rows.append(
                [
                    mode,
                    policy,
                    f"{_quantiles(lasting)} ({_num(lasting.get('n'))})",
                    _num(p["high_goodput"], 5),
                    _num(p["fleet_goodput"], 5),
                    _num(p.get("exchange_rate"), 2),
                    f"{_num(dispatch.get('retries'))} ({_num(dispatch.get('retries_by_hold'))})",
                    _num(dispatch.get("moves")),
                ]
            )
    return "\n".join(_table(head, rows))


def scaling_markdown(rows: Iterable[Mapping[str, Any]]) -> str:
    """One row per fleet size: a whole pass (raw watch events in, plan out), `plan()` alone, the initial list, and
    the reconciler process's peak resident memory."""
    head = (
        "slices",
        "JobSets",
        "pods",
        "passes",
        "pass p50 ms",
        "pass p99 ms",
        "CPU p50 ms",
        "CPU p99 ms",
        "plan() p99 ms",
        "list s",
        "peak MiB",
    )
    body = [
        [
            _num(r["slices"]),
            _num(r["jobsets"]),
            _num(r["pods"]),
            _num(r["passes"]),
            _num(r["p50_ms"], 1),
            _num(r["p99_ms"], 1),
            _num(r.get("cpu_p50_ms"), 1),
            _num(r.get("cpu_p99_ms"), 1),
            _num(r.get("plan_p99_ms"), 1),
            _num(r.get("list_s"), 1),
            _num(r["peak_mb"], 1),
        ]
        for r in rows
    ]
    return "\n".join(_table(head, body))


def targets_markdown(targets: Iterable[Mapping[str, Any]]) -> str:
    rows = [[t["target"], t["figure"], "met" if t["met"] else "**not met**"] for t in targets]
    return "\n".join(_table(("target", "figure", "result"), rows))


def markdown(report: Mapping[str, Any]) -> str:
    parts = [
        "### Six policies side by side\n\n" + scenarios_markdown(report),
        "### Distance to the hindsight bound\n\n" + best_online_markdown(report),
        "### Reconciler against each peer, paired by seed\n\n"
        "Reconciler minus peer in chip-hours: the mean over the seeds ± the half-width of its 95 % confidence "
        "interval (Student's t); negative is the reconciler ahead. `ahead`/`behind`: the interval excludes 0; "
        "`tie`: it does not, or the difference is under 0.05 chip-h.\n\n" + paired_markdown(report),
    ]
    if "fleet" in report:
        parts.append(f"### Fleet: {report['fleet']['scenario']}\n\n" + fleet_markdown(report["fleet"]))
    parts.append("### Reconciler scaling\n\n" + scaling_markdown(report["planner_scaling"]))
    parts.append("### Targets\n\n" + targets_markdown(report["targets"]))
    return "\n\n".join(parts) + "\n"
