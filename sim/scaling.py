"""Reconciler scaling: what the process does per pass, from raw API objects to a plan, and its peak memory.

The fleet comes from the simulator itself (a saturated fleet, then a few failed slices past unhealthyGrace), so the
planner sees disrupted preemptors, victims and queued work as in production. Its objects are written out as the
API server would send them (sim/raw.py: LIST pages of ~9 KB pods, ~10 KB JobSets...), and a fresh Python
process (sim/passbench.py) does what the reconciler does with them: converts every listed object into its
caches (hotswap/kube/store.py), then, pass after pass, applies a burst of watch events (raw JSON, as the watch
delivers it), assembles the snapshot and plans. Measured there, apart from the simulator: the time of each pass
(events in, plan out), the time of `plan()` alone, the time of the initial list, and the process's peak resident
memory (ru_maxrss: interpreter, the client libraries the reconciler imports, caches, a pass).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

from gke_tpu_priority.hotswap.config import HotswapConfig
from gke_tpu_priority.hotswap.model import ClusterSnapshot
from sim.params import FailureKind, Failures, Fleet, JobClass, Scenario
from sim.policies.none import NonePolicy
from sim.policies.reconciler import ReconcilerPolicy
from sim.raw import pages
from sim.simulator import Simulator
from sim.snapshot import at


def scaling_scenario(slices: int, seed: int) -> Scenario:
    jobsets = 4 * slices
    high = max(1, slices // 16)
    medium = max(1, slices // 4)
    return Scenario(
        name=f"scaling_{slices}",
        seed=seed,
        horizon_h=1.0,
        fleet=Fleet(slices=slices),
        classes=(
            JobClass(name="high", priority=2_000_000, slices=2, population=high, mean_duration_h=1e4),
            JobClass(name="medium", priority=1_500_000, slices=1, population=medium, mean_duration_h=1e4),
            JobClass(name="low", priority=1_000_000, slices=1, population=jobsets - high - medium, mean_duration_h=1e4),
        ),
        failures=Failures(slice_mtbf_h=1e9),
    )


def fleet_snapshot(slices: int, seed: int = 7) -> tuple[ClusterSnapshot, datetime, HotswapConfig]:
    """A saturated fleet of `slices` with a few slices failed a minute ago: the snapshot, its instant, the config."""
    sim = Simulator(scaling_scenario(slices, seed), NonePolicy())
    sim.track_departures = True  # the I/O layer's memory of vanished pods (infra attribution)
    sim.run()  # one hour: the fleet fills up
    failed = max(4, slices // 32)
    for s in sim.slices[:: len(sim.slices) // failed][:failed]:
        sim._fail_now(s, 4 * 3600.0, FailureKind.CRASH)
    sim.loop.run(sim.now + 60.0)
    reconciler = ReconcilerPolicy()
    reconciler.attach(sim)
    return reconciler.snapshot(), at(sim.now), reconciler.config


def churn_events(slices: int) -> int:
    """Watch events applied before each measured pass: pod and Workload updates, one per 64 slices (64 at 4,096).

    A quiet fleet sends few (kubelets renew Leases, not Nodes; running pods and admitted Workloads rarely change),
    a failure sends a burst; the rows report the cost of one event (`event_us`) so other rates can be worked out."""
    return max(8, slices // 64)


def measure(slices: int, passes: int, seed: int = 7) -> dict[str, Any]:
    snapshot, now, _config = fleet_snapshot(slices, seed)
    failed = max(4, slices // 32)
    with tempfile.TemporaryDirectory(prefix="hotswap-scaling-") as tmp:
        listing = Path(tmp) / "objects.jsonl"
        raw_bytes = 0
        with listing.open("wb") as out:
            for page in pages(snapshot):
                raw_bytes += len(page)
                out.write(page)
        jobsets, pods, nodes = len(snapshot.jobsets), len(snapshot.pods), len(snapshot.nodes)
        del snapshot  # the child reads the objects back; nothing of the simulator is in its memory
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "sim.passbench",
                str(listing),
                now.isoformat(),
                str(passes),
                str(churn_events(slices)),
            ],
            check=True,
            capture_output=True,
            text=True,
            cwd=Path(__file__).resolve().parent.parent,  # the repository root, where `sim` is importable
        )
    row: dict[str, Any] = json.loads(proc.stdout)
    return {
        "slices": slices,
        "jobsets": jobsets,
        "pods": pods,
        "nodes": nodes,
        "failed_slices": failed,
        "raw_mb": round(raw_bytes / 2**20, 1),
    } | row
