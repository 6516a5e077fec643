"""The fleet benchmark: `region_degraded` (or any `FleetScenario`) in both dispatch modes under FLEET_POLICIES,
pooled over seeds as the single-cluster bench pools them, and its text table."""

from __future__ import annotations

import math
from typing import Any

from sim.fleet import FLEET_POLICIES, FleetResult, FleetScenario, region_degraded, run_fleet
from sim.metrics import add_exchange_rates, pool
from sim.multikueue import FleetMode
from sim.params import HOUR
from sim.workers import worker_pool


def _run_args(args: tuple[FleetScenario, FleetMode, str]) -> FleetResult:
    return run_fleet(*args)


def fleet_bench(
    seed: int = 20260901, scale: float = 1.0, seeds: int = 1, workers: int = 1, scenario: FleetScenario | None = None
) -> dict[str, Any]:
    """`region_degraded` (or `scenario`) in both modes under FLEET_POLICIES, over `seeds` seeds, pooled as the
    bench pools seeds; exchange rates against the same mode's `none`. Returns the JSON block."""
    base = scenario or region_degraded(seed, scale)
    runs = [
        (base.model_copy(update={"seed": base.seed + k}), mode, policy)
        for k in range(seeds)
        for mode in FleetMode
        for policy in FLEET_POLICIES
    ]
    if workers > 1:
        with worker_pool(workers) as ex:
            results = list(ex.map(_run_args, runs))
    else:
        results = [_run_args(r) for r in runs]
    out: dict[str, Any] = {"scenario": base.name, "params": base.model_dump(mode="json"), "modes": {}}
    for mode in FleetMode:
        mine = [r for r in results if r.mode == mode.value]
        policies = {}
        for policy in FLEET_POLICIES:
            per_seed = [r.summary for r in mine if r.policy == policy]
            pooled = pool(per_seed) if len(per_seed) > 1 else per_seed[0]
            if len(per_seed) > 1:
                pooled |= _pool_fleet_extras(per_seed)
            policies[policy] = pooled
        add_exchange_rates(policies)
        out["modes"][mode.value] = {
            "policies": policies,
            "events": {p: sum(r.events for r in mine if r.policy == p) for p in FLEET_POLICIES},
        }
    out["multikueue_vs_independent"] = vs_independent(out["modes"])
    return out


def vs_independent(modes: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Per policy, what MultiKueue dispatch changes against the same policy with regions picked by hand."""
    mk, ind = modes[FleetMode.MULTIKUEUE.value]["policies"], modes[FleetMode.INDEPENDENT.value]["policies"]
    return {
        policy: {
            "high_goodput_delta": round(mk[policy]["high_goodput"] - ind[policy]["high_goodput"], 5),
            "fleet_goodput_delta": round(mk[policy]["fleet_goodput"] - ind[policy]["fleet_goodput"], 5),
            "high_useful_gain_chip_h": round(
                (mk[policy]["high_useful_chip_s"] - ind[policy]["high_useful_chip_s"]) / HOUR, 1
            ),
            "victim_lost_chip_h_delta": round(
                (mk[policy]["badput_s"]["victim_wasted_progress"] - ind[policy]["badput_s"]["victim_wasted_progress"])
                / HOUR,
                1,
            ),
        }
        for policy in mk
    }


def _pool_fleet_extras(per_seed: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(per_seed)
    return {
        "high_goodput": round(sum(s["high_goodput"] for s in per_seed) / n, 5),
        "high_useful_share": round(sum(s["high_useful_share"] for s in per_seed) / n, 5),
        "utilisation": round(sum(s["utilisation"] for s in per_seed) / n, 5),
        "dispatch": {k: sum(s["dispatch"][k] for s in per_seed) for k in per_seed[0]["dispatch"]},
    }


def fleet_table(report: dict[str, Any]) -> str:
    """One row per (mode, policy): MTTR of lasting failures, goodput, exchange rate and MultiKueue dispatch."""

    def f(x: float) -> str:
        return "n/a" if isinstance(x, float) and math.isnan(x) else f"{x:.4g}"

    head = (
        f"{'mode':<12}{'policy':<11}{'lasting n':>10}{'MTTR lasting p50/p95 s':>24}{'hi goodput':>11}"
        f"{'fleet gp':>10}{'exch.rate':>10}{'hi gain chip-h':>15}{'retries':>9}{'by hold':>8}{'moves':>7}"
    )
    lines = [f"== {report['scenario']} ({report['params']['horizon_h']:.0f} h)", head]
    for mode, block in report["modes"].items():
        for policy, p in block["policies"].items():
            m = p["mttr_lasting_s"]
            d = p["dispatch"]
            lines.append(
                f"{mode:<12}{policy:<11}{m['n']:>10}{f(m['p50']) + '/' + f(m['p95']):>24}{f(p['high_goodput']):>11}"
                f"{f(p['fleet_goodput']):>10}{f(p['exchange_rate']):>10}{f(p['high_gain_over_none_chip_h']):>15}"
                f"{d['retries']:>9}{d['retries_by_hold']:>8}{d['moves']:>7}"
            )
    lines.append(
        "multikueue vs independent (same policy): high goodput / fleet goodput deltas, high useful chip-h gained,"
    )
    lines.append("victims' lost chip-h added")
    for policy, d in report.get("multikueue_vs_independent", {}).items():
        lines.append(
            f"  {policy:<11}{d['high_goodput_delta']:+.4f} / {d['fleet_goodput_delta']:+.4f}, "
            f"{d['high_useful_gain_chip_h']:+.0f} chip-h, {d['victim_lost_chip_h_delta']:+.0f} chip-h"
        )
    return "\n".join(lines)
