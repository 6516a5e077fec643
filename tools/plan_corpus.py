"""Record `plan()` outputs over a corpus of snapshots, then check a later planner reproduces them exactly.

Run: `python -m tools.plan_corpus record build/plan_corpus.pkl` with the reference planner, then
`python -m tools.plan_corpus check build/plan_corpus.pkl` after a change that must not alter behaviour
(a performance change). The corpus holds the snapshots themselves, so the check does not depend on the
simulator replaying the same way. Snapshots: the scaling fleets (sim.scaling) and the synthetic bench
fleets (tools/bench_planner.py) at several sizes, and every reconciler pass of short storm, steady_3x
and unreachable-node simulations; each is planned under the default config and a few non-default ones.
"""

from __future__ import annotations

import argparse
import pickle
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

from gke_tpu_priority.hotswap.config import FastFailConfig, HotswapConfig, ReleaseOnPreemptorGone
from gke_tpu_priority.hotswap.model import ClusterSnapshot
from gke_tpu_priority.hotswap.planner import plan

Case = tuple[str, ClusterSnapshot, datetime]

CONFIGS: dict[str, HotswapConfig] = {
    "default": HotswapConfig(),
    "budget4": HotswapConfig(max_victims_per_pass=4),
    "fastfail": HotswapConfig(
        fast_fail=FastFailConfig(enabled=True, after=timedelta(seconds=30)),
        priority_boost_enabled=True,
        release_on_preemptor_gone=list(ReleaseOnPreemptorGone)[-1],
        max_holds_per_window=1,
    ),
}


def _scaling_cases() -> Iterator[Case]:
    from sim.params import FailureKind
    from sim.policies.none import NonePolicy
    from sim.policies.reconciler import ReconcilerPolicy
    from sim.scaling import scaling_scenario
    from sim.simulator import Simulator
    from sim.snapshot import at

    for slices, seed in ((32, 7), (64, 3), (256, 7), (1024, 7)):
        sim = Simulator(scaling_scenario(slices, seed), NonePolicy())
        sim.track_departures = True
        sim.run()
        failed = max(4, slices // 32)
        for s in sim.slices[:: len(sim.slices) // failed][:failed]:
            sim._fail_now(s, 4 * 3600.0, FailureKind.CRASH)
        sim.loop.run(sim.now + 60.0)
        reconciler = ReconcilerPolicy()
        reconciler.attach(sim)
        yield f"scaling-{slices}-{seed}", reconciler.snapshot(), at(sim.now)


def _bench_cases() -> Iterator[Case]:
    from testkit.builders import T0
    from tools.bench_planner import build

    for slices in (32, 256, 1024):
        for offset in (0, 5, 20):
            yield f"bench-{slices}+{offset}m", build(slices).snapshot(), T0 + timedelta(minutes=offset)


def _sim_cases(scale: float) -> Iterator[Case]:
    from sim.params import Failures, Scenario
    from sim.policies.reconciler import ReconcilerPolicy
    from sim.scenarios import standard_scenarios
    from sim.simulator import Simulator
    from sim.snapshot import at

    class Recording(ReconcilerPolicy):
        """Each pass plans the snapshot it just built, at the current time: keep both."""

        def __init__(self, name: str) -> None:
            super().__init__()
            self.label = name
            self.seen: list[Case] = []

        def snapshot(self) -> ClusterSnapshot:
            snapshot = super().snapshot()
            self.seen.append((f"{self.label}#{len(self.seen)}", snapshot, at(self.sim.now)))
            return snapshot

    scenarios = [s for s in standard_scenarios(scale=scale) if s.name in ("steady_3x", "storm_4_in_60s")]
    scenarios.append(
        Scenario(
            name="unreachable",
            seed=11,
            horizon_h=4380 * scale,
            failures=Failures(rate_multiplier=3.0, unreachable_fraction=0.5),
        )
    )
    for scenario in scenarios:
        policy = Recording(scenario.name)
        Simulator(scenario, policy).run()
        yield from policy.seen


def corpus(scale: float) -> list[Case]:
    return [*_scaling_cases(), *_bench_cases(), *_sim_cases(scale)]


def outputs(cases: list[Case]) -> list[str]:
    """One repr per (case, config): actions, events, diagnostics and next_wakeup, order included."""
    return [repr(plan(snapshot, now, config)) for _, snapshot, now in cases for config in CONFIGS.values()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("command", choices=["record", "check"])
    parser.add_argument("path", type=Path)
    parser.add_argument("--scale", type=float, default=0.02, help="simulation horizon scale for the sim cases")
    args = parser.parse_args()
    if args.command == "record":
        cases = corpus(args.scale)
        args.path.parent.mkdir(parents=True, exist_ok=True)
        with args.path.open("wb") as f:
            pickle.dump((cases, outputs(cases)), f)
        print(f"recorded {len(cases)} snapshots x {len(CONFIGS)} configs -> {args.path}")
        return 0
    with args.path.open("rb") as f:
        cases, expected = pickle.load(f)
    got = outputs(cases)
    labels = [f"{name} [{cfg}]" for name, _, _ in cases for cfg in CONFIGS]
    differ = [label for label, a, b in zip(labels, expected, got, strict=True) if a != b]
    actions = sum(a.count("HoldVictim(") + a.count("ReleaseVictim(") for a in expected)
    print(f"checked {len(got)} plans ({len(cases)} snapshots, {actions} hold/release actions): {len(differ)} differ")
    for label in differ[:20]:
        print("  differs:", label)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
