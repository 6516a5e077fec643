"""GKE's documented hotswap pattern beside the reconciler's, on the same real controllers and script.

The dev stack with `hotswap.mode: scheduler-assisted`: the TPU tiers' PriorityClasses preempt lower ones
(`PreemptLowerPriority`), so kube-scheduler itself evicts low-priority pods for the restarted high-priority JobSet,
pod by pod, and the reconciler completes each such eviction through Kueue (the victim's Workload deactivated whole,
requeued, released after the repair). A module of its own because a PriorityClass's `preemptionPolicy` cannot
change in place: the stack's objects are applied afresh here and removed after.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from e2e import report
from e2e.apply import apply_all, delete_all
from e2e.conftest import Controllers, Target, served_locally
from e2e.hotswap_run import RECONCILER_OVERRIDES, REPAIR_AFTER_SECONDS, Scenario
from e2e.hotswap_scenario import HIGH, HP_SLICES, STACK, Fault, Mode, scenario_platform
from testkit.mock_runtime import load_stack_config, run_program
from tools.manifests import kubernetes_objects


@pytest.fixture(scope="module")
def assisted(target: Target, controllers: Controllers) -> Iterator[Scenario]:
    cluster = target.need_local()
    config = scenario_platform(load_stack_config(STACK), Mode.SCHEDULER_ASSISTED)
    objects = [o for o in kubernetes_objects(run_program(STACK, config).resources) if served_locally(target, o)]
    (high,) = [o for o in objects if o["kind"] == "PriorityClass" and o["metadata"]["name"] == HIGH]
    assert high["preemptionPolicy"] == "PreemptLowerPriority", high
    outcomes = apply_all(target.rest, objects)
    assert [o.as_json() for o in outcomes if not o.accepted] == []
    section = report.section("hotswap")
    section.setdefault("runs", [])
    section.setdefault("repairAfterSeconds", REPAIR_AFTER_SECONDS)
    section.setdefault("reconcilerOverrides", RECONCILER_OVERRIDES)
    yield Scenario(cluster, target.rest, target.kubectl, objects)
    delete_all(target.rest, [o for o in objects if not controllers.owns(o)])


def test_scheduler_assisted_recovers_on_healthy_slices_and_loses_nothing(assisted: Scenario) -> None:
    result = assisted.run(Mode.SCHEDULER_ASSISTED, Fault.HOST_FAILURE).as_report()
    report.section("hotswap")["runs"].append(result)
    failed_pool = result["failedNode"].rsplit("-", 1)[0]
    assert result["recoveredBeforeRepair"], result
    assert failed_pool not in result["highPriorityPoolsAfter"] and len(result["highPriorityPoolsAfter"]) == HP_SLICES
    assert result["victimsBack"] == result["victimsEvicted"], result
    assert result["lostWorkloads"] == 0, result
