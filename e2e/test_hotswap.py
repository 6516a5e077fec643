"""GKE's hotswap scenario on real Kueue v0.19.2, JobSet v0.12.0 and kube-controller-manager v1.35.4.

The dev stack's objects (Kueue configuration through its chart, tiers, queues, admission policy, the reconciler's
RBAC and ConfigMap) are applied with its 4x4 pool sized to the fake fleet's four slices. Two 1-slice and one
single-host low-priority JobSets and a 2-slice high-priority JobSet, all made by the workload template, fill the
fleet; one host of the high-priority JobSet's slice fails; the same script runs with the reconciler on and off.
Figures go to the `hotswap` section of build/e2e/report.json.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from e2e import report
from e2e.apply import apply_all, delete_all
from e2e.conftest import Controllers, Target, served_locally
from e2e.hotswap_run import RECONCILER_OVERRIDES, REPAIR_AFTER_SECONDS, Scenario
from e2e.hotswap_scenario import BATCH_JOB, BATCH_POOL, HP_NAME, HP_SLICES, STACK, Fault, Mode, scenario_platform
from testkit.mock_runtime import load_stack_config, run_program
from tools.manifests import kubernetes_objects

JsonObj = dict[str, Any]

# Each run takes about two minutes (the repair comes after REPAIR_AFTER_SECONDS); `make e2e` runs the host failure
# with the reconciler on and off, and the slice-repair variant with two replicas and the leader killed mid-eviction,
# within CI's budget. E2E_HOTSWAP_FAULTS=all runs every fault in both modes too (the table in docs/benchmarks.md);
# or name faults: `E2E_HOTSWAP_FAULTS=host-failure,node-deletion`.
_CHOSEN = os.environ.get("E2E_HOTSWAP_FAULTS", "")
ALL = _CHOSEN == "all"
# The unreachable fault has a test of its own (fast-fail, reconciler only): without the reconciler nothing would
# ever fail its pods on the fake kubelet, so it is not one of the faults run in both modes.
BOTH_MODES = [f for f in Fault if f is not Fault.UNREACHABLE]
CHOSEN = BOTH_MODES if ALL else [Fault(f) for f in _CHOSEN.split(",") if f]
ON_FAULTS = CHOSEN or [Fault.HOST_FAILURE]
OFF_FAULTS = CHOSEN or [Fault.HOST_FAILURE]


@pytest.fixture(scope="module")
def scenario(target: Target, controllers: Controllers) -> Iterator[Scenario]:
    cluster = target.need_local()
    config = scenario_platform(load_stack_config(STACK))
    objects = [o for o in kubernetes_objects(run_program(STACK, config).resources) if served_locally(target, o)]
    outcomes = apply_all(target.rest, objects)
    assert [o.as_json() for o in outcomes if not o.accepted] == []
    section = report.section("hotswap")
    section.update(
        {
            "stack": f"{STACK}, 4x4 pool sized to the fake fleet's 4 slices",
            "repairAfterSeconds": REPAIR_AFTER_SECONDS,
            "reconcilerOverrides": RECONCILER_OVERRIDES,
            "runs": [],
        }
    )
    yield Scenario(cluster, target.rest, target.kubectl, objects)
    delete_all(target.rest, [o for o in objects if not controllers.owns(o)])


def _record(scenario: Scenario, mode: Mode, fault: Fault, kill_leader_at_hold: bool = False) -> JsonObj:
    result = scenario.run(mode, fault, kill_leader_at_hold=kill_leader_at_hold).as_report()
    if kill_leader_at_hold:
        result["mode"] = "reconciler, 2 replicas, leader killed at the hold"
        result["takeover"] = scenario.takeover
    report.section("hotswap")["runs"].append(result)
    return result


def _restarted_outside_the_budget(result: JsonObj) -> None:
    """The fault's pods carried DisruptionTarget, so the Job's pod failure policy failed the Job with reason
    PodFailurePolicy and the JobSet's infrastructure rule restarted it without spending `maxRestarts`."""
    restarts = result["highPriorityRestarts"]
    assert restarts["restarts"] >= 1 and restarts["countTowardsMax"] == 0, result


def _recovered_on_healthy_slices(result: JsonObj) -> None:
    failed_pool = result["failedNode"].rsplit("-", 1)[0]
    assert result["recoveredBeforeRepair"], result
    assert failed_pool not in result["highPriorityPoolsAfter"], result
    assert len(result["highPriorityPoolsAfter"]) == HP_SLICES, result
    assert result["victimsEvicted"] >= 1, result
    assert result["victimsRequeued"] == result["victimsEvicted"], result
    assert result["victimsBack"] == result["victimsEvicted"], result
    assert result["partialEvictions"] == 0, result
    assert result["lostWorkloads"] == 0, result


@pytest.mark.parametrize("fault", ON_FAULTS, ids=str)
def test_the_reconciler_moves_the_jobset_to_healthy_slices_before_the_repair(scenario: Scenario, fault: Fault) -> None:
    result = _record(scenario, Mode.RECONCILER, fault)
    _restarted_outside_the_budget(result)
    # The restarted JobSet took the freed slice and its own healthy one: running again before the repair. Before
    # the quarantine taint, kube-scheduler put a restarted Job's leader on the failed slice's surviving hosts
    # after a one-host fault, and that Job waited for the repair (docs/benchmarks.md, "Hotswap on real Kueue and
    # JobSet", finding 1).
    assert not result["restartedOntoFailedSlice"], result
    _recovered_on_healthy_slices(result)
    marks = result["timelineSeconds"]
    # Every host of the failed slice was tainted while it was down, and the taint was lifted after the repair.
    assert "sliceQuarantined" in marks and marks["sliceQuarantined"] < marks["repaired"], result
    assert "quarantineLifted" in marks, result
    # The reconciler wrote spec.active=false on the victims' real Workloads and said so: one
    # HotswapVictimHeld Event per victim JobSet, none about the preemptor.
    assert "victimHeld" in result["timelineSeconds"], result
    held = {e.get("regarding", {}).get("name", "") for e in scenario.events if e.get("reason") == "HotswapVictimHeld"}
    assert set(result["victims"]) <= held, sorted(e.get("reason", "") for e in scenario.events)
    assert HP_NAME not in held


@pytest.mark.parametrize("fault", OFF_FAULTS, ids=str)
def test_without_the_reconciler_the_jobset_waits_for_the_repair(scenario: Scenario, fault: Fault) -> None:
    result = _record(scenario, Mode.OFF, fault)
    _restarted_outside_the_budget(result)
    assert not result["recoveredBeforeRepair"], result
    assert result["recoverySeconds"] is not None and result["recoverySeconds"] >= result["repairAfterSeconds"]
    assert result["victimsEvicted"] == 0, result
    assert result["partialEvictions"] == 0, result
    assert result["lostWorkloads"] == 0, result


def test_fast_fail_frees_a_jobset_stuck_on_an_unreachable_host(scenario: Scenario) -> None:
    """The zombie path: the host's kubelet stops posting and nothing fails its pods, which stay Running in the API.
    With fast-fail on and the JobSet opted in, the reconciler marks the stuck pod Failed with `DisruptionTarget`
    and deletes it `after` (10 s here) the node became unreachable; the Job fails by its pod failure policy, the
    JobSet restarts without spending `maxRestarts`, and, the slice quarantined from the first pass, runs on the
    slice freed for it before the repair."""
    result = _record(scenario, Mode.RECONCILER, Fault.UNREACHABLE)
    _restarted_outside_the_budget(result)
    assert not result["restartedOntoFailedSlice"], result
    _recovered_on_healthy_slices(result)
    assert result["timelineSeconds"]["sliceQuarantined"] < result["timelineSeconds"]["hpOldPodsLeaving"], result


def test_a_standby_replica_finishes_what_a_killed_leader_started(scenario: Scenario) -> None:
    """Two replicas; the leader is SIGKILLed right after it has held a victim. The standby takes the Lease and,
    from the hold the first one wrote on the real Workload (spec.active=false and its annotations, which survive
    the restart), finishes the operation: the JobSet runs on healthy slices before the repair, no second victim,
    the victim released after it."""
    result = _record(scenario, Mode.RECONCILER, Fault.HOST_FAILURE_SLICE_REPAIR, kill_leader_at_hold=True)
    _recovered_on_healthy_slices(result)
    assert result["victimsEvicted"] == 1, result
    takeover = result["takeover"]
    assert takeover["victim"] in result["victims"], result
    if takeover["heldAfterTakeover"]:
        assert {"hotswap.gke-tpu-priority.io/held-by", "hotswap.gke-tpu-priority.io/op-id"} <= set(
            takeover["holdAnnotations"]
        ), takeover


def test_a_plain_batch_job_s_slice_counts_as_occupied(scenario: Scenario) -> None:
    """A plain TPU batch/v1 Job admitted by Kueue holds one 4x4 slice in lp-1's place. The reconciler must count
    that slice as occupied, not spare: had it planned the JobSet onto it, no victim would be taken and the JobSet
    would wait for the repair. Whichever it evicts goes whole."""
    with_job = Scenario(scenario.cluster, scenario.rest, scenario.kubectl, scenario.objects, with_batch_job=True)
    result = with_job.run(Mode.RECONCILER, Fault.HOST_FAILURE_SLICE_REPAIR).as_report()
    result["mode"] = "reconciler, a plain batch/v1 Job in lp-1's place"
    report.section("hotswap")["runs"].append(result)
    _recovered_on_healthy_slices(result)
    assert BATCH_POOL not in result["highPriorityPoolsAfter"] or BATCH_JOB in result["victims"], result
