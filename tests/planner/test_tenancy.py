"""Multi-tenancy in the planner: the reconciler's safety decisions rest on what a team cannot forge.

- a JobSet above its namespace's entitlement never preempts (defence in depth behind the admission policy);
- the protect annotation counts only in namespaces whose team may set it;
- a Workload in another namespace than the JobSet it claims to belong to is not that JobSet's Workload.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from gke_tpu_priority.hotswap.annotations import AnnotationKeys, HeldBy
from gke_tpu_priority.hotswap.config import HotswapConfig
from gke_tpu_priority.hotswap.planner import plan
from gke_tpu_priority.hotswap.planner.actions import HoldVictim, Plan
from gke_tpu_priority.hotswap.planner.world import OTHER_NAMESPACE, build_world
from testkit.builders import T0, Fleet, JobSet, JobSetBuilder, WorkloadBuilder
from tests.planner.invariants import assert_invariants

CFG = HotswapConfig(eviction_delay=timedelta(0))
KEYS = AnnotationKeys(CFG.annotation_domain)
FAILED_AT = T0 - timedelta(minutes=1)


def run(fleet: Fleet, config: HotswapConfig = CFG) -> Plan:
    snapshot = fleet.snapshot()
    result = plan(snapshot, T0, config)
    assert_invariants(snapshot, result, config)
    return result


def held(result: Plan) -> list[str]:
    return sorted(
        f"{a.workload.namespace}/{a.workload.name.split('-')[1]}" for a in result.actions if isinstance(a, HoldVictim)
    )


def two_teams(high_namespace: str = "team-b", low_annotation: bool = False) -> tuple[Fleet, JobSet]:
    """A priority-1000 JobSet disrupted on p0 (p1 healthy) and a priority-10 one of team-a on v0."""
    fleet = Fleet().slices("p0", "p1", "v0")
    high = fleet.run(JobSetBuilder(high_namespace, "high").replicated_job("w", 2), ["p0", "p1"], 1000)
    low = JobSetBuilder("team-a", "low").replicated_job("w", 1)
    if low_annotation:
        low = low.annotation(KEYS.protect, "true")
    fleet.run(low, ["v0"], 10)
    fleet.fail("p0", FAILED_AT).evict_pods(high, "p0", FAILED_AT)
    return fleet, high


def test_a_jobset_above_its_entitlement_never_preempts() -> None:
    fleet, _ = two_teams()
    assert held(run(fleet)) == ["team-a/low"]
    entitled = HotswapConfig(eviction_delay=timedelta(0), max_preemptor_priority={"team-b": 100})
    assert held(run(fleet, entitled)) == []
    # Within its entitlement (or in a namespace with none) it still preempts.
    assert held(run(fleet, HotswapConfig(eviction_delay=timedelta(0), max_preemptor_priority={"team-b": 1000}))) == [
        "team-a/low"
    ]
    assert held(run(fleet, HotswapConfig(eviction_delay=timedelta(0), max_preemptor_priority={"team-c": 100}))) == [
        "team-a/low"
    ]


def test_protect_counts_only_where_the_team_may_set_it() -> None:
    fleet, _ = two_teams(low_annotation=True)
    assert held(run(fleet)) == []  # no teams configured: honoured, as before
    assert held(run(fleet, HotswapConfig(eviction_delay=timedelta(0), protect_namespaces=()))) == ["team-a/low"]
    assert held(run(fleet, HotswapConfig(eviction_delay=timedelta(0), protect_namespaces=("team-a",)))) == []


def test_a_decoy_workload_in_another_namespace_does_not_stand_for_the_jobset() -> None:
    """team-b writes a Workload that claims team-a's JobSet as owner and says it is already held: ignored, the
    real Workload in team-a decides, so team-a's JobSet is still a victim (and its rescue is not cancelled)."""
    fleet, high = two_teams(high_namespace="team-a")
    victim = next(js for js in fleet.jobsets.values() if js.name == "low")
    decoy = (
        WorkloadBuilder("aaa-decoy", "jobset-low-decoy")
        .annotation(KEYS.held_by, HeldBy("team-a", "high", high.uid, 0).encode())
        .priority(10)
        .active(False)
        .obj()
    )
    fleet.set_workload(replace(decoy, owner_jobset_uid=victim.uid, owner_jobset_name=victim.name))
    world = build_world(fleet.snapshot(), T0, CFG)
    assert world.units[victim.uid].workload is not None
    assert world.units[victim.uid].workload.namespace == "team-a"
    assert world.excluded[OTHER_NAMESPACE] == ["aaa-decoy/jobset-low-decoy"]
    assert held(run(fleet)) == ["team-a/low"]
