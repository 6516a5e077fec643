"""The claims ledger of one planning pass: what the stages have reserved, claimed, written and said so far.

The stages of `plan()` share no state but this ledger, and they change it through its named transitions only
(`claim`, `hold`, `record`, `finish`, `abort`, `block`, `wait`, `defer`, `wake_at`, `event`, `act`, ...), so each write
and the event that explains it live in one place. The victim budget (`maxVictimsPerPass`) and the pass's counters
(`summary`) are read from it too. Invariant codes (I3, I9, ...) are defined in docs/planner.md.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import TypedDict

from gke_tpu_priority.hotswap.annotations import OpRecord, format_time
from gke_tpu_priority.hotswap.model import SliceShape
from gke_tpu_priority.hotswap.planner.actions import (
    Action,
    ClearOp,
    Decision,
    EventReason,
    EventType,
    HoldVictim,
    RecordOp,
)
from gke_tpu_priority.hotswap.planner.world import Unit, World


class Held(Enum):
    """Why a victim is held, which is also the counter (and victim budget share) its hold goes to."""

    PREEMPTION = "preempted"
    """For a new (or topped-up) op of a disrupted or starved preemptor."""
    EXTENSION = "extended"
    """It took a slice reserved for an open op (C12)."""
    FENCE = "fenced"
    """A fresh admission held by the admission fence before its pods land (C12)."""
    INVERSION = "inverted"
    """It sat in a higher-priority JobSet's slice."""
    RESUMED = ""
    """A hold the op's record names but a crash stopped (C2): finished now, counted by no rule of this pass."""


class Counters(TypedDict):
    """The ledger's counters under their `Diagnostics` names."""

    ops_open: int
    ops_waiting: int
    ops_done: int
    ops_extended_victims: int
    ops_fenced_victims: int
    ops_inversion_victims: int
    ops_aborted: int
    rung_switches: int
    victims_held: int
    releases_deferred: int


@dataclass(frozen=True, slots=True)
class Blocked:
    """A disrupted preemptor nothing was done for, and what it still needs (release must not take it)."""

    unit: Unit
    needs: dict[SliceShape, int]


@dataclass(slots=True)
class Ledger:
    """Claims made by open and newly planned operations in this pass (I3)."""

    reserved: set[str] = field(default_factory=set)
    """Slices reserved for some preemptor."""
    claimed: set[str] = field(default_factory=set)
    """Workload keys that are the victim of some operation."""
    open_ops: dict[str, OpRecord] = field(default_factory=dict)
    """Preemptor JobSet uid → its open operation after this pass."""
    actions: list[Action] = field(default_factory=list)
    events: list[Decision] = field(default_factory=list)
    done: int = 0
    aborted: int = 0
    extended: int = 0
    """Victims added to open operations this pass because they took a reserved slice (C12)."""
    fenced: int = 0
    """Fresh admissions held by the admission fence this pass (C12, before their pods land)."""
    inverted: int = 0
    """Lower-priority workloads held this pass because they sat in a higher-priority JobSet's slice."""
    preempted: int = 0
    """Victims held this pass for new (or topped-up) operations of disrupted and starved preemptors."""
    deferred: int = 0
    """Capacity releases deferred because Kueue's `reclaimWithinCohort: Any` could evict higher-priority work."""
    rung_switches: int = 0
    """JobSets whose spot VMs were reclaimed that this pass started moving to the queued rung (`rungs`)."""
    waiting: int = 0
    """Preemptors that take no victims yet: their eviction delay (or starvation wait) has not run out."""
    deadlines: list[datetime] = field(default_factory=list)
    """Instants this pass's decisions change by the clock alone (e.g. an `evictionDelay` ending)."""
    contested_blocked: dict[str, Decision] = field(default_factory=dict)
    """Preemptor uid → the Blocked event of its contested inversion (`resolve_contested`), not emitted yet: an op
    taken over later in the pass may free what blocked it, so `resolve_inversions` tries it again (I11)."""
    taken_over: dict[str, str] = field(default_factory=dict)
    """Preemptor uid → why: held this pass by a strictly higher preemptor that needs its slice (I9); its op is
    aborted (the hold write removes it) and claims nothing."""

    # The victim budget ---------------------------------------------------------------------------------------

    @property
    def held(self) -> int:
        """Victims held this pass, by every rule: all of them count against `maxVictimsPerPass`."""
        return self.extended + self.fenced + self.inverted + self.preempted

    def victim_budget(self, world: World) -> int:
        """How many more victims this pass may hold (`maxVictimsPerPass` less every hold so far; may be < 0)."""
        return world.config.max_victims_per_pass - self.held

    # Claims ----------------------------------------------------------------------------------------------------

    def claim(self, preemptor_uid: str, op: OpRecord) -> None:
        """The op is open after this pass: its slices are reserved and its victims claimed (I3)."""
        self.open_ops[preemptor_uid] = op
        self.reserved.update(op.reserved)
        self.claimed.update(op.victims)

    def booked(self, uid: str) -> frozenset[str]:
        """Slices the unit's open op reserves for it: they count towards its supply."""
        op = self.open_ops.get(uid)
        return frozenset(op.reserved) if op is not None else frozenset()

    def free_slices(self, world: World) -> list[str]:
        """Usable slices with no occupant and no reservation, by name."""
        reserved = self.reserved
        return [name for name in world.idle if name not in reserved]

    # Writes and their events -----------------------------------------------------------------------------------

    def act(self, action: Action) -> None:
        """A write with no event of its own (its event, if any, is the caller's)."""
        self.actions.append(action)

    def event(self, decision: Decision) -> None:
        self.events.append(decision)

    def hold(
        self,
        world: World,
        victim: Unit,
        preemptor: Unit,
        op_id: str,
        why: str,
        kind: Held,
        pools: Iterable[str] | None = None,
    ) -> None:
        """Hold `victim` for `preemptor`'s op: the write, its VictimHeld event (`why`), its count (`kind`), and, given
        the `pools` of the preemptor's op the victim sits on, the take-over of the victim's own open op (I9)."""
        self.actions.append(hold_action(world, victim, preemptor, op_id, fenced=kind is Held.FENCE))
        if pools is not None:
            self.take_over(victim, preemptor, pools)
        self.events.append(Decision(EventReason.VICTIM_HELD, victim.jobset_ref(), why, op_id))
        if kind is Held.PREEMPTION:
            self.preempted += 1
        elif kind is Held.EXTENSION:
            self.extended += 1
        elif kind is Held.FENCE:
            self.fenced += 1
        elif kind is Held.INVERSION:
            self.inverted += 1

    def take_over(self, victim: Unit, preemptor: Unit, pools: Iterable[str]) -> None:
        """Note that `victim`, a preemptor of an open op, is held for strictly higher `preemptor` this pass: its op
        is aborted when its turn comes and claims nothing (I9)."""
        if victim.op is not None:
            where = ", ".join(sorted(pools)) or "its slice"
            self.taken_over[victim.uid] = f"higher-priority {preemptor.key} needs slice(s) {where}"

    def record(self, world: World, preemptor: Unit, op: OpRecord) -> None:
        """Write the preemptor's op record."""
        self.actions.append(record_action(world, preemptor, op))

    def rerecord(self, world: World, preemptor: Unit, op: OpRecord) -> None:
        """Write the op record, replacing one written earlier this pass for the same preemptor (one write per
        object)."""
        record = record_action(world, preemptor, op)
        for i, action in enumerate(self.actions):
            if isinstance(action, RecordOp) and action.workload.uid == record.workload.uid:
                self.actions[i] = record
                return
        self.actions.append(record)

    def clear(self, world: World, unit: Unit, op: OpRecord, reason: EventReason, message: str) -> None:
        """Remove the op record, and say why (Done or Aborted)."""
        self.actions.append(ClearOp(unit.workload_ref(), op.op_id, (world.keys.op,)))
        self.events.append(Decision(reason, unit.jobset_ref(), message, op.op_id))

    def finish(self, world: World, unit: Unit, op: OpRecord, message: str) -> None:
        """The op is done: its record removed, and why."""
        self.done += 1
        self.clear(world, unit, op, EventReason.DONE, message)

    def exclude(self, workload_key: str) -> None:
        """No rule of this pass takes this Workload as a preemptor or a victim (it is claimed, by no op)."""
        self.claimed.add(workload_key)

    def defer_contested(self, preemptor_uid: str, blocked: Decision) -> None:
        """Keep a contested inversion's Blocked event until `resolve_inversions` has tried it again (I11)."""
        self.contested_blocked[preemptor_uid] = blocked

    def start_rung_switch(self, workload_key: str, write: Action, timeout: datetime, why: Decision) -> None:
        """A rung switch's first write and its event: the Workload is claimed by no op (no rule of the pass takes
        it), counted, and the pass wakes when the switch times out."""
        self.actions.append(write)
        self.claimed.add(workload_key)
        self.rung_switches += 1
        self.deadlines.append(timeout)
        self.events.append(why)

    def abort(self, preemptor: Unit, op: OpRecord, message: str, world: World | None = None) -> None:
        """Count an aborted op; with `world`, its record is removed too (else nothing was written for it)."""
        self.aborted += 1
        if world is None:
            self.events.append(Decision(EventReason.ABORTED, preemptor.jobset_ref(), message, op.op_id))
        else:
            self.clear(world, preemptor, op, EventReason.ABORTED, message)

    def block(self, unit: Unit, message: str, op_id: str = "") -> None:
        """A Warning that the unit's preemption (or part of it) is not done this pass, and why."""
        self.events.append(Decision(EventReason.BLOCKED, unit.jobset_ref(), message, op_id, EventType.WARNING))

    # The clock -------------------------------------------------------------------------------------------------

    def wait(self, until: datetime) -> None:
        """A preemptor takes no victims before `until` (its eviction delay, or its starvation wait)."""
        self.waiting += 1
        self.deadlines.append(until)

    def wake_at(self, when: datetime) -> None:
        """This pass's decisions change at `when` by the clock alone: plan again then."""
        self.deadlines.append(when)

    def defer(self) -> None:
        """A capacity release left for later (Kueue's `reclaimWithinCohort: Any` could evict higher work)."""
        self.deferred += 1

    # The pass's counters ---------------------------------------------------------------------------------------

    def summary(self) -> Counters:
        """The ledger's counters under their `Diagnostics` names."""
        return {
            "ops_open": len(self.open_ops),
            "ops_waiting": self.waiting,
            "ops_done": self.done,
            "ops_extended_victims": self.extended,
            "ops_fenced_victims": self.fenced,
            "ops_inversion_victims": self.inverted,
            "ops_aborted": self.aborted,
            "rung_switches": self.rung_switches,
            "victims_held": self.held,
            "releases_deferred": self.deferred,
        }


def hold_action(world: World, victim: Unit, preemptor: Unit, op_id: str, fenced: bool = False) -> HoldVictim:
    """Annotations and `spec.active=false` for one victim, in one write."""
    keys, wl = world.keys, victim.workload
    assert wl is not None and preemptor.workload is not None
    history = [*world.hold_times(wl), world.now]
    previous = wl.annotations.get(keys.hold_count, "0")
    count = int(previous) + 1 if previous.isdigit() else 1
    held_by = f"{preemptor.jobset.namespace}/{preemptor.jobset.name}/{preemptor.uid}/{preemptor.jobset.restarts}"
    # A preemptor taken over by a strictly higher one (I9) loses its op in the same write as it is held.
    removed = (keys.op,) if keys.op in wl.annotations else ()
    queue = {keys.held_queue: victim.cluster_queue.name} if victim.cluster_queue is not None else {}
    return HoldVictim(
        workload=victim.workload_ref(),
        op_id=op_id,
        preemptor=preemptor.workload_ref(),
        remove_annotations=removed,
        fenced=fenced,
        set_annotations={
            keys.held_by: held_by,
            keys.op_id: op_id,
            keys.held_since: format_time(world.now),
            keys.hold_count: str(count),
            keys.hold_history: ",".join(format_time(t) for t in sorted(history)),
            **queue,
        },
    )


def record_action(world: World, preemptor: Unit, op: OpRecord) -> RecordOp:
    return RecordOp(workload=preemptor.workload_ref(), op=op, key=world.keys.op, seen=preemptor.op)


__all__ = ["Blocked", "Counters", "Held", "Ledger", "hold_action", "record_action"]
