"""`python -m sim bench`: standard scenarios x seeds x every policy, reconciler scaling,
tables, JSON, PNG.

Every scenario runs under several seeds (identical event streams across policies within a seed). The
contract figures under `scenarios.<name>.policies.<policy>` are pooled over the seeds (percentiles over all
incidents, counts summed, rates averaged); `per_seed` keeps each seed's own figures so seed dependence shows.

The policies are `none`, `scheduler` (GKE's pattern), `reconciler` (the package's), `kueue-tas` (Kueue's native node hot
swap), `hero` (CoreWeave's drain controller) and `hindsight` (a clairvoyant reference, no real system). Against
hindsight, per scenario and policy (pooled over the seeds, and per seed):

- `high_badput_chip_h`: the high-priority tier's demand minus its useful chip-time, in chip-hours. Demand is
  `high_demand_chip_s` (every high-priority JobSet wants all its slices for the whole horizon); useful is
  `high_useful_chip_s` from metrics.py (progress kept up to a checkpoint, completed work, work in flight at the
  horizon). It counts lost progress, restarts, waits for a slice and for admission alike; the start-up of each new
  JobSet is in it for every policy.
- `victim_lost_chip_h`: the `victim_wasted_progress` badput from metrics.py in chip-hours: progress since the last
  checkpoint thrown away by JobSets evicted or preempted for someone else, whoever evicted them (the policy's holds
  and pod preemptions, and Kueue's own admission-time preemption, which is how `kueue-tas` and `hero` make room).
  `policy_victim_lost_chip_s` (the exchange rate's denominator) counts only the policy's own victims.
- `high_badput_vs_hindsight`, `victim_loss_vs_hindsight`: those figures over hindsight's (1.0 = at the bound,
  higher = worse; 1.0 when both are 0, inf when only hindsight's is 0).

Also per scenario and policy: `badput_by_tier_chip_h` (each tier's servable demand minus its useful
chip-time, `tier_demand_chip_s`) and `weighted_badput_chip_h` (weighted by `tier_weights`, also under the
scenario), and `actions` (what each mechanism did: Kueue's admission and topology preemptions, NodeFailures
evictions, kube-scheduler pod preemptions, holds, hero drains). At the top level: `signal` (the reconciler with a
share of JobSets publishing checkpoints, `run_signal`, paired with the headline's peers; the headline publishes
nothing) and `run` (scale, seeds, commit, wall time, load average).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import as_completed
from pathlib import Path
from typing import Any, TypeVar

from tqdm import tqdm

from sim.fleet_bench import fleet_bench
from sim.metrics import add_exchange_rates, pool
from sim.params import Scenario
from sim.plot import plot_mttr
from sim.runner import POLICIES, run_one
from sim.scaling import measure
from sim.scenarios import (
    DEFAULT_SEED,
    DEFAULT_SEEDS,
    SEED_MULTIPLIER,
    signal_scenarios,
    standard_scenarios,
)
from sim.simulator import RunResult
from sim.workers import worker_pool

FLEET_SEEDS = 2
"""Seeds of the multi-region fleet scenario (`sim.fleet.region_degraded`) in `make bench`."""
SCALING_SIZES = (32, 256, 1024, 4096, 16384)
SCALING_PASSES_CAP = {16384: 50}
"""Fewer passes for the largest fleet (65,536 JobSets, about 0.5-0.8 s a pass on a shared 2-core machine): 200
would take minutes of the bench budget; with 50 the p99 interpolates between the two slowest passes."""
QUANTILES = ("p50", "p95", "p99")
K = TypeVar("K")


def ratio(a: float, b: float) -> float:
    if math.isnan(a) or math.isnan(b) or b == 0:
        return math.nan
    return round(a / b, 3)


def high_demand_chip_s(scenario: Scenario) -> float:
    """Chip-seconds the high-priority tier asks for over the horizon: every high-priority JobSet wants all its
    slices all the time (a finished one is replaced at once by a new one of its class)."""
    fleet = scenario.fleet
    slices = sum(c.population * c.slices for c in scenario.classes if c.priority >= scenario.high_threshold)
    return slices * fleet.hosts_per_slice * fleet.chips_per_host * scenario.horizon_h * 3600.0


def tier_demand_chip_s(scenario: Scenario) -> dict[str, float]:
    """Chip-seconds each tier (job class) could use over the horizon: all its JobSets on all their slices all the
    time, up to the slices the fleet has left after the tiers above it. The lowest tier usually asks for more than
    is left; counting that excess as badput would add the same large constant to every policy's figure and drown
    the differences (and the practical margin, a per cent of the figure) in it."""
    fleet = scenario.fleet
    chips = fleet.hosts_per_slice * fleet.chips_per_host
    left = fleet.slices
    out: dict[str, float] = {}
    for c in sorted(scenario.classes, key=lambda c: -c.priority):
        servable = min(c.population * c.slices, left)
        left -= servable
        out[c.name] = servable * chips * scenario.horizon_h * 3600.0
    return {c.name: out[c.name] for c in scenario.classes}


def tier_weights(scenario: Scenario) -> dict[str, float]:
    """Weight of each tier in the priority-weighted badput: its priority over the top tier's (2,000,000 /
    1,500,000 / 1,000,000 give 1 / 0.75 / 0.5). A chip-hour moved from a low to a high JobSet then counts as a
    gain of half a chip-hour, and a policy that never acts for the middle tier pays for it."""
    top = max(c.priority for c in scenario.classes)
    return {c.name: round(c.priority / top, 4) if top > 0 else 1.0 for c in scenario.classes}


def add_tier_badput(policies: dict[str, Any], scenario: Scenario, seeds: int = 1) -> None:
    """`badput_by_tier_chip_h` (each tier's demand over `seeds` seeds minus its useful chip-time) and
    `weighted_badput_chip_h` (their sum weighted by `tier_weights`) per policy."""
    demand = tier_demand_chip_s(scenario)
    weights = tier_weights(scenario)
    for stats in policies.values():
        useful = stats.get("useful_chip_s_by_tier", {})
        by_tier = {
            tier: round(max(need * seeds - float(useful.get(tier, 0.0)), 0.0) / 3600.0, 3)
            for tier, need in demand.items()
        }
        stats["badput_by_tier_chip_h"] = by_tier
        stats["weighted_badput_chip_h"] = round(sum(weights[t] * v for t, v in by_tier.items()), 3)


RECONCILER_COST = 20.0
"""CPU time per simulated hour of the reconciler over any other policy: it runs the planner on every pass. Measured
11-43x across the standard scenarios at 0.1 scale (docs/benchmarks.md), median about 20."""


def run_cost(scenario: Scenario, policy: str) -> float:
    """Relative run time of one (scenario, policy) run, to schedule the longest first: linear in the horizon."""
    return scenario.horizon_h * (RECONCILER_COST if policy.startswith("reconciler") else 1.0)


def seeds_for(seed: int, count: int) -> list[int]:
    return [seed + i for i in range(count)]


def run_many(
    runs: Sequence[tuple[K, Scenario, str]], workers: int, progress: bool = True, desc: str = "runs"
) -> dict[K, RunResult]:
    """Run (key, scenario, policy) triples, in worker processes when workers > 1, with a progress bar on stderr.
    Results are keyed, so they do not depend on the number of workers or the completion order."""
    results: dict[K, RunResult] = {}
    bar = tqdm(total=len(runs), desc=desc, disable=not progress)
    if workers <= 1:
        for key, sc, policy in runs:
            results[key] = run_one(sc, policy)
            bar.update()
    else:
        with worker_pool(workers) as executor:
            # Longest first so the workers finish together (longest-processing-time packing).
            ordered = sorted(runs, key=lambda r: -run_cost(r[1], r[2]))
            futures = {executor.submit(run_one, sc, policy): key for key, sc, policy in ordered}
            for fut in as_completed(futures):
                results[futures[fut]] = fut.result()
                bar.update()
    bar.close()
    return results


def run_scenarios(
    scenarios: list[Scenario],
    workers: int,
    progress: bool = True,
    seeds: list[int] | None = None,
    policies: Sequence[str] = tuple(POLICIES),
    seed_multiplier: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """Each scenario under each seed (default: its own seed only; `seed_multiplier` times as many, continuing
    from the first, for the scenarios it names) and each policy (`none` and `hindsight` among them: the exchange
    rate and the ratios are taken against them)."""
    multiplier = seed_multiplier or {}

    def seeds_of(sc: Scenario) -> list[int]:
        used = seeds or [sc.seed]
        times = multiplier.get(sc.name, 1)
        return seeds_for(used[0], len(used) * times) if times > 1 else used

    runs = [
        ((sc.name, s, policy), sc.model_copy(update={"seed": s}), policy)
        for sc in scenarios
        for s in seeds_of(sc)
        for policy in policies
    ]
    results = run_many(runs, workers, progress, desc="scenarios x seeds x policies")
    out: dict[str, Any] = {}
    for sc in scenarios:
        used = seeds_of(sc)
        per_seed = {str(s): {policy: results[(sc.name, s, policy)].summary for policy in policies} for s in used}
        demand = high_demand_chip_s(sc)
        for seed_runs in per_seed.values():
            add_exchange_rates(seed_runs)
            add_hindsight_ratios(seed_runs, demand)
            add_tier_badput(seed_runs, sc)
        pooled = {policy: pool([per_seed[str(s)][policy] for s in used]) for policy in policies}
        add_exchange_rates(pooled)
        add_hindsight_ratios(pooled, demand * len(used))
        add_tier_badput(pooled, sc, len(used))
        out[sc.name] = {
            "params": sc.model_dump(mode="json"),
            "tier_weights": tier_weights(sc),
            "tier_demand_chip_h": {t: round(v / 3600.0, 1) for t, v in tier_demand_chip_s(sc).items()},
            "seed": used[0],
            "seeds": used,
            "policies": pooled,
            "ratios": mttr_ratios(pooled, "mttr_s") | mttr_ratios(pooled, "mttr_lasting_s", "_lasting"),
            "per_seed": per_seed,
            "events": {policy: sum(results[(sc.name, s, policy)].events for s in used) for policy in policies},
        }
    return out


def run_signal(
    variants: Sequence[tuple[Scenario, float, int]],
    headline: Mapping[str, Any],
    workers: int,
    progress: bool = True,
) -> dict[str, Any]:
    """The checkpoint signal's worth: the reconciler on each variant (a standard scenario with a share of JobSets
    publishing `last-checkpoint`) under the first seeds of the headline run, paired with the peers' runs of
    that run. The peers do not read the annotation (tests/sim/test_checkpoint_signal.py checks that their runs
    do not change with it), so rerunning them would give the same figures."""
    runs = [
        ((sc.name, share, s), sc.model_copy(update={"seed": s}), "reconciler")
        for sc, share, n in variants
        for s in headline[sc.name]["seeds"][:n]
    ]
    results = run_many(runs, workers, progress, desc="checkpoint-signal runs")
    out: dict[str, Any] = {}
    for sc, share, n in variants:
        block = headline[sc.name]
        used = block["seeds"][:n]
        demand = high_demand_chip_s(sc)
        per_seed: dict[str, dict[str, Any]] = {}
        for s in used:
            seed_runs = {policy: dict(stats) for policy, stats in block["per_seed"][str(s)].items()}
            seed_runs["no-signal reconciler"] = seed_runs["reconciler"]
            seed_runs["reconciler"] = results[(sc.name, share, s)].summary
            add_exchange_rates(seed_runs)
            add_hindsight_ratios(seed_runs, demand)
            add_tier_badput(seed_runs, sc)
            per_seed[str(s)] = seed_runs
        policies = list(per_seed[str(used[0])])
        pooled = {policy: pool([per_seed[str(s)][policy] for s in used]) for policy in policies}
        add_exchange_rates(pooled)
        add_hindsight_ratios(pooled, demand * len(used))
        add_tier_badput(pooled, sc, len(used))
        out[f"{sc.name}@{share:g}"] = {
            "scenario": sc.name,
            "checkpoint_share": share,
            "params": sc.model_dump(mode="json"),
            "tier_weights": tier_weights(sc),
            "seed": used[0],
            "seeds": used,
            "policies": pooled,
            "per_seed": per_seed,
        }
    return out


def rescore(report: dict[str, Any]) -> dict[str, Any]:
    """Recompute the per-tier and weighted badput of every scenario and signal block of a bench report from its
    recorded per-seed summaries and parameters (no simulation): the figures this code's definitions give."""
    for block in [*report.get("scenarios", {}).values(), *report.get("signal", {}).values()]:
        scenario = Scenario.model_validate(block["params"])
        for seed_runs in block["per_seed"].values():
            add_tier_badput(seed_runs, scenario)
        add_tier_badput(block["policies"], scenario, len(block["per_seed"]))
        block["tier_weights"] = tier_weights(scenario)
        block["tier_demand_chip_h"] = {t: round(v / 3600.0, 1) for t, v in tier_demand_chip_s(scenario).items()}
    return report


def vs_bound(value: float, bound: float) -> float:
    """`value` over the hindsight bound: 1.0 at the bound (also when both are 0), inf when only the bound is 0."""
    if bound <= 0:
        return 1.0 if value <= 0 else math.inf
    return round(value / bound, 3)


def add_hindsight_ratios(policies: dict[str, Any], demand_chip_s: float) -> None:
    """High-priority badput and victims' lost chip-hours per policy, and both over hindsight's (module doc)."""
    for stats in policies.values():
        stats["high_badput_chip_h"] = round(max(demand_chip_s - stats["high_useful_chip_s"], 0.0) / 3600.0, 3)
        stats["victim_lost_chip_h"] = round(stats["badput_s"]["victim_wasted_progress"] / 3600.0, 3)
    bound = policies.get("hindsight")
    if bound is None:
        return
    for stats in policies.values():
        stats["high_badput_vs_hindsight"] = vs_bound(stats["high_badput_chip_h"], bound["high_badput_chip_h"])
        stats["victim_loss_vs_hindsight"] = vs_bound(stats["victim_lost_chip_h"], bound["victim_lost_chip_h"])


def mttr_ratios(policies: dict[str, Any], block: str, suffix: str = "") -> dict[str, float]:
    r = policies["reconciler"][block]
    return {
        f"reconciler/{base}_{q}{suffix}": ratio(r[q], policies[base][block][q])
        for base in ("none", "scheduler")
        if base in policies
        for q in QUANTILES
    }


def run_scaling(passes: int, sizes: tuple[int, ...] = SCALING_SIZES, progress: bool = True) -> list[dict[str, Any]]:
    return [
        measure(n, min(passes, SCALING_PASSES_CAP.get(n, passes)))
        for n in tqdm(sizes, desc="reconciler scaling", disable=not progress)
    ]


def fmt(x: Any) -> str:
    if isinstance(x, float):
        return "n/a" if math.isnan(x) else f"{x:.3g}" if abs(x) < 1000 else f"{x:.0f}"
    return str(x)


def _quantiles(block: dict[str, Any]) -> str:
    return "/".join(fmt(block[q]) for q in QUANTILES)


def table(report: dict[str, Any]) -> str:
    cols: list[tuple[str, Callable[[dict[str, Any]], Any]]] = [
        ("incidents", lambda p: p["incidents"]),
        ("MTTR p50/95/99 s", lambda p: _quantiles(p["mttr_s"])),
        ("lasting n", lambda p: p["mttr_lasting_s"]["n"]),
        ("its p50/95/99 s", lambda p: _quantiles(p["mttr_lasting_s"])),
        ("goodput", lambda p: p["high_goodput"]),
        ("fleet gp", lambda p: p["fleet_goodput"]),
        ("victim chip-h/inc", lambda p: p["victim_lost_chip_h_per_incident"]),
        ("exch.rate", lambda p: p.get("exchange_rate", math.nan)),
        ("hi bad/hs", lambda p: p.get("high_badput_vs_hindsight", math.nan)),
        ("vic loss/hs", lambda p: p.get("victim_loss_vs_hindsight", math.nan)),
        ("victims/inc", lambda p: p["victims_per_incident"]),
        ("fence/op mean/max", lambda p: f"{fmt(p['fence_holds_per_op']['mean'])}/{p['fence_holds_per_op']['max']}"),
        ("partial", lambda p: p["partial_preemptions"]),
        ("perm.fail", lambda p: p["permanent_victim_failures"]),
        ("lost", lambda p: p["lost_victims"]),
        ("util", lambda p: p["utilisation"]),
    ]
    widths = [10, 19, 10, 19, 9, 10, 18, 10, 10, 12, 12, 18, 8, 10, 6, 8]
    lines = []
    for name, block in report["scenarios"].items():
        seeds = block.get("seeds", [block["seed"]])
        lines.append(f"\n== {name} ({len(seeds)} seeds from {seeds[0]}, {block['params']['horizon_h']:.0f} h each)")
        lines.append(f"{'policy':<11}" + "".join(f"{c:>{w}}" for (c, _), w in zip(cols, widths, strict=True)))
        for policy, stats in block["policies"].items():
            cells = "".join(f"{fmt(get(stats)):>{w}}" for (_, get), w in zip(cols, widths, strict=True))
            lines.append(f"{policy:<11}{cells}")
        if any("high_badput_chip_h" in stats for stats in block["policies"].values()):
            lines.append(
                "vs hindsight (high badput chip-h / victims' lost chip-h): "
                + "  ".join(
                    f"{policy} {fmt(stats['high_badput_chip_h'])}/{fmt(stats['victim_lost_chip_h'])}"
                    for policy, stats in block["policies"].items()
                )
            )
        ratios = block["ratios"]
        for suffix, label in (("", "all incidents"), ("_lasting", "lasting repair")):
            if f"reconciler/none_p50{suffix}" not in ratios:
                continue
            lines.append(
                f"ratios ({label}): reconciler/none p50/p95/p99 "
                + " ".join(fmt(ratios[f"reconciler/none_{q}{suffix}"]) for q in QUANTILES)
                + "   reconciler/scheduler p50/p95/p99 "
                + " ".join(fmt(ratios[f"reconciler/scheduler_{q}{suffix}"]) for q in QUANTILES)
            )
        per_seed = block.get("per_seed", {})
        if len(per_seed) > 1:
            for policy in block["policies"]:
                cells = "  ".join(
                    f"{seed}: {_quantiles(runs[policy]['mttr_s'])} (n={runs[policy]['mttr_s']['n']})"
                    for seed, runs in per_seed.items()
                )
                lines.append(f"  per seed {policy:<10} {cells}")
    if report.get("planner_scaling"):
        lines.append(
            "\n== reconciler scaling (per pass: watch events in as raw JSON, snapshot, plan out; peak resident memory "
            "of the process from raw LIST pages)"
        )
        head = ("slices", 8), ("jobsets", 9), ("pods", 8), ("p50 ms", 10), ("p99 ms", 10), ("peak MB", 10)
        lines.append(
            "".join(f"{name:>{width}}" for name, width in head)
            + f"{'passes':>8}{'cpu p50/p99 ms':>16}{'plan p99 ms':>13}{'list s':>9}"
        )
        for row in report["planner_scaling"]:
            cpu = f"{row.get('cpu_p50_ms', math.nan):.1f}/{row.get('cpu_p99_ms', math.nan):.1f}"
            lines.append(
                f"{row['slices']:>8}{row['jobsets']:>9}{row['pods']:>8}{row['p50_ms']:>10.2f}"
                f"{row['p99_ms']:>10.2f}{row['peak_mb']:>10.1f}{row['passes']:>8}{cpu:>16}"
                f"{row.get('plan_p99_ms', math.nan):>13.1f}{row.get('list_s', math.nan):>9.1f}"
            )
    if report.get("targets"):
        lines.append("\n== targets")
        lines.append(f"{'target':<70}{'figure':<36}result")
        for row in report["targets"]:
            lines.append(f"{row['target']:<70}{row['figure']:<36}{'met' if row['met'] else 'NOT met'}")
    return "\n".join(lines)


def restart_floor_s(timing: dict[str, Any]) -> float:
    """Fault -> all pods Running when a multi-slice JobSet restarts in place on a slice that is already back:
    no policy can beat it, since the failed attempt must fail, drain and be recreated first."""
    return float(
        timing["fault_to_pod_failed_s"]
        + timing["pod_termination_grace_s"]
        + timing["jobset_recreate_s"]
        + timing["follower_create_s"]
        + timing["pod_start_s"]
    )


def no_drain_floor_s(timing: dict[str, Any]) -> float:
    """Fault -> all pods Running when a single-slice JobSet restarts on a free slice: nothing drains (its pods
    died with the crashed nodes, nobody is evicted), so only detection, recreation and pod start remain."""
    return float(
        timing["fault_to_pod_failed_s"]
        + timing["jobset_recreate_s"]
        + timing["follower_create_s"]
        + timing["pod_start_s"]
    )


def targets(report: dict[str, Any], spare_free: str = "steady_1x", spare: str = "spare_4") -> list[dict[str, Any]]:
    """The issue's targets, evaluated on the pooled figures (MTTR targets on the default-parameter,
    spare-free scenario)."""
    rows: list[dict[str, Any]] = []
    scenarios = report["scenarios"]

    def add(target: str, figure: str, met: bool) -> None:
        rows.append({"target": target, "figure": figure, "met": bool(met)})

    if spare_free in scenarios:
        block = scenarios[spare_free]["policies"]
        floor = restart_floor_s(scenarios[spare_free]["params"]["timing"])
        for kind, label in (("mttr_s", "all incidents"), ("mttr_lasting_s", "lasting repair")):
            r, n, s = (block[p][kind]["p50"] for p in ("reconciler", "none", "scheduler"))
            add(
                f"reconciler MTTR p50 <= 60 s ({spare_free}, {label})",
                f"{fmt(r)} s (in-place restart {fmt(floor)} s)",
                r <= 60,
            )
            add(
                f"reconciler MTTR p50 <= 0.2 x none ({spare_free}, {label})",
                f"{fmt(r)} / {fmt(n)} = {fmt(ratio(r, n))}",
                r <= 0.2 * n,
            )
            add(
                f"reconciler MTTR p50 <= scheduler ({spare_free}, {label})",
                f"{fmt(r)} vs {fmt(s)} s",
                r <= s,
            )
    if spare in scenarios:
        rec = scenarios[spare]["policies"]["reconciler"]
        floor = no_drain_floor_s(scenarios[spare]["params"]["timing"])
        drain = restart_floor_s(scenarios[spare]["params"]["timing"])
        p50 = rec["mttr_lasting_s"]["p50"]
        add(
            f"reconciler lasting-repair MTTR p50 at the no-drain floor ({spare})",
            f"{fmt(p50)} s (no-drain {fmt(floor)} s, drain {fmt(drain)} s)",
            p50 <= floor + 5.0,
        )
        add(f"reconciler drains nobody with spare slices ({spare})", f"{rec['victims']} victims", rec["victims"] == 0)
    for name, block in scenarios.items():
        r, s = block["policies"]["reconciler"]["mttr_s"]["p95"], block["policies"]["scheduler"]["mttr_s"]["p95"]
        add(f"reconciler MTTR p95 <= scheduler ({name})", f"{fmt(r)} vs {fmt(s)} s", r <= s)
    for name, block in scenarios.items():
        rows.extend(pays_for_itself(name, block))
    lost = sum(b["policies"]["reconciler"]["lost_victims"] for b in scenarios.values())
    partial = sum(b["policies"]["reconciler"]["partial_preemptions"] for b in scenarios.values())
    add("reconciler lost victims == 0 (all scenarios, all seeds)", str(lost), lost == 0)
    add("reconciler partial-slice preemptions == 0 (all scenarios)", str(partial), partial == 0)
    scaling = {row["slices"]: row for row in report.get("planner_scaling", [])}
    if 4096 in scaling:
        row = scaling[4096]
        add(
            "reconciler pass p99 <= 100 ms at 4,096 slices / 16,384 JobSets (raw events in, plan out)",
            f"{row['p99_ms']:.1f} ms (CPU {row.get('cpu_p99_ms', math.nan):.1f} ms)",
            row["p99_ms"] <= 100,
        )
        add(
            "reconciler peak resident memory <= 512 MiB at 4,096 slices / 16,384 JobSets",
            f"{row['peak_mb']:.0f} MiB",
            row["peak_mb"] <= 512,
        )
    if 256 in scaling and 1024 in scaling:
        plan_p50 = {n: scaling[n].get("plan_p50_ms", scaling[n]["p50_ms"]) for n in (256, 1024)}
        growth = plan_p50[1024] / max(plan_p50[256], 1e-9)
        nlogn = (1024 * math.log(1024)) / (256 * math.log(256))
        add(
            "planner p50 growth 256 -> 1,024 slices <= n log n",
            f"x{growth:.2f} (n log n: x{nlogn:.2f})",
            growth <= nlogn,
        )
    return rows


PAYBACK_MTTR_SLACK_S = 15.0
"""The reconciler's lasting-repair MTTR p50 may exceed the drain floor by at most this much."""


def pays_for_itself(name: str, block: dict[str, Any]) -> list[dict[str, Any]]:
    """The payback conditions on one scenario: the reconciler dominates the scheduler pattern (high-priority and
    fleet goodput at least as high, lasting-repair MTTR p50/p95 no higher) and, against `none`, gains high-priority
    goodput at an exchange rate of at least 1 with its lasting-repair MTTR p50 near the drain floor."""
    pol = block["policies"]
    rec, sched, none = pol["reconciler"], pol["scheduler"], pol["none"]
    floor = restart_floor_s(block["params"]["timing"])
    rl, sl = rec["mttr_lasting_s"], sched["mttr_lasting_s"]
    rows = []

    def add(target: str, figure: str, met: bool) -> None:
        rows.append({"target": f"{target} ({name})", "figure": figure, "met": bool(met)})

    add(
        "reconciler high goodput >= scheduler",
        f"{rec['high_goodput']:.5f} vs {sched['high_goodput']:.5f}",
        rec["high_goodput"] >= sched["high_goodput"],
    )
    add(
        "reconciler fleet goodput >= scheduler",
        f"{rec['fleet_goodput']:.5f} vs {sched['fleet_goodput']:.5f}",
        rec["fleet_goodput"] >= sched["fleet_goodput"],
    )
    add(
        "reconciler lasting MTTR p50/p95 <= scheduler",
        f"{fmt(rl['p50'])}/{fmt(rl['p95'])} vs {fmt(sl['p50'])}/{fmt(sl['p95'])} s",
        rl["p50"] <= sl["p50"] and rl["p95"] <= sl["p95"],
    )
    add(
        "reconciler high goodput >= none",
        f"{rec['high_goodput']:.5f} vs {none['high_goodput']:.5f}",
        rec["high_goodput"] >= none["high_goodput"],
    )
    xr = rec["exchange_rate"]
    # Nothing thrown away (e.g. spare slices covered every failure): no price was paid, so none is too high.
    free = rec.get("policy_victim_lost_chip_s", math.nan) == 0 and rec.get("high_gain_over_none_chip_h", 0.0) >= 0
    add("reconciler exchange rate >= 1", fmt(xr) + (" (no victim lost anything)" if free else ""), xr >= 1.0 or free)
    add(
        f"reconciler lasting MTTR p50 <= drain floor + {PAYBACK_MTTR_SLACK_S:.0f} s",
        f"{fmt(rl['p50'])} s (floor {fmt(floor)} s)",
        rl["p50"] <= floor + PAYBACK_MTTR_SLACK_S,
    )
    return rows


def _commit() -> str:
    """The commit the bench ran on (with `+dirty` for uncommitted changes), or "unknown" outside a git checkout."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def bench(
    out: Path,
    seed: int = DEFAULT_SEED,
    scale: float = 1.0,
    workers: int | None = None,
    passes: int = 200,
    progress: bool = True,
    seeds: int = DEFAULT_SEEDS,
    sizes: tuple[int, ...] = SCALING_SIZES,
    fleet_seeds: int = FLEET_SEEDS,
    signal: bool = True,
) -> dict[str, Any]:
    workers = workers if workers is not None else min(2, os.cpu_count() or 1)
    started, load_before, commit = time.monotonic(), os.getloadavg(), _commit()  # the code that runs, not later edits
    headline = run_scenarios(
        standard_scenarios(seed, scale), workers, progress, seeds_for(seed, seeds), seed_multiplier=SEED_MULTIPLIER
    )
    report: dict[str, Any] = {
        "version": 3,
        "run": {"scale": scale, "seeds": seeds, "seed": seed, "workers": workers},
        "scenarios": headline,
        "signal": run_signal(signal_scenarios(seed, scale), headline, workers, progress) if signal else {},
        "fleet": fleet_bench(seed, scale, seeds=fleet_seeds, workers=workers),
        "planner_scaling": run_scaling(passes, sizes, progress=progress),
    }
    report["targets"] = targets(report)
    report["run"] |= {
        "commit": commit,
        "wall_s": round(time.monotonic() - started, 1),
        "load_average_start": [round(x, 2) for x in load_before],
        "load_average_end": [round(x, 2) for x in os.getloadavg()],
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "hotswap.json").write_text(json.dumps(report, indent=2, allow_nan=True) + "\n", encoding="utf-8")
    plot_mttr(report, out / "mttr.png")
    return report
