"""MTTR distribution per policy and scenario (matplotlib, Agg backend)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def plot_mttr(report: dict[str, Any], out: Path) -> None:
    scenarios = report["scenarios"]
    fig, axes = plt.subplots(1, len(scenarios), figsize=(4.5 * len(scenarios), 4), squeeze=False)
    for ax, (name, block) in zip(axes[0], scenarios.items(), strict=True):
        for policy, stats in block["policies"].items():
            samples = sorted(stats.get("mttr_samples_s", []))
            if not samples:
                continue
            ys = [(i + 1) / len(samples) for i in range(len(samples))]
            ax.step(samples, ys, where="post", label=f"{policy} (n={len(samples)})")
        ax.set_xscale("log")
        ax.set_xlabel("high-priority MTTR (s, log)")
        ax.set_ylabel("fraction of incidents")
        ax.axvline(60, color="grey", linestyle=":", linewidth=1)
        ax.set_title(name)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("MTTR CDF per policy (failure -> all pods of the new attempt Running)")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
