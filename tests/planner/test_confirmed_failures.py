"""A Suspect slice confirmed by a failed workload pod is Unhealthy after `confirmedUnhealthyGrace`, not
`unhealthyGrace`: the preemptor restarts anyway, so waiting out the flap filter only delays its new attempt."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from gke_tpu_priority.hotswap.config import ConfigError, HotswapConfig, load_config
from gke_tpu_priority.hotswap.model import ClusterSnapshot, JobSet, PodPhase
from gke_tpu_priority.hotswap.planner import plan
from gke_tpu_priority.hotswap.planner.actions import HoldVictim, Plan
from testkit.builders import T0, Fleet, JobSetBuilder
from tests.planner.invariants import assert_invariants, idempotence_violations

# Victims at detection: these tests are about detection and planning; evictionDelay has test_eviction_cost.py.
CFG = HotswapConfig(eviction_delay=timedelta(0))
JUST_NOW = T0 - timedelta(seconds=2)  # well inside unhealthyGrace (20 s)


def run(snapshot: ClusterSnapshot, config: HotswapConfig = CFG) -> Plan:
    result = plan(snapshot, T0, config)
    assert_invariants(snapshot, result, config)
    assert idempotence_violations(snapshot, result, config) == []
    return result


def held(result: Plan) -> list[str]:
    return sorted(a.workload.name.split("-")[1] for a in result.actions if isinstance(a, HoldVictim))


def fleet_with_fresh_fault(terminal: bool = False) -> tuple[Fleet, JobSet]:
    """H on p0+p1, a low JobSet on v0; p0's nodes went NotReady 2 s ago."""
    fleet = Fleet().slices("p0", "p1", "v0")
    builder = JobSetBuilder("ml", "high").replicated_job("w", 2)
    if terminal:
        builder = builder.terminal("Failed")
    high = fleet.run(builder, ["p0", "p1"], 1000)
    fleet.run(JobSetBuilder("ml", "low").replicated_job("w", 1), ["v0"], 10)
    fleet.fail("p0", JUST_NOW, how="not-ready", hosts=4)
    return fleet, high


def fail_pods_on(fleet: Fleet, pool: str, phase: PodPhase = PodPhase.FAILED) -> None:
    fleet.pods = [replace(p, phase=phase) if p.node_pool == pool else p for p in fleet.pods]


def test_a_fresh_notready_without_failed_pods_still_waits_for_the_grace() -> None:
    fleet, _ = fleet_with_fresh_fault()
    result = run(fleet.snapshot())
    assert result.actions == ()
    assert result.diagnostics.slices_suspect == 1
    assert result.next_wakeup == JUST_NOW + CFG.unhealthy_grace


@pytest.mark.parametrize("phase", [PodPhase.FAILED, PodPhase.UNKNOWN])
def test_pods_that_failed_with_the_node_make_the_slice_unhealthy_at_once(phase: PodPhase) -> None:
    fleet, _ = fleet_with_fresh_fault()
    fail_pods_on(fleet, "p0", phase)
    result = run(fleet.snapshot())
    assert result.diagnostics.slices_unhealthy == 1 and result.diagnostics.slices_suspect == 0
    assert held(result) == ["low"]


def test_pods_the_restart_already_deleted_confirm_it_too() -> None:
    fleet, high = fleet_with_fresh_fault()
    fleet.depart_pods(high, "p0", JUST_NOW, failed=True)
    assert held(run(fleet.snapshot())) == ["low"]


def test_pods_deleted_while_running_do_not_confirm_a_failure() -> None:
    """A departure without Failed or DisruptionTarget is an ordinary delete (a hold, a restart elsewhere)."""
    fleet, high = fleet_with_fresh_fault()
    fleet.depart_pods(high, "p0", JUST_NOW, failed=False)
    assert held(run(fleet.snapshot())) == []


def test_failed_pods_of_a_finished_jobset_say_nothing_about_the_node() -> None:
    fleet, _ = fleet_with_fresh_fault(terminal=True)
    fail_pods_on(fleet, "p0")
    result = run(fleet.snapshot())
    assert result.diagnostics.slices_suspect == 1 and result.actions == ()


def test_a_failure_long_before_the_bad_condition_is_unrelated() -> None:
    fleet, high = fleet_with_fresh_fault()
    fleet.depart_pods(high, "p0", JUST_NOW - CFG.unhealthy_grace - timedelta(seconds=1), failed=True)
    assert run(fleet.snapshot()).diagnostics.slices_suspect == 1


def test_a_failure_shortly_before_notready_counts_from_the_bad_condition() -> None:
    """Container errors often surface before the node turns NotReady."""
    fleet, high = fleet_with_fresh_fault()
    fleet.depart_pods(high, "p0", JUST_NOW - timedelta(seconds=8), failed=True)
    assert held(run(fleet.snapshot())) == ["low"]


def test_a_confirmed_grace_delays_the_promotion_and_sets_the_wakeup() -> None:
    config = CFG.model_copy(update={"confirmed_unhealthy_grace": timedelta(seconds=5)})
    fleet, _ = fleet_with_fresh_fault()
    fail_pods_on(fleet, "p0")
    early = run(fleet.snapshot(), config)
    assert early.actions == () and early.diagnostics.slices_suspect == 1
    assert early.next_wakeup == JUST_NOW + timedelta(seconds=5)
    later = plan(fleet.snapshot(), JUST_NOW + timedelta(seconds=5), config)
    assert held(later) == ["low"]


def test_setting_it_to_unhealthy_grace_turns_the_fast_path_off() -> None:
    config = HotswapConfig(confirmed_unhealthy_grace=CFG.unhealthy_grace)
    fleet, _ = fleet_with_fresh_fault()
    fail_pods_on(fleet, "p0")
    assert run(fleet.snapshot(), config).actions == ()


def test_a_confirmed_grace_longer_than_the_grace_is_refused_with_both_values() -> None:
    with pytest.raises(ConfigError) as error:
        load_config(env={"HOTSWAP_UNHEALTHY_GRACE": "10s", "HOTSWAP_CONFIRMED_UNHEALTHY_GRACE": "30s"})
    message = str(error.value)
    assert "confirmedUnhealthyGrace (0:00:30) must not exceed unhealthyGrace (0:00:10)" in message
