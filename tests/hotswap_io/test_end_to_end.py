"""Controller + real planner + fake API server: a node failure under a high-priority JobSet.

Scenario: slices p0, p1 run `high` (priority 1000); slice v0 runs `low` (priority 10). A host of p0
becomes unreachable and the taint manager evicts high's pods there. The reconciler must hold `low`
(one Workload write: annotations + spec.active=false), record the op on high's Workload, and, once the
failed slice is healthy again, release `low` (one write: annotations removed + spec.active=true).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest

from gke_tpu_priority.hotswap.annotations import AnnotationKeys
from gke_tpu_priority.hotswap.config import HotswapConfig, LeaderElectionConfig
from gke_tpu_priority.hotswap.controller import Controller
from gke_tpu_priority.hotswap.kube.actuator import Result
from gke_tpu_priority.hotswap.planner.actions import EventReason, TaintNode
from testkit.apiserver import FakeApiServer, Fault

from .cluster import (
    JOBSETS,
    NODES,
    NS,
    WORKLOADS,
    add_slices,
    ago,
    base_cluster,
    evict_pods_on,
    fail_node,
    jobset,
    jobset_restarted,
    kueue_deactivated,
    recover_node,
    run_jobset,
    workload,
)
from .conftest import ClientFactory
from .helpers import eventually

pytestmark = pytest.mark.timeout(30)

CONFIG = HotswapConfig(
    leader_election=LeaderElectionConfig(enabled=False),
    debounce=timedelta(milliseconds=20),
    resync_period=timedelta(seconds=1),
    writes_per_second=100,
    write_burst=100,
)
KEYS = AnnotationKeys(CONFIG.annotation_domain)
LOW = "jobset-low"
HIGH = "jobset-high"


def workload_writes(api: FakeApiServer, name: str) -> list[dict[str, Any]]:
    return [r.body for r in api.writes() if r.resource == WORKLOADS and r.name == name and isinstance(r.body, dict)]


async def caught_up(api: FakeApiServer, controller: Controller) -> None:
    """Wait until every cache has seen the API's current resourceVersion (bookmarks carry it)."""
    target = api.rv
    await eventually(
        lambda: all(int(i.resource_version or 0) >= target for g in controller.informers.values() for i in g)
    )


@pytest.fixture
async def failed_cluster(api: FakeApiServer) -> AsyncIterator[FakeApiServer]:
    base_cluster(api)
    add_slices(api, "p0", "p1", "v0")
    run_jobset(api, "high", ["p0", "p1"], 1000)
    run_jobset(api, "low", ["v0"], 10)
    fail_node(api, "p0-0", seconds_ago=60)
    evict_pods_on(api, "high", "p0")
    yield api


async def started(
    make_client: ClientFactory, api: FakeApiServer, config: HotswapConfig = CONFIG, **kwargs: object
) -> Controller:
    controller = Controller(config, await make_client("reconciler"), identity="reconciler", **kwargs)  # type: ignore[arg-type]
    controller.start_watches()
    await eventually(controller.caches_ready)
    await caught_up(api, controller)
    return controller


async def test_node_failure_holds_lower_priority_victim_then_releases_it(
    failed_cluster: FakeApiServer, make_client: ClientFactory
) -> None:
    api = failed_cluster
    controller = await started(make_client, api)
    try:
        outcomes = await controller.reconcile_once()
        assert {o.result for o in outcomes} == {Result.APPLIED}, outcomes
        low = api.get(WORKLOADS, LOW, NS)
        assert low is not None and low["spec"]["active"] is False
        assert low["metadata"]["annotations"][KEYS.held_by].startswith(f"{NS}/high/")
        # Exactly one write held the victim, and it carried the resourceVersion precondition.
        (hold,) = workload_writes(api, LOW)
        assert hold["spec"] == {"active": False}
        assert hold["metadata"]["resourceVersion"]
        high = api.get(WORKLOADS, HIGH, NS)
        assert high is not None and KEYS.op in high["metadata"]["annotations"]
        reasons = {e["reason"] for e in api.list_objects("events.events.k8s.io")}
        assert {EventReason.PLANNED.value, EventReason.VICTIM_HELD.value} <= reasons

        # Idempotent: the same state plans no new writes.
        await caught_up(api, controller)
        writes_before = len(api.writes())
        outcomes = await controller.reconcile_once()
        assert [o for o in outcomes if o.result is Result.APPLIED] == []
        assert len([w for w in api.writes() if w.resource == WORKLOADS]) == len(
            [w for w in api.writes()[:writes_before] if w.resource == WORKLOADS]
        )

        # Kueue evicts `low`; high restarts on p1 + v0 and becomes ready; p0 is repaired.
        kueue_deactivated(api, "low")
        jobset_restarted(api, "high", ["p1", "v0"], 1000, attempt=1)
        for host in range(4):
            recover_node(api, f"p0-{host}", minutes_ago=10)
        await caught_up(api, controller)
        for _ in range(3):
            await controller.reconcile_once()
            await caught_up(api, controller)
        low = api.get(WORKLOADS, LOW, NS)
        assert low is not None and low["spec"]["active"] is True
        assert KEYS.held_by not in low["metadata"].get("annotations", {})
        high = api.get(WORKLOADS, HIGH, NS)
        assert high is not None and KEYS.op not in high["metadata"].get("annotations", {})
        release = workload_writes(api, LOW)[-1]
        assert release["spec"] == {"active": True}
        reasons = {e["reason"] for e in api.list_objects("events.events.k8s.io")}
        assert {EventReason.DONE.value, EventReason.VICTIM_RELEASED.value} <= reasons
        metrics = controller.metrics.registry
        assert metrics.get_sample_value("hotswap_victims_total") == 1
        assert metrics.get_sample_value("hotswap_ops_total", {"result": "done"}) == 1
        assert metrics.get_sample_value("hotswap_held_workloads") == 0
        assert metrics.get_sample_value("hotswap_starved_preemptors") == 0  # an infra op: nobody starved
        assert metrics.get_sample_value("hotswap_slices_freed_total") == 1
        assert metrics.get_sample_value("hotswap_failure_to_preemptor_ready_seconds_count") == 1
        assert metrics.get_sample_value("hotswap_detection_to_plan_seconds_count") == 1
        assert metrics.get_sample_value("hotswap_victim_hold_seconds_count") == 1
    finally:
        await controller.stop_watches()


async def test_dry_run_writes_nothing(failed_cluster: FakeApiServer, make_client: ClientFactory) -> None:
    api = failed_cluster
    controller = await started(make_client, api, dry_run=True)
    try:
        outcomes = await controller.reconcile_once()
        assert outcomes and {o.result for o in outcomes} == {Result.DRY_RUN}
        assert api.writes("reconciler") == []
    finally:
        await controller.stop_watches()


async def test_conflict_on_hold_rereads_and_retries_once(
    failed_cluster: FakeApiServer, make_client: ClientFactory
) -> None:
    api = failed_cluster
    controller = await started(make_client, api)
    try:
        # Kueue touches the victim's status between the snapshot and the write: the resourceVersion is stale.
        api.inject(Fault(verb="patch", resource=WORKLOADS, name=LOW, status=409, times=1))
        outcomes = await controller.reconcile_once()
        hold = next(o for o in outcomes if o.action.__class__.__name__ == "HoldVictim")
        assert hold.result is Result.APPLIED and hold.detail == "attempt 2"
        gets = [r for r in api.requests_for("get", WORKLOADS) if r.name == LOW]
        assert len(gets) == 1
        assert api.get(WORKLOADS, LOW, NS)["spec"]["active"] is False  # type: ignore[index]
    finally:
        await controller.stop_watches()


async def test_victim_changed_by_someone_else_is_not_held(
    failed_cluster: FakeApiServer, make_client: ClientFactory
) -> None:
    api = failed_cluster
    controller = await started(make_client, api)
    try:
        # Freeze the caches: the planner decides on the old victim, which then finishes; the stale
        # write gets 409, and the re-check on the fresh object abandons the hold.
        await controller.stop_watches()
        api.patch(
            WORKLOADS,
            LOW,
            {"status": {"conditions": [{"type": "Finished", "status": "True", "reason": "Succeeded"}]}},
            NS,
        )
        outcomes = await controller.reconcile_once()
        low = api.get(WORKLOADS, LOW, NS)
        assert low is not None and low["spec"]["active"] is True
        assert KEYS.held_by not in low["metadata"].get("annotations", {})
        (hold,) = [o for o in outcomes if o.action.__class__.__name__ == "HoldVictim"]
        assert hold.result is Result.ABANDONED and hold.detail == "workload finished"
    finally:
        await controller.stop_watches()


async def test_malformed_objects_are_ignored_and_the_pass_still_acts(
    failed_cluster: FakeApiServer, make_client: ClientFactory
) -> None:
    api = failed_cluster
    api.put("nodes", {"metadata": {"name": "weird", "labels": "not-a-map"}, "spec": [], "status": {"conditions": 3}})
    api.put(
        WORKLOADS,
        {"metadata": {"name": "odd", "namespace": NS, "annotations": ["x"]}, "spec": {"active": "maybe"}, "status": 1},
    )
    api.put(
        "jobsets.jobset.x-k8s.io",
        {"metadata": {"name": "odd", "namespace": NS}, "spec": {"replicatedJobs": [{"template": 5}]}, "status": []},
    )
    api.put(
        "pods",
        {
            "metadata": {"name": "odd", "namespace": NS, "labels": {"jobset.sigs.k8s.io/jobset-name": "odd"}},
            "spec": {"nodeName": 7},
            "status": {"phase": ["Running"], "conditions": "x"},
        },
    )
    controller = await started(make_client, api)
    try:
        outcomes = await controller.reconcile_once()
        assert Result.APPLIED in {o.result for o in outcomes}
        low = api.get(WORKLOADS, LOW, NS)
        assert low is not None and low["spec"]["active"] is False
        assert controller.metrics.registry.get_sample_value("hotswap_reconciles_total", {"result": "ok"}) == 1
    finally:
        await controller.stop_watches()


async def test_jobset_label_selector_limits_what_is_considered(
    failed_cluster: FakeApiServer, make_client: ClientFactory
) -> None:
    api = failed_cluster
    config = CONFIG.model_copy(update={"label_selector": "team=ml"})
    controller = Controller(config, await make_client("reconciler"), identity="reconciler")
    controller.start_watches()
    try:
        await eventually(controller.caches_ready)
        # Neither JobSet carries team=ml: nothing is a preemptor, nothing is held (the failed slice is still
        # quarantined: slice health does not depend on which JobSets are considered).
        assert controller.informers["jobsets"][0].cache == {}
        outcomes = await controller.reconcile_once()
        applied = [o.action for o in outcomes if o.result is Result.APPLIED]
        assert applied and all(isinstance(a, TaintNode) for a in applied)
        assert api.requests_for("list", "jobsets.jobset.x-k8s.io")[-1].query["labelSelector"] == "team=ml"
    finally:
        await controller.stop_watches()


async def test_held_workload_outside_the_configured_namespaces_is_released(
    api: FakeApiServer, make_client: ClientFactory
) -> None:
    """`namespaces` shrank after `old/low` was held. Its JobSet is now outside the view, so no release
    rule (capacity, preemptor gone, maxHold) ever applied to it; the reconciler must still give it back."""
    base_cluster(api)
    js = jobset("low", 1, "p10")
    js["metadata"]["namespace"] = "old"
    js = api.put(JOBSETS, js)
    held = workload(js, 10)
    held["spec"]["active"] = False
    held["metadata"]["annotations"] = {
        KEYS.held_by: f"{NS}/high/uid-high/0",
        KEYS.op_id: "op-1",
        KEYS.held_since: "2026-09-01T12:00:00Z",
    }
    api.put(WORKLOADS, held)
    config = CONFIG.model_copy(update={"namespaces": (NS,)})
    controller = Controller(config, await make_client("reconciler"), identity="reconciler")
    controller.start_watches()
    try:
        await eventually(controller.caches_ready)
        await caught_up(api, controller)
        outcomes = await controller.reconcile_once()
        assert [(o.action.workload.key, o.result) for o in outcomes] == [("old/jobset-low", Result.APPLIED)]  # type: ignore[union-attr]
        stored = api.get(WORKLOADS, "jobset-low", "old")
        assert stored is not None and stored["spec"]["active"] is True
        assert KEYS.held_by not in stored["metadata"]["annotations"]
        assert api.get(JOBSETS, "low", "old") is not None  # the JobSet itself is never touched
    finally:
        await controller.stop_watches()


async def test_dry_run_pass_log_and_metrics_say_why_a_jobset_is_not_considered(
    api: FakeApiServer, make_client: ClientFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """Also: a JobSet without the exclusive-topology annotation is never a victim or preemptor; the
    pass log (in --dry-run too) and the metrics say so instead of leaving the operator guessing."""
    base_cluster(api)
    add_slices(api, "v0")
    js = jobset("plain", 1, "p10")
    js["metadata"]["annotations"] = {}
    api.put(WORKLOADS, workload(api.put(JOBSETS, js), 10))
    controller = Controller(CONFIG, await make_client("reconciler"), identity="reconciler", dry_run=True)
    controller.start_watches()
    try:
        await eventually(controller.caches_ready)
        await caught_up(api, controller)
        with caplog.at_level("INFO", logger="hotswap.controller"):
            await controller.reconcile_once()
        (record,) = [r for r in caplog.records if r.getMessage() == "reconcile pass"]
        diagnostics = record.__dict__["diagnostics"]
        assert record.__dict__["dry_run"] is True
        assert 0 < record.__dict__["seconds"] < 60  # the pass's own duration, for a log reader's percentiles
        ((reason, count, examples),) = diagnostics["exclusions"]
        assert "exclusive-topology" in reason and count == 1 and examples == (f"{NS}/plain",)
        sample = controller.metrics.registry.get_sample_value("hotswap_excluded", {"reason": reason})
        assert sample == 1
    finally:
        await controller.stop_watches()


async def test_a_pass_plans_with_cyclic_gc_deferred_and_turns_it_back_on(
    failed_cluster: FakeApiServer, make_client: ClientFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gc

    import gke_tpu_priority.hotswap.controller as controller_module

    seen: list[bool] = []
    real_plan = controller_module.make_plan

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(gc.isenabled())
        return real_plan(*args, **kwargs)

    monkeypatch.setattr(controller_module, "make_plan", spy)
    controller = await started(make_client, failed_cluster)
    try:
        await controller.reconcile_once()
        assert seen == [False]  # no full collection can land inside the pass
        assert gc.isenabled()
    finally:
        await controller.stop_watches()


def node_taints(api: FakeApiServer, name: str) -> list[tuple[str, str]]:
    obj = api.get(NODES, name)
    assert obj is not None
    return [(t["key"], t["effect"]) for t in obj["spec"].get("taints", [])]


QUARANTINE = (KEYS.quarantine_taint, "NoSchedule")


async def test_the_failed_slice_is_quarantined_whole_and_lifted_after_its_repair(
    failed_cluster: FakeApiServer, make_client: ClientFactory
) -> None:
    api = failed_cluster
    controller = await started(make_client, api)
    try:
        await controller.reconcile_once()
        # Every host of p0, the three Ready ones too; the node lifecycle controller's and GKE's taints are kept.
        for host in range(4):
            assert QUARANTINE in node_taints(api, f"p0-{host}")
            assert ("google.com/tpu", "NoSchedule") in node_taints(api, f"p0-{host}")
        assert ("node.kubernetes.io/unreachable", "NoExecute") in node_taints(api, "p0-0")
        for name in ("p1-0", "v0-0"):
            assert QUARANTINE not in node_taints(api, name)
        node_writes = [w for w in api.writes("reconciler") if w.resource == NODES]
        assert len(node_writes) == 4
        assert all(w.body["metadata"]["resourceVersion"] for w in node_writes)
        assert controller.metrics.registry.get_sample_value("hotswap_quarantined_nodes") == 4

        # The host comes back in place (not recreated): unreachable taints go, quarantine stays till the next pass.
        current = api.get(NODES, "p0-0")
        assert current is not None
        kept = [t for t in current["spec"]["taints"] if t["key"] != "node.kubernetes.io/unreachable"]
        api.patch(
            NODES,
            "p0-0",
            {
                "spec": {"taints": kept},
                "status": {"conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": ago(minutes=10)}]},
            },
        )
        await caught_up(api, controller)
        await controller.reconcile_once()
        for host in range(4):
            assert node_taints(api, f"p0-{host}") == [("google.com/tpu", "NoSchedule")]
        assert controller.metrics.registry.get_sample_value("hotswap_quarantined_nodes") == 0
    finally:
        await controller.stop_watches()


async def test_switched_off_the_reconciler_never_writes_a_node(
    failed_cluster: FakeApiServer, make_client: ClientFactory
) -> None:
    api = failed_cluster
    config = CONFIG.model_copy(update={"quarantine_unhealthy_slices": False})
    controller = await started(make_client, api, config)
    try:
        await controller.reconcile_once()
        assert [w for w in api.writes("reconciler") if w.resource == NODES] == []
        assert api.get(WORKLOADS, LOW, NS)["spec"]["active"] is False  # type: ignore[index]  # the hold still happens
    finally:
        await controller.stop_watches()
