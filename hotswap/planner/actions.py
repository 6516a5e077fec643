"""What a plan asks the controller to do: writes (actions) and non-writing decisions (events).

Every write targets one Workload or Pod and carries the uid and resourceVersion the planner saw, so the
controller can make it conditional (optimistic concurrency) and drop it on a conflict; the next pass re-plans.
Op ids are deterministic so a crash-and-replan produces the same writes (I11).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from gke_tpu_priority.hotswap.annotations import OpRecord


def make_op_id(preemptor_uid: str, attempt: int) -> str:
    """Deterministic op id for one preemptor attempt."""
    digest = hashlib.sha256(f"{preemptor_uid}/{attempt}".encode()).hexdigest()
    return f"op-{digest[:16]}"


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """The object a write or event is about."""

    kind: str
    namespace: str
    name: str
    uid: str
    resource_version: str = ""
    """resourceVersion observed by the planner ("" for events or when not applicable)."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


class ReleaseReason(StrEnum):
    CAPACITY = "capacity"
    QUEUED_CAPACITY = "queued-capacity"
    """No free slice of its shape, but its ClusterQueue has queued-provisioning quota free for it: Kueue can admit
    it there onto slices GKE provisions for it alone (a capacity ladder's last rung)."""
    PREEMPTOR_GONE = "preemptor-gone"
    MAX_HOLD = "max-hold"
    OUT_OF_SCOPE = "out-of-scope"
    """The held Workload's JobSet is no longer in the reconciler's view (`namespaces` or label selector
    changed, or the JobSet is gone): whatever it holds, it must always be able to give back (I10)."""
    REACTIVATED_EXTERNALLY = "reactivated-externally"
    """Someone set `spec.active=true` on a held Workload: drop the reconciler's hold annotations, don't fight (C11)."""


@dataclass(frozen=True, slots=True)
class HoldVictim:
    """One Workload update: set the hold annotations AND `spec.active=false` together."""

    workload: ObjectRef
    op_id: str
    preemptor: ObjectRef
    set_annotations: Mapping[str, str]
    remove_annotations: tuple[str, ...] = ()
    """The victim's own op annotation when a strictly higher preemptor takes its slice over (I9): the op is
    aborted in the same write, so it is never held with an op, nor left with its op and not held."""
    fenced: bool = False
    """Held by the admission fence (a fresh admission that never ran), not to free a slice it occupies."""


@dataclass(frozen=True, slots=True)
class ReleaseVictim:
    """One Workload update: remove the hold annotations AND set `spec.active=true` together."""

    workload: ObjectRef
    op_id: str
    reason: ReleaseReason
    remove_annotations: tuple[str, ...]
    set_annotations: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RecordOp:
    """Write the preemptor's open-operation record (reserved slices, victims) to its annotation `key`.

    Typed: the record is encoded only at the I/O edge (`annotations`). `seen` is the record the planner read
    from the snapshot (None: none); on a conflict the write goes on only while the object still carries that
    record, so a pass planned on a stale cache never overwrites another pass's victim set.
    """

    workload: ObjectRef
    op: OpRecord
    key: str
    """The op annotation key (`AnnotationKeys.op` of the configured domain)."""
    seen: OpRecord | None = None

    @property
    def op_id(self) -> str:
        return self.op.op_id

    @property
    def reserved(self) -> tuple[str, ...]:
        return self.op.reserved

    @property
    def victims(self) -> tuple[str, ...]:
        return self.op.victims

    def annotations(self) -> dict[str, str]:
        """The merge-patch annotations this action writes."""
        return {self.key: self.op.encode()}


@dataclass(frozen=True, slots=True)
class ClearOp:
    """Remove the preemptor's open-operation annotation (operation done or aborted)."""

    workload: ObjectRef
    op_id: str
    remove_annotations: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class StartRungSwitch:
    """One Workload update: set the rung-switch annotations AND `spec.active=false` together. Kueue evicts the
    Workload and suspends its JobSet, whose pod templates may then change (the JobSet webhook allows nodeSelector
    edits only while suspended)."""

    workload: ObjectRef
    jobset: ObjectRef
    capacity: str
    set_annotations: Mapping[str, str]
    op_id: str = ""
    """Not part of an operation (the field every write has, for logs)."""


@dataclass(frozen=True, slots=True)
class PinRung:
    """Pin the suspended JobSet's TPU pod templates (`replicated_jobs`) to `capacity` with a nodeSelector on
    `label`, then delete its held Workload so Kueue recreates it from the pinned template: Kueue v0.19.2 keeps a
    suspended JobSet's Workload as it is when only the template's nodeSelector changes (e2e/test_rung_switch.py),
    and its flavor assigner skips every flavor whose nodeLabels contradict the nodeSelector."""

    workload: ObjectRef
    jobset: ObjectRef
    capacity: str
    label: str
    replicated_jobs: tuple[str, ...]
    op_id: str = ""


@dataclass(frozen=True, slots=True)
class EndRungSwitch:
    """Give a switch up: remove the rung-switch annotations AND set `spec.active=true` (Kueue requeues the
    Workload as it was). For a switch that cannot finish (the template already names another capacity, or
    Kueue never suspended the JobSet) or that someone else reactivated."""

    workload: ObjectRef
    remove_annotations: tuple[str, ...]
    reason: str
    op_id: str = ""


@dataclass(frozen=True, slots=True)
class FastFailPod:
    """Opt-in only: mark a preemptor pod on an unreachable node Failed and delete it with grace 0 (B.6.3)."""

    pod: ObjectRef
    op_id: str
    node_name: str


@dataclass(frozen=True, slots=True)
class TaintNode:
    """Put the quarantine taint (`key`, NoSchedule) on a node of an Unhealthy slice, or take it off (`present`
    False) once the slice is usable again or the node belongs to no slice."""

    node: ObjectRef
    key: str
    present: bool
    slice_name: str | None
    """The node's slice (node pool) when it has one."""
    op_id: str = ""
    """Not part of any operation: a slice's health alone decides."""


Action = HoldVictim | ReleaseVictim | RecordOp | ClearOp | FastFailPod | StartRungSwitch | PinRung | EndRungSwitch
"""The writes of an operation, a release or a rung switch: to Workloads, to a suspended JobSet's pod templates
(a rung switch) and, for fast-fail, pods."""
Write = Action | TaintNode
"""Anything the controller writes: an `Action` or a node's quarantine taint."""


class EventReason(StrEnum):
    PLANNED = "HotswapPlanned"
    VICTIM_HELD = "HotswapVictimHeld"
    BLOCKED = "HotswapBlocked"
    DONE = "HotswapDone"
    VICTIM_RELEASED = "HotswapVictimReleased"
    ABORTED = "HotswapAborted"
    EVICTION_SLOW = "HotswapEvictionSlow"
    RUNG_SWITCH = "HotswapRungSwitch"
    """A JobSet whose spot VMs were reclaimed is moved to its ClusterQueue's queued flex-start rung."""
    INVERSION_RESOLVED = "HotswapInversionResolved"
    """An op was opened for a JobSet whose slice lower-priority work shared (slice priority inversion)."""


class EventType(StrEnum):
    NORMAL = "Normal"
    WARNING = "Warning"


@dataclass(frozen=True, slots=True)
class Decision:
    """A Kubernetes Event to emit (no other effect). `involved` is the JobSet or Workload concerned."""

    reason: EventReason
    involved: ObjectRef
    message: str
    op_id: str = ""
    type: EventType = EventType.NORMAL


@dataclass(frozen=True, slots=True)
class Diagnostics:
    """Small numeric summary of a pass, for logs and metrics."""

    slices_total: int = 0
    slices_unhealthy: int = 0
    slices_suspect: int = 0
    slices_recovering: int = 0
    disrupted_preemptors: int = 0
    starved_preemptors: int = 0
    """Admitted JobSets whose pods waited for a node past `starvationGrace` and still lack slices no free slice
    covers: preemptors of this pass besides the infra-disrupted ones."""
    ops_open: int = 0
    ops_planned: int = 0
    ops_blocked: int = 0
    ops_waiting: int = 0
    """Infra-disrupted preemptors taking no victims yet: within `evictionDelay` of their failure (if the failed
    slices come back meanwhile, the infra evidence ends and they restart in place)."""
    ops_done: int = 0
    ops_extended_victims: int = 0
    """Victims added to open operations because they took a reserved slice (C12)."""
    ops_fenced_victims: int = 0
    """Fresh lower-priority admissions held by the admission fence before their pods could land (C12)."""
    ops_inversion_victims: int = 0
    """Lower-priority workloads held because they shared a higher-priority JobSet's slice (priority inversion)."""
    ops_aborted: int = 0
    rung_switches: int = 0
    """JobSets whose spot VMs were reclaimed that this pass started moving to the queued flex-start rung."""
    victims_held: int = 0
    victims_released: int = 0
    releases_deferred: int = 0
    """Held victims that fit free capacity but stay held: under `reclaimWithinCohort: Any` their admission could
    evict a borrowing JobSet of higher priority (released by maxHold, or once nothing higher borrows)."""
    held_workloads: int = 0
    nodes_quarantined: int = 0
    """Nodes carrying the quarantine taint once this pass's writes are applied."""
    exclusions: tuple[tuple[str, int, tuple[str, ...]], ...] = ()
    """(reason, count, up to 5 examples) for objects the snapshot silently leaves out of every decision: a TPU
    JobSet without a Workload or exclusive node-pool placement, a TPU node without slice labels, a Workload
    without an owner uid, pods running under a Workload that is not Admitted."""
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Plan:
    """Ordered writes + events. The controller executes `actions` in order; `events` are best effort."""

    now: datetime
    actions: tuple[Action, ...] = ()
    taints: tuple[TaintNode, ...] = ()
    """Node writes (the quarantine taint), executed before `actions`: a slice's health alone decides them, apart
    from any operation, so the simulator, which fails whole slices, has no use for them."""
    events: tuple[Decision, ...] = ()
    diagnostics: Diagnostics = field(default_factory=Diagnostics)
    next_wakeup: datetime | None = None
    """Earliest future instant at which a time-based rule changes the plan with no watch event (grace and
    stabilisation expiry, attribution window, maxHold, releaseSettle, fast-fail, hold window); None if none.
    Deadlines are computed on the snapshot before this plan's writes; an extra pass costs nothing."""

    @property
    def writes(self) -> int:
        return len(self.actions) + len(self.taints)
