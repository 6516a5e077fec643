"""The standard benchmark scenarios (S1 steady, S2 storm, S3 long repairs, and those built on them).

Horizons are sized for `make bench`."""

from __future__ import annotations

from sim.params import (
    HOUR,
    MINUTE,
    ClusterQueueSpec,
    Failures,
    Fleet,
    JobClass,
    RepairBand,
    Scenario,
)

DEFAULT_SEED = 20260901
DEFAULT_SEEDS = 4
"""Seeds per scenario in `make bench` (DEFAULT_SEED, DEFAULT_SEED + 1, ...): enough incidents for a p99."""
SEED_MULTIPLIER = {"storm_4_in_60s": 3, "multi_disruption": 3, "ladder": 3}
"""Scenarios whose failures strike slices (storms, spot preemptions), so which JobSets they hit depends on where
each policy placed them: a policy difference there spreads several times wider from seed to seed than in the
steady scenarios (docs/benchmarks.md, "Reconciler against each peer, paired by seed"). `make bench` runs them
under this many times the seeds; together they add about 9 minutes on 2 cores."""


def standard_scenarios(seed: int = DEFAULT_SEED, scale: float = 1.0) -> list[Scenario]:
    """S1 at 1x and 3x, S2 storm, S3 long repairs, a fleet with spare slices, single-host pools with spare VMs
    (kueue-tas's best case), storms that disrupt several high-priority JobSets at once and a
    capacity ladder of reservation, spot and queued flex-start slices and two teams sharing the fleet
    through a cohort, the hero controller's home ground.
    `scale` multiplies every horizon (tests use < 1).

    No JobSet publishes a checkpoint (`checkpoint_signal` off): what a new platform has, and the bench's headline;
    `signal_scenarios` are the same scenarios with a share of JobSets publishing."""
    long_repairs = (
        RepairBand(weight=0.50, low_s=5.0, high_s=1 * MINUTE),
        RepairBand(weight=0.30, low_s=10 * MINUTE, high_s=20 * MINUTE),
        RepairBand(weight=0.20, low_s=1 * HOUR, high_s=4 * HOUR),
    )
    scenarios = [
        Scenario(name="steady_1x", seed=seed, horizon_h=8760 * scale),
        Scenario(name="steady_3x", seed=seed, horizon_h=4380 * scale, failures=Failures(rate_multiplier=3.0)),
        Scenario(
            name="storm_4_in_60s",
            seed=seed,
            horizon_h=2016 * scale,
            failures=Failures(storm_slices=4, storm_window_s=60.0, storm_every_h=48.0),
        ),
        Scenario(
            name="long_repairs",
            seed=seed,
            horizon_h=4380 * scale,
            failures=Failures(rate_multiplier=3.0, repair_mixture=long_repairs),
        ),
        spare_capacity(seed, scale),
        spare_nodes(seed, scale),
        multi_disruption(seed, scale),
        ladder(seed, scale),
        multi_team(seed, scale),
    ]
    return [sc.model_copy(update={"checkpoint_signal": False}) for sc in scenarios]


SIGNAL_RUNS: tuple[tuple[str, float, int], ...] = (
    ("steady_3x", 0.5, 4),
    ("steady_3x", 1.0, 4),
    ("long_repairs", 1.0, 4),
    ("multi_disruption", 1.0, 4),
)
"""The checkpoint signal's worth: (standard scenario, share of JobSets that publish, seeds).
Only the reconciler reads the annotation (Kueue and hero read admission and pod times, which every run has), so
these runs are the reconciler's alone, paired by seed with the peers of the no-signal run."""


def signal_scenarios(seed: int = DEFAULT_SEED, scale: float = 1.0) -> list[tuple[Scenario, float, int]]:
    """(scenario with `checkpoint_share` of its JobSets publishing, share, seeds) for each of SIGNAL_RUNS."""
    by_name = {sc.name: sc for sc in standard_scenarios(seed, scale)}
    return [
        (by_name[name].model_copy(update={"checkpoint_signal": True, "checkpoint_share": share}), share, seeds)
        for name, share, seeds in SIGNAL_RUNS
    ]


SPARE_SLICES = 4


def spare_capacity(seed: int = DEFAULT_SEED, scale: float = 1.0) -> Scenario:
    """A fleet that keeps SPARE_SLICES slices free beyond what its JobSets ask for.

    The high-priority JobSets are single-slice here (8 of them: the same 8 slices of high-priority work as the
    default 4 x 2): a multi-slice JobSet drains its own healthy replicas before it restarts (its old pods must
    be gone), which sets the 61 s floor whether or not anyone else is drained. A single-slice one shows what
    spare capacity is worth: fault -> pods failed -> recreate -> pod start, with nobody evicted.
    """
    classes = (
        JobClass(name="high", priority=2_000_000, slices=1, population=8, mean_duration_h=72.0),
        JobClass(name="medium", priority=1_500_000, slices=1, population=8, mean_duration_h=24.0),
        JobClass(name="low", priority=1_000_000, slices=1, population=20, mean_duration_h=12.0),
    )
    demand = sum(c.slices * c.population for c in classes)
    return Scenario(
        name=f"spare_{SPARE_SLICES}",
        seed=seed,
        horizon_h=2920 * scale,
        fleet=Fleet(slices=demand + SPARE_SLICES),
        classes=classes,
        failures=Failures(rate_multiplier=3.0),
    )


SPARE_NODES = 4


def spare_nodes(seed: int = DEFAULT_SEED, scale: float = 1.0) -> Scenario:
    """Single-host v6e pools (one ct6e-standard-8t VM, 2x4, 8 chips each) with SPARE_NODES spare VMs: Kueue's native
    node hot swap at its best.

    In Kueue TAS a failed node is replaced inside the workload's required topology domain, which needs a spare
    node there. The simulator fails whole slices and models a topology domain as one slice (node pool), so a
    multi-host slice never has a spare node of its own; the closest honest version is a fleet of single-host
    pools, where a "node" and a "domain" coincide and a spare VM is a free domain. A failed replica is then
    evicted (NodeFailures) and readmitted at once on a spare VM, with nobody preempted: one requeue
    (`kueue_admission_s`) slower than a true in-domain replacement would be, and otherwise the same path. The
    high-priority JobSets keep two replicas (two single-host child Jobs), the others one.
    """
    classes = (
        JobClass(name="high", priority=2_000_000, slices=2, population=4, mean_duration_h=72.0),
        JobClass(name="medium", priority=1_500_000, slices=1, population=8, mean_duration_h=24.0),
        JobClass(name="low", priority=1_000_000, slices=1, population=20, mean_duration_h=12.0),
    )
    demand = sum(c.slices * c.population for c in classes)
    return Scenario(
        name="spare_nodes",
        seed=seed,
        horizon_h=1460 * scale,
        fleet=Fleet(
            slices=demand + SPARE_NODES,
            hosts_per_slice=1,
            chips_per_host=8,
            topology="2x4",
            machine_type="ct6e-standard-8t",
        ),
        classes=classes,
        failures=Failures(rate_multiplier=3.0),
    )


def multi_disruption(seed: int = DEFAULT_SEED, scale: float = 1.0) -> Scenario:
    """Storms of 8 slice failures within a minute, on average every 24 h (Poisson), on a fleet mostly held by
    2-slice high-priority JobSets (12 of them on 24 of the 32 slices), with repairs that mostly outlast the
    restart: several high-priority JobSets are disrupted at once. Demand equals the fleet, so a
    NodeFailures eviction frees quota and the requeued JobSet is stuck on topology, the case hero drains for, one
    hero at a time cluster-wide; the reconciler plans all the disrupted JobSets in one pass.
    """
    classes = (
        JobClass(name="high", priority=2_000_000, slices=2, population=12, mean_duration_h=72.0),
        JobClass(name="low", priority=1_000_000, slices=1, population=8, mean_duration_h=12.0),
    )
    repairs = (
        RepairBand(weight=0.20, low_s=5.0, high_s=1 * MINUTE),
        RepairBand(weight=0.50, low_s=10 * MINUTE, high_s=30 * MINUTE),
        RepairBand(weight=0.30, low_s=1 * HOUR, high_s=4 * HOUR),
    )
    return Scenario(
        name="multi_disruption",
        seed=seed,
        horizon_h=1008 * scale,
        fleet=Fleet(slices=32),
        classes=classes,
        failures=Failures(storm_slices=8, storm_window_s=60.0, storm_every_h=24.0, repair_mixture=repairs),
    )


LADDER_HORIZON_H = 800.0
"""Sized so the six policies run the scenario in about 3 minutes on one core at scale 1 (docs/benchmarks.md)."""


def ladder(seed: int = DEFAULT_SEED, scale: float = 1.0) -> Scenario:
    """A capacity ladder: 8 reservation slices, 16 spot slices that GCP reclaims (30 s notice, capacity
    back after tens of minutes to hours) and 8 slices of queued flex-start quota that exist only while a workload
    admitted through a ProvisioningRequest holds them. Kueue fills reservation, then spot, then queued capacity.
    High-priority demand (6 x 2 slices) exceeds the reservation, so some high-priority JobSets run on spot and are
    hit by preemptions; total demand (36 slices) exceeds reservation + spot, so the queue reaches the top rung.
    Hardware failures as in steady_3x on every slice that exists.
    """
    classes = (
        JobClass(name="high", priority=2_000_000, slices=2, population=6, mean_duration_h=72.0),
        JobClass(name="medium", priority=1_500_000, slices=1, population=8, mean_duration_h=24.0),
        JobClass(name="low", priority=1_000_000, slices=1, population=16, mean_duration_h=12.0),
    )
    return Scenario(
        name="ladder",
        seed=seed,
        horizon_h=LADDER_HORIZON_H * scale,
        fleet=Fleet(slices=32, spot_slices=16, queued_slices=8),
        classes=classes,
        failures=Failures(rate_multiplier=3.0),
    )


def multi_team(seed: int = DEFAULT_SEED, scale: float = 1.0) -> Scenario:
    """Two teams' ClusterQueues in one cohort, shaped like the `prod` stack (stacks/Pulumi.prod.yaml: team-a runs
    the critical work, team-b regular training and lends part of its quota), on a 32-slice fleet.

    team-a: 6 two-slice high-priority JobSets (12 slices) on a nominal quota of 10 slices, so it borrows 2 from
    team-b at all times. team-b: 8 medium and 12 low one-slice JobSets (20 slices) on a nominal 22 slices with
    lendingLimit 4 (prod's team-b also lends part of its quota). When a high JobSet's slice fails and Kueue evicts
    it, its quota is free again, but every healthy slice is held by team-b's workloads within team-b's own quota,
    which Kueue may not preempt (reclaimWithinCohort takes only quota a ClusterQueue borrows, and team-b borrows
    none): the hero controller's premise (its docs/PLAN.md sec. 1), so hero drains domains for it. Simplified from
    prod: team-a has one tier and team-b two (prod's maxTier gives team-a high and team-b low), no spot pool, no
    fair sharing. Failures as in steady_3x.
    """
    classes = (
        JobClass(name="high", priority=2_000_000, slices=2, population=6, mean_duration_h=72.0, queue="team-a"),
        JobClass(name="medium", priority=1_500_000, slices=1, population=8, mean_duration_h=24.0, queue="team-b"),
        JobClass(name="low", priority=1_000_000, slices=1, population=12, mean_duration_h=12.0, queue="team-b"),
    )
    return Scenario(
        name="multi_team",
        seed=seed,
        horizon_h=MULTI_TEAM_HORIZON_H * scale,
        fleet=Fleet(slices=32),
        classes=classes,
        failures=Failures(rate_multiplier=3.0),
        cluster_queues=(
            ClusterQueueSpec(name="team-a", nominal_slices=10),
            ClusterQueueSpec(name="team-b", nominal_slices=22, lending_limit_slices=4),
        ),
    )


MULTI_TEAM_HORIZON_H = 2920.0
"""Half of steady_3x's horizon: about 50 high-priority incidents per seed."""
