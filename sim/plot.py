"""MTTR distribution per policy and scenario (matplotlib, Agg backend)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.figure import Figure


def plot_mttr(report: dict[str, Any], out: Path) -> None:
    fig = mttr_figure(report)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)


COLUMNS = 4
"""Scenarios per row of panels: eight side by side were too narrow to read."""


def mttr_figure(report: dict[str, Any]) -> Figure:
    """Per scenario, an MTTR CDF panel (every policy, all incidents and lasting repairs) above a goodput panel,
    COLUMNS scenarios to a row."""
    scenarios = report["scenarios"]
    columns = min(COLUMNS, len(scenarios))
    bands = -(-len(scenarios) // columns)
    fig, axes = plt.subplots(2 * bands, columns, figsize=(5.5 * columns, 8 * bands), squeeze=False)
    mttr_axes = [axes[2 * (k // columns)][k % columns] for k in range(len(scenarios))]
    goodput_axes = [axes[2 * (k // columns) + 1][k % columns] for k in range(len(scenarios))]
    for k in range(len(scenarios), bands * columns):  # an unfilled last row
        axes[2 * (k // columns)][k % columns].remove()
        axes[2 * (k // columns) + 1][k % columns].remove()
    for ax, (name, block) in zip(goodput_axes, scenarios.items(), strict=True):
        _goodput_panel(ax, name, block)
    for ax, (name, block) in zip(mttr_axes, scenarios.items(), strict=True):
        for i, (policy, stats) in enumerate(block["policies"].items()):
            color = f"C{i}"
            for key, style, label in (
                ("mttr_samples_s", "-", "all"),
                ("mttr_lasting_samples_s", "--", "lasting repair"),
            ):
                samples = sorted(stats.get(key, []))
                if not samples:
                    continue
                ys = [(k + 1) / len(samples) for k in range(len(samples))]
                legend = f"{policy} {label} (n={len(samples)})"
                ax.step(samples, ys, where="post", linestyle=style, color=color, label=legend)
        ax.set_xscale("log")
        ax.set_xlabel("high-priority MTTR (s, log)")
        ax.set_ylabel("fraction of incidents")
        ax.axvline(60, color="grey", linestyle=":", linewidth=1)  # the 60 s target
        ax.set_title(name)
        ax.grid(True, which="both", alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    fig.suptitle("MTTR CDF per policy (failure -> all pods of the new attempt Running); fleet chip-time by use")
    fig.tight_layout(rect=(0, 0, 1, 0.98))  # room for the suptitle
    return fig


def _goodput_panel(ax: Any, name: str, block: dict[str, Any]) -> None:
    """Stacked bars per policy: useful chip-time per tier, then badput by cause, as shares of provisioned."""
    policies = list(block["policies"])
    bottoms = [0.0] * len(policies)
    first = block["policies"][policies[0]]
    segments = [(f"useful {t}", "useful_chip_s_by_tier", t) for t in first.get("useful_chip_s_by_tier", {})]
    segments += [(cause.replace("_", " "), "badput_s", cause) for cause in first.get("badput_s", {})]
    for i, (label, key, sub) in enumerate(segments):
        shares = [
            block["policies"][p][key].get(sub, 0.0) / max(block["policies"][p]["provisioned_chip_s"], 1e-9)
            for p in policies
        ]
        ax.bar(policies, shares, bottom=bottoms, label=label, color=f"C{i % 10}")
        bottoms = [b + v for b, v in zip(bottoms, shares, strict=True)]
    ax.set_ylabel("share of provisioned chip-time")
    ax.set_title(f"{name}: goodput")
    ax.tick_params(axis="x", labelrotation=30)
    if segments:
        ax.legend(fontsize=6, loc="lower left")
