"""The quarantine taint: every host of a Suspect or Unhealthy slice gets `<domain>/unhealthy-slice:NoSchedule` while
the slice is broken, and loses it once the slice is usable again (on real controllers a restarted JobSet is placed
on a failed slice's surviving hosts otherwise)."""

from __future__ import annotations

from datetime import timedelta

from gke_tpu_priority.hotswap.config import HotswapConfig
from gke_tpu_priority.hotswap.model import ClusterSnapshot, TaintEffect
from gke_tpu_priority.hotswap.planner import plan
from gke_tpu_priority.hotswap.planner.actions import HoldVictim, Plan, TaintNode
from gke_tpu_priority.hotswap.planner.simulate import apply_actions
from gke_tpu_priority.hotswap.slices import SliceHealth
from testkit.builders import T0, Fleet, JobSetBuilder, NodeBuilder, slice_nodes
from tests.planner.invariants import assert_invariants, idempotence_violations

CFG = HotswapConfig(eviction_delay=timedelta(0))
KEY = "hotswap.gke-tpu-priority.io/unhealthy-slice"


def run(snapshot: ClusterSnapshot, config: HotswapConfig = CFG) -> Plan:
    result = plan(snapshot, T0, config)
    assert_invariants(snapshot, result, config)
    assert idempotence_violations(snapshot, result, config) == []
    return result


def taints(result: Plan) -> list[tuple[str, bool]]:
    return [(t.node.name, t.present) for t in result.taints]


def one_host_down() -> Fleet:
    """High on p0+p1, low on v0; one host of p0 has been NotReady for a minute (Unhealthy)."""
    fleet = Fleet().slices("p0", "p1", "v0")
    fleet.run(JobSetBuilder("ml", "high").replicated_job("w", 2), ["p0", "p1"], 1000)
    fleet.run(JobSetBuilder("ml", "low").replicated_job("w", 1), ["v0"], 10)
    return fleet.fail("p0", T0 - timedelta(minutes=1), how="not-ready", hosts=1)


def test_every_host_of_an_unhealthy_slice_is_tainted_before_the_holds() -> None:
    snapshot = one_host_down().snapshot()
    result = run(snapshot)
    assert result.diagnostics.slices_unhealthy == 1
    # All four hosts, the three Ready survivors included: those are where kube-scheduler would put new pods.
    assert taints(result) == [(f"p0-{i}", True) for i in range(4)]
    assert all(t.key == KEY and t.slice_name == "p0" for t in result.taints)
    assert result.diagnostics.nodes_quarantined == 4
    # The hold still happens in the same pass; the taints are executed first (Plan.taints before actions).
    owners = {w.uid: w.owner_jobset_name for w in snapshot.workloads}
    assert [owners[a.workload.uid] for a in result.actions if isinstance(a, HoldVictim)] == ["low"]


def test_a_tainted_slice_stays_unhealthy_and_is_not_tainted_again() -> None:
    fleet = one_host_down()
    first = run(fleet.snapshot())
    after = apply_actions(fleet.snapshot(), first.taints, T0)
    node = next(n for n in after.nodes if n.name == "p0-1")
    assert [(t.key, t.effect) for t in node.taints if t.key == KEY] == [(KEY, TaintEffect.NO_SCHEDULE)]
    again = plan(after, T0, CFG)
    assert again.taints == ()
    assert again.diagnostics.nodes_quarantined == 4


def test_the_quarantine_taint_alone_never_makes_a_slice_unhealthy() -> None:
    """A slice whose hosts are all Ready is usable though it still carries the taint, and the taint comes off."""
    fleet = Fleet().slices("p0")
    for builder in slice_nodes("p0"):
        name = builder.obj().name
        fleet.node(name, builder.taint(KEY, TaintEffect.NO_SCHEDULE))
    result = run(fleet.snapshot())
    assert result.diagnostics.slices_unhealthy == 0
    assert taints(result) == [(f"p0-{i}", False) for i in range(4)]
    assert result.diagnostics.nodes_quarantined == 0


def test_the_taint_comes_off_once_the_repaired_slice_is_recovering() -> None:
    """Recovering slices are handed to preemptors and released victims, so they must be schedulable."""
    fleet = Fleet().slices("p0", "p1")
    for builder in slice_nodes("p0"):
        name = builder.obj().name
        fleet.node(name, builder.ready_since(T0 - timedelta(seconds=5)).taint(KEY, TaintEffect.NO_SCHEDULE))
    result = run(fleet.snapshot())
    assert result.diagnostics.slices_recovering == 1
    assert taints(result) == [(f"p0-{i}", False) for i in range(4)]


def test_a_suspect_slice_is_tainted_at_once() -> None:
    """Within `unhealthyGrace` the slice is Suspect, no victim is taken yet, but a preemptor restarting meanwhile
    (fast-fail, or its pods failed with the host) must already be kept off the survivors."""
    fleet = Fleet().slices("p0")
    fleet.fail("p0", T0 - timedelta(seconds=2), how="not-ready", hosts=1)
    result = run(fleet.snapshot())
    assert result.diagnostics.slices_suspect == 1
    assert taints(result) == [(f"p0-{i}", True) for i in range(4)]
    assert result.actions == ()


def test_a_stray_taint_on_a_node_of_no_slice_is_removed() -> None:
    fleet = Fleet().slices("p0")
    fleet.node("cpu-0", NodeBuilder("cpu-0").taint(KEY, TaintEffect.NO_SCHEDULE))
    result = run(fleet.snapshot())
    assert ("cpu-0", False) in taints(result)


def test_a_deleting_node_is_not_tainted() -> None:
    fleet = one_host_down()
    name = "p0-2"
    fleet.node(name, NodeBuilder(name).pool("p0").tpu().deleting(T0))
    result = run(fleet.snapshot())
    assert name not in [n for n, _ in taints(result)]


def test_switched_off_it_writes_no_taint_at_all() -> None:
    config = CFG.model_copy(update={"quarantine_unhealthy_slices": False})
    fleet = one_host_down()
    fleet.node("p1-0", NodeBuilder("p1-0").pool("p1").tpu().taint(KEY, TaintEffect.NO_SCHEDULE))
    result = run(fleet.snapshot(), config)
    assert result.taints == ()
    assert result.diagnostics.nodes_quarantined == 1


def test_its_key_follows_the_annotation_domain() -> None:
    config = CFG.model_copy(update={"annotation_domain": "hotswap.example.com"})
    result = run(one_host_down().snapshot(), config)
    assert {t.key for t in result.taints} == {"hotswap.example.com/unhealthy-slice"}
    assert all(isinstance(t, TaintNode) for t in result.taints)
    assert SliceHealth.UNHEALTHY.value == "Unhealthy"
