"""Execute the planner's actions against the API, safely.

Each action is exactly one conditional write (plus, for opt-in fast-fail, a delete):

* a hold is ONE merge patch of the victim Workload that sets the hold annotations AND
  ``spec.active=false``; a release is ONE merge patch that removes them AND sets ``spec.active=true``;
  so no observer ever sees a held Workload without its annotations (invariant I5);
* every patch carries ``metadata.resourceVersion``, which the apiserver treats as a precondition
  (409 Conflict when stale). On a conflict the Workload is re-read, the action is re-checked against the
  fresh object (still the same uid, not held by another op, not being evicted by Kueue, an op record still the
  one the planner saw, not already done...), and the write is
  retried a bounded number of times; otherwise it is dropped and the next pass re-plans;
* writes go through a token bucket, and each is fenced by a leadership check right before it is sent;
* a node's quarantine taint is one merge patch of ``spec.taints`` (the list read, with only the reconciler's added or
  removed) conditional on the node's resourceVersion, re-read on a conflict.

The actuator never deletes JobSets, never touches a JobSet's ``spec.suspend`` and never writes Kueue-owned
status. Pod status and deletion are used only for opt-in fast-fail. A rung switch (``spotRungSwitch``) is
the one write to a JobSet and the one Workload deletion: a JSON patch adding one nodeSelector key to a suspended
JobSet's TPU pod templates (conditional on its uid and ``spec.suspend``), then the deletion of its held Workload,
conditional on uid and resourceVersion, which Kueue recreates from the pinned template.

Note on the patch content type: the generated ``patch_namespaced_custom_object`` picks
``application/json-patch+json`` for any body, so every call here passes ``_content_type`` explicitly.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

import aiohttp
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from gke_tpu_priority.hotswap.annotations import AnnotationKeys, OpRecord
from gke_tpu_priority.hotswap.kube.client import REQUEST_TIMEOUT
from gke_tpu_priority.hotswap.kube.events import EventRecorder
from gke_tpu_priority.hotswap.kube.ratelimit import TokenBucket
from gke_tpu_priority.hotswap.kube.resources import JOBSETS, MERGE_PATCH, WORKLOADS, merge_patch
from gke_tpu_priority.hotswap.kube.rung_pin import pin_patch
from gke_tpu_priority.hotswap.metrics import Metrics
from gke_tpu_priority.hotswap.planner.actions import (
    ClearOp,
    EndRungSwitch,
    EventReason,
    FastFailPod,
    HoldVictim,
    ObjectRef,
    PinRung,
    Plan,
    RecordOp,
    ReleaseVictim,
    StartRungSwitch,
    TaintNode,
    Write,
)

JsonObj = dict[str, Any]
JSON_PATCH = "application/json-patch+json"

log = logging.getLogger(__name__)

NODE_WRITES_PER_SECOND = 50.0
NODE_WRITE_BURST = 128
"""The quarantine taints' own token bucket: a slice has up to 64 hosts and its taints go out before the pass's
holds, so sharing `writesPerSecond` (5/s) would delay the holds by seconds; one patch per host is light."""
MIN_WRITE_TIMEOUT = 0.5
"""Less time than this left on the lease: the write is not sent at all (it could not complete in time)."""
DISRUPTION_TARGET = "DisruptionTarget"
FAST_FAIL_REASON = "HotswapFastFail"
"""Reason of a fast-failed pod's phase and of its DisruptionTarget condition (PodGC's is `DeletionByPodGC`)."""


class LeadershipLost(Exception):
    """This replica is not (or no longer) the leader: stop writing at once."""


class Result(StrEnum):
    APPLIED = "applied"
    ALREADY_DONE = "already_done"
    ABANDONED = "abandoned"
    CONFLICT = "conflict"
    GONE = "gone"
    FAILED = "failed"
    SKIPPED = "skipped"
    DRY_RUN = "dry_run"


@dataclass(frozen=True)
class Outcome:
    action: Write
    result: Result
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.result in (Result.APPLIED, Result.ALREADY_DONE, Result.DRY_RUN)


@dataclass(frozen=True)
class _Done:
    reason: str


@dataclass(frozen=True)
class _Abandon:
    reason: str


# A check looks at the current object: the merge patch to send (without resourceVersion), or a verdict.
Check = Callable[[JsonObj], "JsonObj | _Done | _Abandon"]


def action_name(action: Write) -> str:
    return {
        HoldVictim: "hold",
        ReleaseVictim: "release",
        RecordOp: "record_op",
        ClearOp: "clear_op",
        FastFailPod: "fast_fail",
        TaintNode: "taint_node",
        StartRungSwitch: "start_rung_switch",
        PinRung: "pin_rung",
        EndRungSwitch: "end_rung_switch",
    }[type(action)]


def _annotations(obj: JsonObj) -> dict[str, Any]:
    meta = obj.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, dict) else None
    return annotations if isinstance(annotations, dict) else {}


def _uid(obj: JsonObj) -> str | None:
    meta = obj.get("metadata")
    return meta.get("uid") if isinstance(meta, dict) else None


def _active(obj: JsonObj) -> bool:
    spec = obj.get("spec")
    return not (isinstance(spec, dict) and spec.get("active") is False)


def _condition_true(obj: JsonObj, kind: str) -> bool:
    status = obj.get("status")
    conditions = status.get("conditions") if isinstance(status, dict) else None
    return any(
        isinstance(c, dict) and c.get("type") == kind and c.get("status") == "True"
        for c in (conditions if isinstance(conditions, list) else [])
    )


class WorkloadChecks:
    """Pure re-checks of each Workload action against a freshly read object."""

    def __init__(self, keys: AnnotationKeys) -> None:
        self.keys = keys

    def hold(self, action: HoldVictim) -> tuple[JsonObj, Check]:
        annotations: dict[str, Any] = dict.fromkeys(action.remove_annotations) | dict(action.set_annotations)
        body: JsonObj = {"metadata": {"annotations": annotations}, "spec": {"active": False}}

        def check(current: JsonObj) -> JsonObj | _Done | _Abandon:
            annotations = _annotations(current)
            if _uid(current) != action.workload.uid:
                return _Abandon("workload was replaced (uid changed)")
            if annotations.get(self.keys.op_id) == action.op_id and not _active(current):
                return _Done("already held by this operation")
            if annotations.get(self.keys.held_by):
                return _Abandon(f"already held by operation {annotations.get(self.keys.op_id)!r}")
            if not _active(current):
                return _Abandon("already deactivated by someone else")
            if _condition_true(current, "Finished"):
                return _Abandon("workload finished")
            if not _condition_true(current, "Admitted"):
                # Holding a Workload Kueue already evicted frees nothing (I6).
                return _Abandon("workload no longer admitted")
            if _condition_true(current, "Evicted"):
                # Kueue keeps Admitted and QuotaReserved True until an evicted job has no active pods: its
                # slices are already being freed for someone else and must not be credited to this op (I6).
                return _Abandon("workload is being evicted by Kueue")
            return body

        return body, check

    def release(self, action: ReleaseVictim) -> tuple[JsonObj, Check]:
        set_annotations: dict[str, Any] = dict(action.set_annotations)
        removals: dict[str, Any] = dict.fromkeys(action.remove_annotations)
        body: JsonObj = {"metadata": {"annotations": removals | set_annotations}, "spec": {"active": True}}

        def check(current: JsonObj) -> JsonObj | _Done | _Abandon:
            annotations = _annotations(current)
            if _uid(current) != action.workload.uid:
                return _Abandon("workload was replaced (uid changed)")
            held_op = annotations.get(self.keys.op_id)
            if held_op is None and not annotations.get(self.keys.held_by):
                return _Done("no longer held")
            if (held_op or "") != action.op_id:
                return _Abandon(f"held by another operation {held_op!r}")
            return body

        return body, check

    def record_op(self, action: RecordOp) -> tuple[JsonObj, Check]:
        wanted = action.annotations()
        body: JsonObj = {"metadata": {"annotations": wanted}}

        def check(current: JsonObj) -> JsonObj | _Done | _Abandon:
            if _uid(current) != action.workload.uid:
                return _Abandon("workload was replaced (uid changed)")
            annotations = _annotations(current)
            if all(annotations.get(k) == v for k, v in wanted.items()):
                return _Done("operation already recorded")
            raw = annotations.get(action.key)
            found = OpRecord.decode(raw) if isinstance(raw, str) else None
            if found != action.seen:
                # Another pass (or replica) rewrote the record since this plan's snapshot: writing this plan's would
                # name a different victim set while the other's victims stay held. Drop it; the next pass
                # re-plans from what is recorded.
                return _Abandon(f"operation record changed since the plan (now {found.op_id if found else 'none'})")
            return body

        return body, check

    def clear_op(self, action: ClearOp) -> tuple[JsonObj, Check]:
        body: JsonObj = {"metadata": {"annotations": dict.fromkeys(action.remove_annotations)}}

        def check(current: JsonObj) -> JsonObj | _Done | _Abandon:
            if _uid(current) != action.workload.uid:
                return _Abandon("workload was replaced (uid changed)")
            annotations = _annotations(current)
            present = [k for k in action.remove_annotations if k in annotations]
            if not present:
                return _Done("operation already cleared")
            record = OpRecord.decode(str(annotations.get(self.keys.op, "")))
            if record is not None and record.op_id != action.op_id:
                return _Abandon(f"preemptor carries another operation {record.op_id!r}")
            return body

        return body, check

    def start_rung_switch(self, action: StartRungSwitch) -> tuple[JsonObj, Check]:
        body: JsonObj = {"metadata": {"annotations": dict(action.set_annotations)}, "spec": {"active": False}}

        def check(current: JsonObj) -> JsonObj | _Done | _Abandon:
            annotations = _annotations(current)
            if _uid(current) != action.workload.uid:
                return _Abandon("workload was replaced (uid changed)")
            if annotations.get(self.keys.rung_switch) == action.capacity and not _active(current):
                return _Done("rung switch already started")
            if annotations.get(self.keys.held_by):
                return _Abandon(f"held by operation {annotations.get(self.keys.op_id)!r}")
            if not _active(current):
                return _Abandon("already deactivated by someone else")
            if _condition_true(current, "Finished"):
                return _Abandon("workload finished")
            if not _condition_true(current, "Admitted") or _condition_true(current, "Evicted"):
                return _Abandon("workload no longer admitted, or being evicted by Kueue")
            return body

        return body, check

    def end_rung_switch(self, action: EndRungSwitch) -> tuple[JsonObj, Check]:
        removals: dict[str, Any] = dict.fromkeys(action.remove_annotations)
        body: JsonObj = {"metadata": {"annotations": removals}, "spec": {"active": True}}

        def check(current: JsonObj) -> JsonObj | _Done | _Abandon:
            if _uid(current) != action.workload.uid:
                return _Abandon("workload was replaced (uid changed)")
            if self.keys.rung_switch not in _annotations(current):
                return _Done("no rung switch in flight")
            return body

        return body, check


def quarantine_taints(taints: list[JsonObj], key: str, present: bool) -> list[JsonObj] | None:
    """`spec.taints` with the quarantine taint `key` (NoSchedule) added or removed; None if nothing changes.

    Every other taint is kept as read: they belong to the node lifecycle controller, GKE and the operator."""
    ours = [t for t in taints if isinstance(t, dict) and t.get("key") == key]
    if present and ours:
        return None
    if not present and not ours:
        return None
    others = [t for t in taints if not (isinstance(t, dict) and t.get("key") == key)]
    return [*others, {"key": key, "effect": "NoSchedule"}] if present else others


async def read_taint_patch(
    core: client.CoreV1Api, api: client.ApiClient, name: str, key: str, present: bool
) -> JsonObj | None:
    """Read the node and return the merge patch that adds or removes the quarantine taint `key` under the read
    resourceVersion (a merge patch replaces `spec.taints` whole, so the list sent is the one read with the
    reconciler's taint changed); None if nothing changes. Raises the API's errors (404 when the node is gone)."""
    node = await core.read_node(name, _request_timeout=REQUEST_TIMEOUT)
    taints = [api.sanitize_for_serialization(t) for t in (node.spec.taints or [])]
    body = quarantine_taints(taints, key, present)
    if body is None:
        return None
    return {"metadata": {"resourceVersion": node.metadata.resource_version}, "spec": {"taints": body}}


class Actuator:
    """Runs a plan's actions in order, then emits its events (best effort)."""

    def __init__(
        self,
        api: client.ApiClient,
        keys: AnnotationKeys,
        *,
        limiter: TokenBucket,
        recorder: EventRecorder,
        metrics: Metrics,
        is_leader: Callable[[], bool],
        dry_run: bool = False,
        fast_fail_enabled: bool = False,
        max_attempts: int = 3,
        write_timeout: Callable[[], float] = lambda: REQUEST_TIMEOUT,
        node_limiter: TokenBucket | None = None,
    ) -> None:
        self._api = api
        self._custom = client.CustomObjectsApi(api)
        self._core = client.CoreV1Api(api)
        self._checks = WorkloadChecks(keys)
        self._limiter = limiter
        self._node_limiter = node_limiter or TokenBucket(NODE_WRITES_PER_SECOND, NODE_WRITE_BURST)
        self._recorder = recorder
        self._metrics = metrics
        self._is_leader = is_leader
        self._dry_run = dry_run
        self._fast_fail_enabled = fast_fail_enabled
        self._max_attempts = max_attempts
        self._write_timeout = write_timeout

    async def execute(self, plan: Plan) -> list[Outcome]:
        """Execute ``plan``; raises :class:`LeadershipLost` as soon as a write would be unfenced.

        Once recording an operation or holding one of its victims fails, the operation's remaining holds
        are skipped (the other victims alone would not cover the deficit, I6) and its events are
        suppressed; releases are independent and always attempted. The next pass re-plans from what
        actually happened.
        """
        outcomes: list[Outcome] = []
        failed_ops: set[str] = set()
        for action in (*plan.taints, *plan.actions):
            acquiring = isinstance(action, HoldVictim | RecordOp)
            if acquiring and action.op_id in failed_ops:
                outcome = Outcome(action, Result.SKIPPED, "an earlier action of this operation failed")
            else:
                outcome = await self._execute_one(action)
            outcomes.append(outcome)
            self._metrics.writes.labels(action=action_name(action), result=outcome.result.value).inc()
            self._log(outcome)
            if acquiring and not outcome.ok:
                failed_ops.add(action.op_id)
            elif outcome.result is Result.APPLIED:
                if isinstance(action, HoldVictim):
                    self._metrics.victims.inc()
                elif isinstance(action, ReleaseVictim):
                    self._metrics.releases.labels(reason=action.reason.value).inc()
        for decision in plan.events:
            if decision.op_id in failed_ops and decision.reason not in (EventReason.BLOCKED, EventReason.ABORTED):
                continue
            await self._recorder.emit(decision)
        return outcomes

    async def _execute_one(self, action: Write) -> Outcome:
        if self._dry_run:
            return Outcome(action, Result.DRY_RUN, "dry-run: nothing written")
        if isinstance(action, HoldVictim):
            return await self._patch_workload(action, action.workload, *self._checks.hold(action))
        if isinstance(action, ReleaseVictim):
            return await self._patch_workload(action, action.workload, *self._checks.release(action))
        if isinstance(action, RecordOp):
            return await self._patch_workload(action, action.workload, *self._checks.record_op(action))
        if isinstance(action, ClearOp):
            return await self._patch_workload(action, action.workload, *self._checks.clear_op(action))
        if isinstance(action, TaintNode):
            return await self._taint_node(action)
        if isinstance(action, StartRungSwitch):
            return await self._patch_workload(action, action.workload, *self._checks.start_rung_switch(action))
        if isinstance(action, EndRungSwitch):
            return await self._patch_workload(action, action.workload, *self._checks.end_rung_switch(action))
        if isinstance(action, PinRung):
            return await self._pin_rung(action)
        return await self._fast_fail(action)

    async def _fence(self, limiter: TokenBucket | None = None) -> float:
        """Leadership is checked before and after waiting for a token: the wait can outlast a lease.

        Returns the write's deadline: the time left on the lease, at most the ordinary request timeout."""
        if not self._is_leader():
            raise LeadershipLost()
        await (limiter or self._limiter).acquire()
        timeout = self._write_timeout()
        if not self._is_leader() or timeout < MIN_WRITE_TIMEOUT:
            raise LeadershipLost()
        return timeout

    async def _get_workload(self, ref: ObjectRef) -> JsonObj:
        obj = await self._custom.get_namespaced_custom_object(
            WORKLOADS.group,
            WORKLOADS.version,
            ref.namespace,
            WORKLOADS.plural,
            ref.name,
            _request_timeout=REQUEST_TIMEOUT,
        )
        if not isinstance(obj, dict):
            raise ValueError(f"GET workload {ref.key} returned {type(obj).__name__}")
        return obj

    async def _patch_workload(self, action: Write, ref: ObjectRef, body: JsonObj, check: Check) -> Outcome:
        """Patch conditionally on the planner's resourceVersion; on 409 re-read, re-check and retry."""
        verb = f"patch_workload_{action_name(action)}"
        resource_version = ref.resource_version
        try:
            if not resource_version:
                current = await self._get_workload(ref)
                verdict = check(current)
                if not isinstance(verdict, dict):
                    return self._verdict(action, verdict)
                body, resource_version = verdict, current["metadata"]["resourceVersion"]
            for attempt in range(1, self._max_attempts + 1):
                patch = body | {"metadata": body.get("metadata", {}) | {"resourceVersion": resource_version}}
                timeout = await self._fence()
                try:
                    await merge_patch(self._custom, WORKLOADS, ref.namespace, ref.name, patch, timeout)
                    return Outcome(action, Result.APPLIED, f"attempt {attempt}")
                except ApiException as exc:
                    if exc.status != 409:
                        raise
                    self._metrics.api_error(verb, 409)
                    if attempt == self._max_attempts:
                        break
                    current = await self._get_workload(ref)
                    verdict = check(current)
                    if not isinstance(verdict, dict):
                        return self._verdict(action, verdict)
                    body, resource_version = verdict, current["metadata"]["resourceVersion"]
            return Outcome(action, Result.CONFLICT, f"still conflicting after {self._max_attempts} attempts")
        except ApiException as exc:
            self._metrics.api_error(verb, exc.status)
            if exc.status == 404:
                return Outcome(action, Result.GONE, "workload not found")
            return Outcome(action, Result.FAILED, f"HTTP {exc.status}: {str(exc.reason)[:200]}")
        except (TimeoutError, aiohttp.ClientError, OSError, ValueError, KeyError, TypeError) as exc:
            self._metrics.api_error(verb, None)
            return Outcome(action, Result.FAILED, f"{type(exc).__name__}: {exc}"[:300])

    @staticmethod
    def _verdict(action: Write, verdict: _Done | _Abandon) -> Outcome:
        if isinstance(verdict, _Done):
            return Outcome(action, Result.ALREADY_DONE, verdict.reason)
        return Outcome(action, Result.ABANDONED, verdict.reason)

    async def _taint_node(self, action: TaintNode) -> Outcome:
        """Add or remove the quarantine taint: read, change only that taint, write under the read resourceVersion.

        A merge patch replaces `spec.taints` whole, so the list sent is the one read with the taint added or removed;
        on a conflict (the node lifecycle controller or GKE changed taints meanwhile) it is read again."""
        ref = action.node
        try:
            for attempt in range(1, self._max_attempts + 1):
                patch = await read_taint_patch(self._core, self._api, ref.name, action.key, action.present)
                if patch is None:
                    return Outcome(action, Result.ALREADY_DONE, "taint already " + ("on" if action.present else "off"))
                timeout = await self._fence(self._node_limiter)
                try:
                    await self._core.patch_node(
                        ref.name,
                        patch,
                        _content_type=MERGE_PATCH,  # type: ignore[call-arg]  # accepted at runtime, missing in .pyi
                        _request_timeout=timeout,
                    )
                    return Outcome(action, Result.APPLIED, f"attempt {attempt}")
                except ApiException as exc:
                    if exc.status != 409:
                        raise
                    self._metrics.api_error("patch_node_taint", 409)
            return Outcome(action, Result.CONFLICT, f"still conflicting after {self._max_attempts} attempts")
        except ApiException as exc:
            self._metrics.api_error("patch_node_taint", exc.status)
            if exc.status == 404:
                return Outcome(action, Result.GONE, "node not found")
            return Outcome(action, Result.FAILED, f"HTTP {exc.status}: {str(exc.reason)[:200]}")
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            self._metrics.api_error("patch_node_taint", None)
            return Outcome(action, Result.FAILED, f"{type(exc).__name__}: {exc}"[:300])

    async def _pin_rung(self, action: PinRung) -> Outcome:
        """Pin the suspended JobSet's TPU pod templates, then delete its held Workload for Kueue to recreate.

        Both steps re-read what they change and are conditional on it: the Workload must still be the held one of
        this switch (same uid, inactive, the reconciler's annotation), the JobSet the same and suspended. A pin
        already in place is not sent again, so a pass that finds the Workload still there after a lost delete just
        deletes it."""
        wl_ref, js_ref = action.workload, action.jobset
        keys = self._checks.keys
        try:
            workload = await self._get_workload(wl_ref)
            if _uid(workload) != wl_ref.uid:
                return Outcome(action, Result.ABANDONED, "workload was replaced (uid changed)")
            if _active(workload) or _annotations(workload).get(keys.rung_switch) != action.capacity:
                return Outcome(action, Result.ABANDONED, "the workload is no longer held for this rung switch")
            jobset = await self._custom.get_namespaced_custom_object(
                JOBSETS.group, JOBSETS.version, js_ref.namespace, JOBSETS.plural, js_ref.name,
                _request_timeout=REQUEST_TIMEOUT,
            )  # fmt: skip
            if not isinstance(jobset, dict) or _uid(jobset) != js_ref.uid:
                return Outcome(action, Result.ABANDONED, "JobSet was replaced (uid changed)")
            ops = pin_patch(jobset, js_ref.uid, action.replicated_jobs, action.label, action.capacity)
            if isinstance(ops, str):
                return Outcome(action, Result.ABANDONED, ops)
            if ops:
                timeout = await self._fence()
                await self._custom.patch_namespaced_custom_object(
                    JOBSETS.group, JOBSETS.version, js_ref.namespace, JOBSETS.plural, js_ref.name, ops,
                    _content_type=JSON_PATCH,  # type: ignore[call-arg]  # accepted at runtime, missing in .pyi
                    _request_timeout=timeout,
                )  # fmt: skip
            timeout = await self._fence()
            meta = workload["metadata"]
            await self._custom.delete_namespaced_custom_object(
                WORKLOADS.group, WORKLOADS.version, wl_ref.namespace, WORKLOADS.plural, wl_ref.name,
                body=client.V1DeleteOptions(
                    preconditions=client.V1Preconditions(uid=wl_ref.uid, resource_version=meta["resourceVersion"])
                ),
                _request_timeout=timeout,
            )  # fmt: skip
            return Outcome(action, Result.APPLIED, "pinned" if ops else "already pinned")
        except ApiException as exc:
            self._metrics.api_error("pin_rung", exc.status)
            if exc.status == 404:
                return Outcome(action, Result.GONE, "workload or JobSet not found")
            if exc.status in (409, 422):
                return Outcome(action, Result.CONFLICT, f"HTTP {exc.status}: changed since read; next pass re-plans")
            return Outcome(action, Result.FAILED, f"HTTP {exc.status}: {str(exc.reason)[:200]}")
        except (TimeoutError, aiohttp.ClientError, OSError, ValueError, KeyError, TypeError) as exc:
            self._metrics.api_error("pin_rung", None)
            return Outcome(action, Result.FAILED, f"{type(exc).__name__}: {exc}"[:300])

    async def _fast_fail(self, action: FastFailPod) -> Outcome:
        """Mark the pod Failed, then delete it with grace 0, guarded by its uid (never a replacement pod)."""
        if not self._fast_fail_enabled:
            return Outcome(action, Result.SKIPPED, "fast-fail is disabled in the configuration")
        ref = action.pod
        try:
            current = await self._core.read_namespaced_pod(ref.name, ref.namespace, _request_timeout=REQUEST_TIMEOUT)
            if current.metadata.uid != ref.uid:
                return Outcome(action, Result.ABANDONED, "pod was replaced (uid changed)")
            if current.spec.node_name != action.node_name:
                return Outcome(action, Result.ABANDONED, "pod is not on the unreachable node")
            if current.status is None or current.status.phase not in ("Failed", "Succeeded"):
                message = f"node {action.node_name} unreachable; failed by hotswap (op {action.op_id})"
                timeout = await self._fence()
                await self._core.patch_namespaced_pod_status(
                    ref.name,
                    ref.namespace,
                    {
                        "metadata": {"resourceVersion": current.metadata.resource_version},
                        "status": {
                            "phase": "Failed",
                            "reason": FAST_FAIL_REASON,
                            "message": message,
                            "conditions": self._with_disruption_target(current, message),
                        },
                    },
                    _content_type=MERGE_PATCH,  # type: ignore[call-arg]  # accepted at runtime, missing in .pyi
                    _request_timeout=timeout,
                )
            timeout = await self._fence()
            await self._core.delete_namespaced_pod(
                ref.name,
                ref.namespace,
                grace_period_seconds=0,
                body=client.V1DeleteOptions(grace_period_seconds=0, preconditions=client.V1Preconditions(uid=ref.uid)),
                _request_timeout=timeout,
            )
            return Outcome(action, Result.APPLIED)
        except ApiException as exc:
            self._metrics.api_error("fast_fail_pod", exc.status)
            if exc.status == 404:
                return Outcome(action, Result.GONE, "pod already gone")
            return Outcome(action, Result.FAILED, f"HTTP {exc.status}: {str(exc.reason)[:200]}")
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            self._metrics.api_error("fast_fail_pod", None)
            return Outcome(action, Result.FAILED, f"{type(exc).__name__}: {exc}"[:300])

    def _with_disruption_target(self, pod: client.V1Pod, message: str) -> list[JsonObj]:
        """The pod's conditions plus `DisruptionTarget=True`, as the pod garbage collector sets it.

        Without it the Job's pod failure policy (`FailJob onPodConditions DisruptionTarget`) does not match, the
        Job fails with `BackoffLimitExceeded` instead of `PodFailurePolicy`, the JobSet's infrastructure rule
        does not apply and each fast-fail counts against `maxRestarts`. The whole list is sent (a merge patch
        replaces lists) under the read resourceVersion, so no condition written meanwhile is lost.
        """
        existing = (pod.status.conditions if pod.status is not None else None) or []
        kept = [
            self._api.sanitize_for_serialization(c) for c in existing if getattr(c, "type", None) != DISRUPTION_TARGET
        ]
        return [
            *kept,
            {
                "type": DISRUPTION_TARGET,
                "status": "True",
                "reason": FAST_FAIL_REASON,
                "message": message,
                "lastTransitionTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            },
        ]

    @staticmethod
    def _log(outcome: Outcome) -> None:
        action = outcome.action
        if isinstance(action, FastFailPod):
            target = action.pod
        elif isinstance(action, TaintNode):
            target = action.node
        else:
            target = action.workload
        level = logging.INFO if outcome.ok or outcome.result is Result.SKIPPED else logging.WARNING
        log.log(
            level,
            "action %s",
            outcome.result.value,
            extra={
                "action": action_name(action),
                "object": f"{target.kind}/{target.key}",
                "op_id": action.op_id,
                "result": outcome.result.value,
                "detail": outcome.detail,
            },
        )
