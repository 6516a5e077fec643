"""Emit the planner's decisions as ``events.k8s.io/v1`` Events (best effort: never blocks actuation)."""

from __future__ import annotations

import logging
import uuid
from datetime import UTC, datetime

import aiohttp
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from gke_tpu_priority.hotswap.kube.client import REQUEST_TIMEOUT
from gke_tpu_priority.hotswap.kube.leader import micro_time
from gke_tpu_priority.hotswap.metrics import Metrics
from gke_tpu_priority.hotswap.planner.actions import Decision, ObjectRef

log = logging.getLogger(__name__)

CONTROLLER_NAME = "hotswap.gke-tpu-priority.io/reconciler"

_API_VERSIONS = {
    "JobSet": "jobset.x-k8s.io/v1alpha2",
    "Workload": "kueue.x-k8s.io/v1beta2",
    "Pod": "v1",
    "Node": "v1",
}
# events.k8s.io/v1 limits: note <= 1 KiB, action <= 128 characters.
_NOTE_LIMIT = 1024


def object_reference(ref: ObjectRef) -> client.V1ObjectReference:
    return client.V1ObjectReference(
        api_version=_API_VERSIONS.get(ref.kind),
        kind=ref.kind,
        namespace=ref.namespace or None,
        name=ref.name,
        uid=ref.uid or None,
    )


def build_event(
    decision: Decision, instance: str, now: datetime, op_id_key: str = "hotswap.gke-tpu-priority.io/op-id"
) -> client.EventsV1Event:
    """The Event object for one decision (its own name so repeated decisions never collide)."""
    involved = decision.involved
    return client.EventsV1Event(
        metadata=client.V1ObjectMeta(
            name=f"{involved.name}.hotswap-{uuid.uuid4().hex[:12]}",
            namespace=involved.namespace or "default",
            labels={"app.kubernetes.io/managed-by": "hotswap-reconciler"},
            annotations={op_id_key: decision.op_id} if decision.op_id else None,
        ),
        event_time=micro_time(now),
        action=decision.reason.value.removeprefix("Hotswap"),
        reason=decision.reason.value,
        note=decision.message[:_NOTE_LIMIT],
        type=decision.type.value,
        regarding=object_reference(involved),
        reporting_controller=CONTROLLER_NAME,
        reporting_instance=instance[:128],
    )


class EventRecorder:
    """Creates Events; failures are logged and counted, never raised."""

    def __init__(
        self,
        api: client.ApiClient,
        instance: str,
        metrics: Metrics,
        dry_run: bool = False,
        op_id_key: str = "hotswap.gke-tpu-priority.io/op-id",
    ) -> None:
        self._events = client.EventsV1Api(api)
        self._op_id_key = op_id_key
        self._instance = instance
        self._metrics = metrics
        self._dry_run = dry_run

    async def emit(self, decision: Decision) -> bool:
        fields = {
            "event_reason": decision.reason.value,
            "object": f"{decision.involved.kind}/{decision.involved.key}",
            "op_id": decision.op_id,
            "note": decision.message,
        }
        if self._dry_run:
            log.info("dry-run: would emit event", extra=fields)
            return False
        event = build_event(decision, self._instance, datetime.now(UTC), self._op_id_key)
        try:
            await self._events.create_namespaced_event(
                event.metadata.namespace, event, _request_timeout=REQUEST_TIMEOUT
            )
        except (TimeoutError, ApiException, aiohttp.ClientError, OSError) as exc:
            self._metrics.api_error("create_event", getattr(exc, "status", None))
            log.warning("could not emit event", extra=fields | {"error": str(exc)[:300]})
            return False
        self._metrics.events_emitted.labels(reason=decision.reason.value).inc()
        log.info("event", extra=fields)
        return True
