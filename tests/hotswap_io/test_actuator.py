"""Actuator against the fake API server: one conditional write per action, re-checks, errors, fencing."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes_asyncio import client

from gke_tpu_priority.components.workloads.jobset import TpuJobSetSpec, tpu_jobset
from gke_tpu_priority.hotswap.annotations import AnnotationKeys, OpRecord
from gke_tpu_priority.hotswap.kube.actuator import Actuator, LeadershipLost, Result
from gke_tpu_priority.hotswap.kube.events import EventRecorder
from gke_tpu_priority.hotswap.kube.ratelimit import TokenBucket
from gke_tpu_priority.hotswap.metrics import Metrics
from gke_tpu_priority.hotswap.planner.actions import (
    Action,
    ClearOp,
    Decision,
    EventReason,
    FastFailPod,
    HoldVictim,
    ObjectRef,
    Plan,
    RecordOp,
    ReleaseReason,
    ReleaseVictim,
)
from testkit.apiserver import FakeApiServer, Fault, merge_patch
from tests.support.failure_policy import JOB_REASON_POD_FAILURE_POLICY, job_failure_reason, jobset_action

from .cluster import NS, PODS, WORKLOADS
from .conftest import ClientFactory

pytestmark = pytest.mark.timeout(20)

KEYS = AnnotationKeys("hotswap.example.com")
NOW = datetime(2026, 9, 1, 12, tzinfo=UTC)


def seed_workload(api: FakeApiServer, name: str, annotations: dict[str, str] | None = None, active: bool = True) -> Any:
    return api.put(
        WORKLOADS,
        {
            "metadata": {"name": name, "namespace": NS, "annotations": annotations or {}},
            "spec": {"active": active, "queueName": "lq", "priority": 10},
            "status": {"conditions": [{"type": "Admitted", "status": "True"}]},
        },
    )


def ref(obj: Any, kind: str = "Workload") -> ObjectRef:
    meta = obj["metadata"]
    return ObjectRef(kind, meta["namespace"], meta["name"], meta["uid"], meta["resourceVersion"])


def hold(obj: Any, op: str = "op-1") -> HoldVictim:
    return HoldVictim(
        workload=ref(obj),
        op_id=op,
        preemptor=ObjectRef("Workload", NS, "high", "uid-high"),
        set_annotations={
            KEYS.held_by: f"{NS}/high/uid-high/0",
            KEYS.op_id: op,
            KEYS.held_since: "2026-09-01T12:00:00Z",
        },
    )


def release(obj: Any, op: str = "op-1") -> ReleaseVictim:
    return ReleaseVictim(
        workload=ref(obj),
        op_id=op,
        reason=ReleaseReason.CAPACITY,
        remove_annotations=KEYS.victim_hold_keys(),
        set_annotations={},
    )


def make_actuator(
    api_client: client.ApiClient,
    *,
    leader: Callable[[], bool] = lambda: True,
    dry_run: bool = False,
    fast_fail: bool = False,
    metrics: Metrics | None = None,
) -> Actuator:
    metrics = metrics or Metrics()
    return Actuator(
        api_client,
        KEYS,
        limiter=TokenBucket(1000, 1000),
        recorder=EventRecorder(api_client, "test", metrics, dry_run=dry_run),
        metrics=metrics,
        is_leader=leader,
        dry_run=dry_run,
        fast_fail_enabled=fast_fail,
    )


def plan_of(*actions: Action, events: tuple[Decision, ...] = ()) -> Plan:
    return Plan(now=NOW, actions=actions, events=events)


async def test_hold_is_one_merge_patch_with_resource_version_and_active_false(
    api: FakeApiServer, make_client: ClientFactory
) -> None:
    low = seed_workload(api, "low")
    actuator = make_actuator(await make_client("r"))
    (outcome,) = await actuator.execute(plan_of(hold(low)))
    assert outcome.result is Result.APPLIED
    (write,) = api.writes("r")
    assert write.method == "PATCH" and write.content_type.startswith("application/merge-patch+json")
    assert write.body["metadata"]["resourceVersion"] == low["metadata"]["resourceVersion"]
    assert write.body["spec"] == {"active": False}
    stored = api.get(WORKLOADS, "low", NS)
    assert stored is not None and stored["spec"]["active"] is False
    assert stored["metadata"]["annotations"][KEYS.op_id] == "op-1"
    # Kueue-owned status untouched.
    assert stored["status"] == low["status"]


async def test_hold_of_a_taken_over_preemptor_removes_its_op_in_the_same_write(
    api: FakeApiServer, make_client: ClientFactory
) -> None:
    medium = seed_workload(api, "medium", {KEYS.op: "id=op-m;attempt=0;slices=s;victims="})
    action = hold(medium)
    action = HoldVictim(action.workload, action.op_id, action.preemptor, action.set_annotations, (KEYS.op,))
    actuator = make_actuator(await make_client("r"))
    (outcome,) = await actuator.execute(plan_of(action))
    assert outcome.result is Result.APPLIED
    (write,) = api.writes("r")
    assert write.body["metadata"]["annotations"][KEYS.op] is None
    stored = api.get(WORKLOADS, "medium", NS)
    assert stored is not None and stored["spec"]["active"] is False
    assert KEYS.op not in stored["metadata"]["annotations"]
    assert stored["metadata"]["annotations"][KEYS.op_id] == "op-1"


async def test_release_is_one_write_removing_annotations_and_reactivating(
    api: FakeApiServer, make_client: ClientFactory
) -> None:
    held = seed_workload(
        api, "low", {KEYS.held_by: "x", KEYS.op_id: "op-1", KEYS.held_since: "t", KEYS.hold_count: "1"}, active=False
    )
    actuator = make_actuator(await make_client("r"))
    (outcome,) = await actuator.execute(plan_of(release(held)))
    assert outcome.result is Result.APPLIED
    assert len(api.writes("r")) == 1
    stored = api.get(WORKLOADS, "low", NS)
    assert stored is not None and stored["spec"]["active"] is True
    assert stored["metadata"]["annotations"] == {KEYS.hold_count: "1"}


async def test_release_after_conflict_of_an_already_released_workload_is_a_noop(
    api: FakeApiServer, make_client: ClientFactory
) -> None:
    held = seed_workload(api, "low", {KEYS.held_by: "x", KEYS.op_id: "op-1"}, active=False)
    # Someone (e.g. release-all) released it after the reconciler's snapshot.
    api.patch(
        WORKLOADS,
        "low",
        {"metadata": {"annotations": {KEYS.held_by: None, KEYS.op_id: None}}, "spec": {"active": True}},
        NS,
    )
    actuator = make_actuator(await make_client("r"))
    (outcome,) = await actuator.execute(plan_of(release(held)))
    assert outcome.result is Result.ALREADY_DONE
    assert api.writes("r") == []
    assert [r.status for r in api.requests_for("patch", WORKLOADS) if r.identity == "r"] == [409]


async def test_hold_of_a_workload_held_by_another_op_is_abandoned(
    api: FakeApiServer, make_client: ClientFactory
) -> None:
    low = seed_workload(api, "low")
    api.patch(
        WORKLOADS,
        "low",
        {"metadata": {"annotations": {KEYS.held_by: "y", KEYS.op_id: "op-other"}}, "spec": {"active": False}},
        NS,
    )
    actuator = make_actuator(await make_client("r"))
    (outcome,) = await actuator.execute(plan_of(hold(low)))
    assert outcome.result is Result.ABANDONED
    assert api.get(WORKLOADS, "low", NS)["metadata"]["annotations"][KEYS.op_id] == "op-other"  # type: ignore[index]


async def test_persistent_conflicts_are_bounded(api: FakeApiServer, make_client: ClientFactory) -> None:
    low = seed_workload(api, "low")
    api.inject(Fault(verb="patch", resource=WORKLOADS, status=409, times=None))
    actuator = make_actuator(await make_client("r"))
    (outcome,) = await actuator.execute(plan_of(hold(low)))
    assert outcome.result is Result.CONFLICT
    assert len(api.requests_for("patch", WORKLOADS)) == 3


@pytest.mark.parametrize(("status", "result"), [(403, Result.FAILED), (404, Result.GONE), (503, Result.FAILED)])
async def test_errors_are_not_retried_in_a_tight_loop(
    api: FakeApiServer, make_client: ClientFactory, status: int, result: Result
) -> None:
    low = seed_workload(api, "low")
    other = seed_workload(api, "other")
    api.inject(Fault(verb="patch", resource=WORKLOADS, name="low", status=status, times=None))
    metrics = Metrics()
    actuator = make_actuator(await make_client("r"), metrics=metrics)
    outcomes = await actuator.execute(plan_of(hold(low), hold(other, op="op-2")))
    assert [o.result for o in outcomes] == [result, Result.APPLIED]
    assert len([r for r in api.requests_for("patch", WORKLOADS) if r.name == "low"]) == 1
    assert (
        metrics.registry.get_sample_value(
            "hotswap_api_errors_total", {"verb": "patch_workload_hold", "code": str(status)}
        )
        == 1
    )


async def test_failed_hold_skips_the_rest_of_its_operation_and_its_events(
    api: FakeApiServer, make_client: ClientFactory
) -> None:
    high = seed_workload(api, "high")
    v1, v2 = seed_workload(api, "v1"), seed_workload(api, "v2")
    api.inject(Fault(verb="patch", resource=WORKLOADS, name="v1", status=500, times=1))
    actuator = make_actuator(await make_client("r"))
    record = RecordOp(ref(high), OpRecord("op-1", 0, ("v",), (f"{NS}/v1", f"{NS}/v2")), KEYS.op)
    event = Decision(EventReason.PLANNED, ObjectRef("JobSet", NS, "high", "js-uid"), "planned", "op-1")
    outcomes = await actuator.execute(plan_of(record, hold(v1), hold(v2), events=(event,)))
    assert [o.result for o in outcomes] == [Result.APPLIED, Result.FAILED, Result.SKIPPED]
    assert api.get(WORKLOADS, "v2", NS)["spec"]["active"] is True  # type: ignore[index]
    assert api.list_objects("events.events.k8s.io") == []


async def test_not_leader_raises_before_any_write(api: FakeApiServer, make_client: ClientFactory) -> None:
    low = seed_workload(api, "low")
    actuator = make_actuator(await make_client("r"), leader=lambda: False)
    with pytest.raises(LeadershipLost):
        await actuator.execute(plan_of(hold(low)))
    assert api.writes("r") == []


async def test_dry_run_writes_nothing_not_even_events(api: FakeApiServer, make_client: ClientFactory) -> None:
    low = seed_workload(api, "low")
    actuator = make_actuator(await make_client("r"), dry_run=True)
    event = Decision(EventReason.VICTIM_HELD, ObjectRef("JobSet", NS, "low", "u"), "held", "op-1")
    (outcome,) = await actuator.execute(plan_of(hold(low), events=(event,)))
    assert outcome.result is Result.DRY_RUN
    assert [r for r in api.requests if r.identity == "r"] == []


async def test_events_use_events_k8s_io_v1_with_the_involved_object(
    api: FakeApiServer, make_client: ClientFactory
) -> None:
    actuator = make_actuator(await make_client("r"))
    event = Decision(EventReason.BLOCKED, ObjectRef("JobSet", NS, "high", "js-uid"), "no victim", "")
    await actuator.execute(plan_of(events=(event,)))
    (stored,) = api.list_objects("events.events.k8s.io")
    assert stored["reason"] == "HotswapBlocked" and stored["note"] == "no victim"
    assert stored["regarding"] == {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "name": "high",
        "namespace": NS,
        "uid": "js-uid",
    }
    assert stored["reportingController"] and stored["reportingInstance"] == "test"
    assert stored["eventTime"].endswith("Z") and len(stored["eventTime"]) == 27


async def test_event_failure_never_fails_the_pass(api: FakeApiServer, make_client: ClientFactory) -> None:
    low = seed_workload(api, "low")
    api.inject(Fault(verb="create", resource="events.events.k8s.io", status=403, times=None))
    actuator = make_actuator(await make_client("r"))
    event = Decision(EventReason.VICTIM_HELD, ObjectRef("JobSet", NS, "low", "u"), "held", "op-1")
    (outcome,) = await actuator.execute(plan_of(hold(low), events=(event,)))
    assert outcome.result is Result.APPLIED


async def test_clear_op_only_removes_our_operation(api: FakeApiServer, make_client: ClientFactory) -> None:
    high = seed_workload(api, "high", {KEYS.op: "id=op-1;attempt=0;slices=a;victims=ml/v"})
    actuator = make_actuator(await make_client("r"))
    (outcome,) = await actuator.execute(plan_of(ClearOp(ref(high), "op-1", (KEYS.op,))))
    assert outcome.result is Result.APPLIED
    assert KEYS.op not in api.get(WORKLOADS, "high", NS)["metadata"]["annotations"]  # type: ignore[index]


def seed_pod(api: FakeApiServer, node: str) -> Any:
    return api.put(
        PODS,
        {
            "metadata": {"name": "h-0", "namespace": NS, "labels": {"jobset.sigs.k8s.io/jobset-name": "high"}},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]},
            "status": {"phase": "Running"},
        },
    )


async def test_fast_fail_marks_failed_then_deletes_with_uid_precondition(
    api: FakeApiServer, make_client: ClientFactory
) -> None:
    pod = seed_pod(api, "p0-0")
    actuator = make_actuator(await make_client("r"), fast_fail=True)
    (outcome,) = await actuator.execute(plan_of(FastFailPod(ref(pod, "Pod"), "op-1", "p0-0")))
    assert outcome.result is Result.APPLIED
    status_patch, delete = api.writes("r")
    assert status_patch.subresource == "status" and status_patch.body["status"]["phase"] == "Failed"
    assert delete.method == "DELETE" and delete.query["gracePeriodSeconds"] == "0"
    assert delete.body["preconditions"]["uid"] == pod["metadata"]["uid"]
    assert api.get(PODS, "h-0", NS) is None


async def test_fast_fail_marks_the_pod_as_the_pod_gc_does_so_the_restart_budget_is_not_spent(
    api: FakeApiServer, make_client: ClientFactory
) -> None:
    """The Job's pod failure policy and the JobSet's infrastructure rule (as the package renders them) must see
    a fast-failed pod as a disruption: RestartJobSetAndIgnoreMaxRestarts, not the default RestartJobSet."""
    jobset = tpu_jobset(
        TpuJobSetSpec(name="high", namespace=NS, queue="lq", priority="high", topology="4x4", image="i", fast_fail=True)
    )
    (replicated,) = jobset["spec"]["replicatedJobs"]
    pod = api.put(
        PODS,
        {
            "metadata": {"name": "h-0", "namespace": NS, "labels": {"jobset.sigs.k8s.io/jobset-name": "high"}},
            "spec": {"nodeName": "p0-0", "containers": [{"name": "c", "image": "i"}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
        },
    )
    actuator = make_actuator(await make_client("r"), fast_fail=True)
    (outcome,) = await actuator.execute(plan_of(FastFailPod(ref(pod, "Pod"), "op-1", "p0-0")))
    assert outcome.result is Result.APPLIED
    status_patch = api.writes("r")[0]
    failed = merge_patch(pod, status_patch.body)
    conditions = {c["type"]: c for c in failed["status"]["conditions"]}
    assert conditions["Ready"]["status"] == "True"  # the pod's other conditions survive the patch
    assert (conditions["DisruptionTarget"]["status"], conditions["DisruptionTarget"]["reason"]) == (
        "True",
        "HotswapFastFail",
    )
    # The same pod failed without the condition fails its Job on the backoff limit: a counted JobSet restart.
    bare = merge_patch(failed, {"status": {"conditions": [conditions["Ready"]]}})
    bare_reason = job_failure_reason(replicated["template"]["spec"], bare)
    assert bare_reason == "BackoffLimitExceeded"
    assert jobset_action(jobset, replicated["name"], bare_reason) == "RestartJobSet"
    reason = job_failure_reason(replicated["template"]["spec"], failed)
    assert reason == JOB_REASON_POD_FAILURE_POLICY
    assert jobset_action(jobset, replicated["name"], reason) == "RestartJobSetAndIgnoreMaxRestarts"


async def test_fast_fail_is_refused_unless_enabled_or_pod_moved(api: FakeApiServer, make_client: ClientFactory) -> None:
    pod = seed_pod(api, "p0-0")
    disabled = make_actuator(await make_client("r"))
    (outcome,) = await disabled.execute(plan_of(FastFailPod(ref(pod, "Pod"), "op-1", "p0-0")))
    assert outcome.result is Result.SKIPPED
    enabled = make_actuator(await make_client("r"), fast_fail=True)
    (outcome,) = await enabled.execute(plan_of(FastFailPod(ref(pod, "Pod"), "op-1", "other-node")))
    assert outcome.result is Result.ABANDONED
    assert api.writes("r") == []


async def test_hold_of_a_workload_kueue_evicted_meanwhile_is_abandoned(
    api: FakeApiServer, make_client: ClientFactory
) -> None:
    low = seed_workload(api, "low")
    # Kueue evicted it after the snapshot: the planner's resourceVersion is stale (a real 409, no injection).
    api.patch(WORKLOADS, "low", {"status": {"conditions": [{"type": "Admitted", "status": "False"}]}}, NS)
    actuator = make_actuator(await make_client("r"))
    (outcome,) = await actuator.execute(plan_of(hold(low)))
    assert (outcome.result, outcome.detail) == (Result.ABANDONED, "workload no longer admitted")
    assert api.writes("r") == []


async def test_hold_of_a_workload_kueue_is_evicting_is_abandoned(
    api: FakeApiServer, make_client: ClientFactory
) -> None:
    """Kueue keeps Admitted and QuotaReserved True while an evicted Workload still has active pods:
    Evicted=True alone says Kueue is already preempting it, so its slices must not be credited to an op."""
    low = seed_workload(api, "low")
    api.patch(
        WORKLOADS,
        "low",
        {
            "status": {
                "conditions": [
                    {"type": "Admitted", "status": "True"},
                    {"type": "QuotaReserved", "status": "True"},
                    {"type": "Evicted", "status": "True", "reason": "Preempted"},
                ]
            }
        },
        NS,
    )
    actuator = make_actuator(await make_client("r"))
    (outcome,) = await actuator.execute(plan_of(hold(low)))
    assert (outcome.result, outcome.detail) == (Result.ABANDONED, "workload is being evicted by Kueue")
    assert api.writes("r") == []
    assert api.get(WORKLOADS, "low", NS)["spec"]["active"] is True  # type: ignore[index]


def record(obj: Any, op: OpRecord, seen: OpRecord | None) -> RecordOp:
    return RecordOp(ref(obj), op, KEYS.op, seen=seen)


SEEN = OpRecord("op-1", 0, ("s1",), (f"{NS}/v",), since=NOW)


async def test_record_op_after_a_conflict_never_overwrites_a_record_another_pass_wrote(
    api: FakeApiServer, make_client: ClientFactory
) -> None:
    """The planner saw record `SEEN`; another pass (stale cache, or a replica) wrote a different
    victim set meanwhile. Writing this pass's record over it would leave both passes' victims held."""
    high = seed_workload(api, "high", {KEYS.op: SEEN.encode()})
    other = OpRecord("op-1", 0, ("s1", "s2"), (f"{NS}/v", f"{NS}/w"), since=NOW)
    api.patch(WORKLOADS, "high", {"metadata": {"annotations": {KEYS.op: other.encode()}}}, NS)
    ours = OpRecord("op-1", 0, ("s1", "s3"), (f"{NS}/u", f"{NS}/v"), since=NOW)
    actuator = make_actuator(await make_client("r"))
    (outcome,) = await actuator.execute(plan_of(record(high, ours, SEEN)))
    assert outcome.result is Result.ABANDONED
    assert outcome.detail == "operation record changed since the plan (now op-1)"
    assert api.writes("r") == []
    assert api.get(WORKLOADS, "high", NS)["metadata"]["annotations"][KEYS.op] == other.encode()  # type: ignore[index]


async def test_record_op_after_a_conflict_writes_while_the_record_is_the_one_seen(
    api: FakeApiServer, make_client: ClientFactory
) -> None:
    high = seed_workload(api, "high", {KEYS.op: SEEN.encode()})
    # Kueue touched the status meanwhile: a 409 that says nothing about the record.
    api.patch(WORKLOADS, "high", {"status": {"conditions": [{"type": "Admitted", "status": "True"}]}}, NS)
    ours = OpRecord("op-1", 0, ("s1", "s3"), (f"{NS}/u", f"{NS}/v"), since=NOW)
    actuator = make_actuator(await make_client("r"))
    (outcome,) = await actuator.execute(plan_of(record(high, ours, SEEN)))
    assert (outcome.result, outcome.detail) == (Result.APPLIED, "attempt 2")
    (write,) = api.writes("r")
    assert write.body["metadata"]["annotations"] == {KEYS.op: ours.encode()}
    assert api.get(WORKLOADS, "high", NS)["metadata"]["annotations"][KEYS.op] == ours.encode()  # type: ignore[index]


async def test_record_op_of_a_new_op_is_dropped_when_one_appeared_meanwhile(
    api: FakeApiServer, make_client: ClientFactory
) -> None:
    high = seed_workload(api, "high")
    api.patch(WORKLOADS, "high", {"metadata": {"annotations": {KEYS.op: SEEN.encode()}}}, NS)
    ours = OpRecord("op-1", 0, ("s9",), (f"{NS}/z",), since=NOW)
    actuator = make_actuator(await make_client("r"))
    (outcome, skipped) = await actuator.execute(plan_of(record(high, ours, None), hold(seed_workload(api, "z"))))
    assert (outcome.result, skipped.result) == (Result.ABANDONED, Result.SKIPPED)
    assert api.writes("r") == []
