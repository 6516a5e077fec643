"""`python -m sim report build/bench/hotswap.json`: the bench's figures as Markdown tables.

docs/benchmarks.md quotes these tables; generating them from the JSON keeps the document and the run it cites
in step (no figure typed by hand).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

ONLINE = ("scheduler", "scheduler-recreate", "reconciler", "kueue-tas", "hero")
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
                _num(p.get("weighted_badput_chip_h"), 0),
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
        "weighted badput chip-h",
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
        for field in ("high_badput_chip_h", "weighted_badput_chip_h", "victim_lost_chip_h"):
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
        "best online: weighted badput chip-h",
        "reconciler",
        "hindsight",
        "best online: victims' lost chip-h",
        "reconciler",
        "hindsight",
    )
    return "\n".join(_table(head, rows))


PEERS = tuple(p for p in ONLINE if p != "reconciler")
PAIRED_FIELDS = (
    ("weighted_badput_chip_h", "weighted badput"),
    ("high_badput_chip_h", "high badput"),
    ("victim_lost_chip_h", "victims' loss"),
)


def _pairs(block: Mapping[str, Any], peer: str, field: str, mine: str = "reconciler") -> list[tuple[float, float]]:
    per_seed = block.get("per_seed") or {}
    return [
        (float(runs[mine][field]), float(runs[peer][field]))
        for runs in per_seed.values()
        if field in runs.get(mine, {}) and field in runs.get(peer, {})
    ]


def practical_margin(block: Mapping[str, Any], peer: str, field: str, mine: str = "reconciler") -> float:
    """The smallest difference the paired verdict calls a lead: PRACTICAL_MARGIN of the larger of the two
    policies' means per seed, and at least NEGLIGIBLE_CHIP_H. A constant gap of modelled latency (a 1 s
    admission step, 2 s of MTTR) is a fraction of a per cent of a scenario's badput and stays a tie."""
    pairs = _pairs(block, peer, field, mine)
    if not pairs:
        return NEGLIGIBLE_CHIP_H
    mean_mine = sum(a for a, _ in pairs) / len(pairs)
    mean_peer = sum(b for _, b in pairs) / len(pairs)
    return max(PRACTICAL_MARGIN * max(abs(mean_mine), abs(mean_peer)), NEGLIGIBLE_CHIP_H)


def paired_difference(
    block: Mapping[str, Any], peer: str, field: str, mine: str = "reconciler"
) -> tuple[float, float, int]:
    """Reconciler (or `mine`) minus `peer` on `field`, paired by seed (each seed is one event stream for every
    policy): the mean difference, its standard error over the seeds (nan with one seed) and the number of seeds."""
    diffs = [a - b for a, b in _pairs(block, peer, field, mine)]
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
PRACTICAL_MARGIN = 0.01
"""A lead must also exceed 1 % of the figure itself (the larger of the two policies' means per seed) to count:
the practical margin. (1 % of a tier's *demand* would make every cell a tie: the policies'
badputs are a fraction of a per cent of what the tiers ask for.)"""


def half_width(se: float, n: int) -> float:
    """Half-width of the 95 % confidence interval of a mean difference over `n` paired seeds."""
    if n < 2 or math.isnan(se):
        return math.nan
    df = n - 1
    # Between listed degrees of freedom the next lower one's t: slightly wider, never narrower.
    t = T_975[max(k for k in T_975 if k <= df)] if df <= 30 else 1.96
    return t * se


def verdict(mean: float, half: float, margin: float = NEGLIGIBLE_CHIP_H) -> str:
    """Whether the reconciler is ahead of a peer (less badput or loss): the 95 % interval excludes 0 and the mean
    difference exceeds the practical `margin`; "tie" otherwise."""
    if math.isnan(mean):
        return "?"
    if abs(mean) < max(margin, NEGLIGIBLE_CHIP_H):
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
    return "\n".join(_table(*_paired_rows(report["scenarios"], PAIRED_FIELDS)))


def paired_cell(block: Mapping[str, Any], peer: str, field: str, mine: str = "reconciler") -> str:
    """`mean ± half-width verdict` of `mine` minus `peer` on `field`."""
    mean, se, n = paired_difference(block, peer, field, mine)
    half = half_width(se, n)
    return f"{_num(mean, 1)} ± {_num(half, 1)} {verdict(mean, half, practical_margin(block, peer, field, mine))}"


def _paired_rows(
    blocks: Mapping[str, Mapping[str, Any]], fields: Sequence[tuple[str, str]]
) -> tuple[list[str], list[list[str]]]:
    rows = []
    for name, block in blocks.items():
        row = [name, str(len(block.get("per_seed") or {}))]
        for peer in PEERS:
            if peer not in block["policies"]:
                row += [""] * len(fields)
                continue
            row += [paired_cell(block, peer, field) for field, _ in fields]
        rows.append(row)
    head = ["scenario", "seeds"] + [f"vs {peer}: {label}" for peer in PEERS for _, label in fields]
    return head, rows


def verdicts(
    block: Mapping[str, Any], fields: Sequence[str] = ("weighted_badput_chip_h", "victim_lost_chip_h")
) -> dict[str, str]:
    """`peer/field` -> the paired verdict of the reconciler against that peer (the headline's test)."""
    out = {}
    for peer in PEERS:
        if peer not in block["policies"]:
            continue
        for field in fields:
            mean, se, n = paired_difference(block, peer, field)
            out[f"{peer}/{field}"] = verdict(mean, half_width(se, n), practical_margin(block, peer, field))
    return out


def standing_markdown(report: Mapping[str, Any]) -> str:
    """The headline's test per scenario: the peers the reconciler is behind, tied with and ahead of, on the
    priority-weighted badput and on victims' loss (paired verdicts with the practical margin)."""
    rows = []
    for name, block in report["scenarios"].items():
        found = verdicts(block)
        row = [name]
        for field in ("weighted_badput_chip_h", "victim_lost_chip_h"):
            cells: dict[str, list[str]] = {"**behind**": [], "tie": [], "ahead": [], "?": []}
            for peer in PEERS:
                v = found.get(f"{peer}/{field}")
                if v is None:
                    continue
                cells[v].append(peer)
            row += [", ".join(cells[k]) or "-" for k in ("**behind**", "tie", "ahead")]
        rows.append(row)
    head = (
        "scenario",
        "weighted badput: behind",
        "tie",
        "ahead",
        "victims' loss: behind",
        "tie",
        "ahead",
    )
    return "\n".join(_table(head, rows))


def tiers_markdown(report: Mapping[str, Any]) -> str:
    """Badput per tier (each tier's demand minus its useful chip-time) and the priority-weighted total, pooled."""
    rows = []
    for name, block in report["scenarios"].items():
        weights = block.get("tier_weights") or {}
        tiers = list(weights)
        for i, (policy, p) in enumerate(block["policies"].items()):
            by_tier = p.get("badput_by_tier_chip_h", {})
            cells = " / ".join(f"{t} {_num(by_tier.get(t), 0)}" for t in tiers)
            label = f"{name} (weights {' / '.join(f'{weights[t]:g}' for t in tiers)})" if i == 0 else ""
            rows.append([label, policy, cells, _num(p.get("weighted_badput_chip_h"), 0)])
    return "\n".join(_table(("scenario (tier weights)", "policy", "badput per tier chip-h", "weighted chip-h"), rows))


SIGNAL_FIELDS = (("weighted_badput_chip_h", "weighted badput"), ("victim_lost_chip_h", "victims' loss"))


def signal_markdown(report: Mapping[str, Any]) -> str:
    """The checkpoint signal's worth: the reconciler with a share of JobSets publishing, against itself without
    the signal and against each peer (whose runs the signal does not change), paired by seed."""
    rows = []
    for name, block in (report.get("signal") or {}).items():
        rec, blind = block["policies"]["reconciler"], block["policies"]["no-signal reconciler"]
        row = [
            name.split("@")[0],
            f"{block['checkpoint_share']:.0%}",
            str(len(block["seeds"])),
            f"{_num(rec.get('weighted_badput_chip_h'), 0)} ({_num(blind.get('weighted_badput_chip_h'), 0)})",
            f"{_num(rec.get('victim_lost_chip_h'), 0)} ({_num(blind.get('victim_lost_chip_h'), 0)})",
            f"{_quantiles(rec['mttr_lasting_s'])} ({_quantiles(blind['mttr_lasting_s'])})",
        ]
        for peer in PEERS:
            row += [paired_cell(block, peer, field) for field, _ in SIGNAL_FIELDS]
        rows.append(row)
    head = [
        "scenario",
        "JobSets publishing",
        "seeds",
        "reconciler weighted badput chip-h (no signal)",
        "reconciler victims' loss chip-h (no signal)",
        "reconciler lasting MTTR p50/p95/p99 s (no signal)",
    ] + [f"vs {peer}: {label}" for peer in PEERS for _, label in SIGNAL_FIELDS]
    return "\n".join(_table(head, rows))


ACTION_LABELS = {
    "kueue_admission_preemptions": "Kueue admission preemptions",
    "kueue_topology_preemptions": "of which for topology",
    "kueue_node_failure_evictions": "Kueue NodeFailures evictions",
    "kube_scheduler_pod_preemptions": "kube-scheduler pod preemptions",
    "holds": "spec.active=false holds",
    "rung_switches": "rung switches off spot",
    "hero_drains": "hero drains",
    "hero_drain_victims": "hero drain victims",
}


def actions_markdown(report: Mapping[str, Any]) -> str:
    """Per scenario and acting policy, what its mechanism did, summed over the seeds: a row of
    zeros means the peer never acted there, and its figures measure something else."""
    rows = []
    for name, block in report["scenarios"].items():
        for i, policy in enumerate(p for p in ONLINE if p in block["policies"]):
            acts = block["policies"][policy].get("actions", {})
            cells = [_num(int(acts.get(k, 0))) for k in ACTION_LABELS]
            ended = ", ".join(
                f"{k.removeprefix('hero_drains_ended_').replace('_', ' ')} {v:,}"
                for k, v in acts.items()
                if k.startswith("hero_drains_ended_")
            )
            chip_s = block["policies"][policy].get("provisioned_chip_s")
            provisioned = "n/a" if chip_s is None else _num(round(chip_s / 3600.0))
            rows.append([name if i == 0 else "", policy, *cells, ended, provisioned])
    head = ("scenario", "policy", *ACTION_LABELS.values(), "hero drains ended", "provisioned chip-h (all seeds)")
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
        "### Seven policies side by side (no JobSet publishes a checkpoint)\n\n" + scenarios_markdown(report),
        "### Badput per tier and priority-weighted\n\n" + tiers_markdown(report),
        "### Distance to the hindsight bound\n\n" + best_online_markdown(report),
        "### Reconciler against each peer, paired by seed\n\n"
        "Reconciler minus peer in chip-hours: the mean over the seeds ± the half-width of its 95 % confidence "
        "interval (Student's t); negative is the reconciler ahead. `ahead`/`behind`: the interval excludes 0 and "
        f"the difference exceeds the practical margin ({PRACTICAL_MARGIN:.0%} of the larger of the two means, at "
        f"least {NEGLIGIBLE_CHIP_H} chip-h); `tie` otherwise.\n\n" + paired_markdown(report),
        "### Where the reconciler stands (the headline's test)\n\n"
        "From the paired table: the peers the reconciler is behind, tied with and ahead of, on the "
        "priority-weighted badput and on victims' loss, with no JobSet publishing a checkpoint.\n\n"
        + standing_markdown(report),
        "### What each peer did\n\n" + actions_markdown(report),
    ]
    if report.get("signal"):
        parts.append(
            "### What the checkpoint signal is worth\n\n"
            "The reconciler with a share of JobSets publishing `last-checkpoint` (in brackets: the same seeds "
            "without the signal), and paired against each peer's runs of the same seeds (the peers do not read the "
            "annotation, so their runs are those of the table above).\n\n" + signal_markdown(report)
        )
    if "fleet" in report:
        parts.append(f"### Fleet: {report['fleet']['scenario']}\n\n" + fleet_markdown(report["fleet"]))
    parts.append("### Reconciler scaling\n\n" + scaling_markdown(report["planner_scaling"]))
    parts.append("### Targets\n\n" + targets_markdown(report["targets"]))
    return "\n\n".join(parts) + "\n"
