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


def mttr_figure(report: dict[str, Any]) -> Figure:
    """One MTTR CDF panel per scenario: every policy, all incidents and lasting repairs."""
    scenarios = report["scenarios"]
    fig, axes = plt.subplots(1, len(scenarios), figsize=(4.5 * len(scenarios), 4), squeeze=False)
    for ax, (name, block) in zip(axes[0], scenarios.items(), strict=True):
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
            ax.legend(fontsize=8)
    fig.suptitle("MTTR CDF per policy (failure -> all pods of the new attempt Running)")
    fig.tight_layout()
    return fig
