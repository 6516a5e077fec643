"""Annotation keys and value codecs for the reconciler's persisted state (on the objects: a restart resumes it).

State lives only in annotations: on a held victim Workload (who holds it, since when, how often), and on a
preemptor Workload (its open operation). Everything else is recomputed from the snapshot each pass.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

# Kueue's own annotation for the alpha PriorityBoost gate (KEP-7990).
KUEUE_PRIORITY_BOOST = "kueue.x-k8s.io/priority-boost"
# JobSet exclusive placement (default strategy) and the node-selector strategy flag.
JOBSET_EXCLUSIVE_TOPOLOGY = "alpha.jobset.sigs.k8s.io/exclusive-topology"
JOBSET_NODE_SELECTOR_STRATEGY = "alpha.jobset.sigs.k8s.io/node-selector"
NODEPOOL_LABEL = "cloud.google.com/gke-nodepool"
HOSTNAME_LABEL = "kubernetes.io/hostname"


@dataclass(frozen=True, slots=True)
class AnnotationKeys:
    """Every annotation key under one configurable domain."""

    domain: str

    # -- on victim Workloads
    @property
    def held_by(self) -> str:
        return f"{self.domain}/held-by"

    @property
    def op_id(self) -> str:
        return f"{self.domain}/op-id"

    @property
    def held_since(self) -> str:
        return f"{self.domain}/held-since"

    @property
    def held_queue(self) -> str:
        """The ClusterQueue the victim was admitted to when held: Kueue clears `status.admission` on eviction, and a
        release into that queue's queued-provisioning quota needs to know which queue it goes back to."""
        return f"{self.domain}/held-queue"

    @property
    def hold_count(self) -> str:
        return f"{self.domain}/hold-count"

    @property
    def hold_history(self) -> str:
        """Comma-separated RFC 3339 times of recent holds; kept after release for the rate limit (I12)."""
        return f"{self.domain}/hold-history"

    @property
    def released_at(self) -> str:
        """When the last release happened: its demand stays booked briefly so capacity is not over-released."""
        return f"{self.domain}/released-at"

    # -- on preemptor Workloads (open operation)
    @property
    def op(self) -> str:
        """The preemptor's open operation, JSON-free compact encoding (see `OpRecord`)."""
        return f"{self.domain}/op"

    # -- on a Workload whose JobSet moves off the spot rung (rung switch)
    @property
    def rung_switch(self) -> str:
        """The capacity a top-tier JobSet whose spot VMs were reclaimed is being moved to. Set with
        `spec.active=false` in one write; the Workload is deleted once its JobSet is suspended and pinned, so the
        key never outlives the switch (Kueue recreates the Workload from the pinned template)."""
        return f"{self.domain}/rung-switch"

    @property
    def rung_switch_since(self) -> str:
        return f"{self.domain}/rung-switch-since"

    def rung_switch_keys(self) -> tuple[str, ...]:
        return (self.rung_switch, self.rung_switch_since)

    # -- user opt-ins on JobSets or Workloads
    @property
    def protect(self) -> str:
        return f"{self.domain}/protect"

    @property
    def fast_fail(self) -> str:
        return f"{self.domain}/fast-fail"

    @property
    def last_checkpoint(self) -> str:
        """RFC 3339 time of the JobSet's last completed checkpoint, kept current by the training code (optional).

        A victim that has just checkpointed loses almost nothing when evicted; without the signal the planner
        can only bound the loss by how long the current attempt has been running."""
        return f"{self.domain}/last-checkpoint"

    # -- on the nodes of an Unhealthy slice (a taint key, not an annotation)
    @property
    def quarantine_taint(self) -> str:
        """NoSchedule taint the reconciler puts on every host of a Suspect or Unhealthy slice while it stays so.

        A multi-host slice runs nothing while one host is down, yet kube-scheduler sees its surviving hosts as
        free and places a restarted JobSet there (found on real controllers by `make e2e`): the taint keeps new
        pods on slices that can run them. Never a health signal itself (the planner tolerates it)."""
        return f"{self.domain}/unhealthy-slice"

    def victim_hold_keys(self) -> tuple[str, ...]:
        """Keys removed on release (hold-count and hold-history stay: they carry rate-limit history)."""
        return (self.held_by, self.op_id, self.held_since, self.held_queue)


def format_time(moment: datetime) -> str:
    """RFC 3339 in UTC with second precision, as Kubernetes writes times."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str) -> datetime | None:
    """Parse an RFC 3339 time; None when malformed (annotations are user-editable, never crash on them)."""
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def is_true(annotations: Mapping[str, str], key: str) -> bool:
    return annotations.get(key, "").strip().lower() == "true"


@dataclass(frozen=True, slots=True)
class HeldBy:
    """Value of `held-by`: the preemptor a victim was evicted for, and the preemptor's attempt at the time."""

    namespace: str
    name: str
    uid: str
    attempt: int

    def encode(self) -> str:
        return f"{self.namespace}/{self.name}/{self.uid}/{self.attempt}"

    @classmethod
    def decode(cls, text: str) -> HeldBy | None:
        parts = text.split("/")
        if len(parts) != 4 or not all(parts[:3]) or not parts[3].isdigit():
            return None
        return cls(parts[0], parts[1], parts[2], int(parts[3]))


@dataclass(frozen=True, slots=True)
class OpRecord:
    """A preemptor's open operation: which slices it reserved and which Workloads it holds.

    Encoded as `id=<op>;attempt=<n>;since=<RFC3339>;slices=<pool,...>;kept=<pool,...>;fenced=<n>;victims=<ns/name,...>`
    so it reads well in kubectl. `since` tells a victim never held for this op (crash before its hold) from one
    already held and released (which must not be held again).
    """

    op_id: str
    attempt: int
    slices: tuple[str, ...]
    """Slices handed to the preemptor: spares and slices its victims free."""
    victims: tuple[str, ...]
    since: datetime | None = None
    kept: tuple[str, ...] = ()
    """Healthy slices the preemptor already held when the op was planned; reserved too, because its restart
    empties them before the new attempt's pods arrive (C12)."""
    fenced: int = 0
    """Fresh admissions the admission fence has held for this op so far: bounded per op (`fenceHoldsPerSlice`),
    since each hold frees quota that Kueue gives the next queued workload."""

    @property
    def reserved(self) -> tuple[str, ...]:
        """Every slice the op reserves for the preemptor's new attempt."""
        return tuple(sorted({*self.slices, *self.kept}))

    def encode(self) -> str:
        since = f"since={format_time(self.since)};" if self.since is not None else ""
        kept = f"kept={','.join(self.kept)};" if self.kept else ""
        fenced = f"fenced={self.fenced};" if self.fenced else ""
        return (
            f"id={self.op_id};attempt={self.attempt};{since}"
            f"slices={','.join(self.slices)};{kept}{fenced}victims={','.join(self.victims)}"
        )

    @classmethod
    def decode(cls, text: str) -> OpRecord | None:
        fields: dict[str, str] = {}
        for part in text.split(";"):
            key, sep, value = part.partition("=")
            if not sep:
                return None
            fields[key.strip()] = value.strip()
        attempt = fields.get("attempt", "")
        if not fields.get("id") or not attempt.isdigit():
            return None
        return cls(
            op_id=fields["id"],
            attempt=int(attempt),
            slices=_split(fields.get("slices", "")),
            victims=_split(fields.get("victims", "")),
            since=parse_time(fields["since"]) if "since" in fields else None,
            kept=_split(fields.get("kept", "")),
            fenced=int(fields["fenced"]) if fields.get("fenced", "").isdigit() else 0,
        )


def _split(text: str) -> tuple[str, ...]:
    return tuple(sorted(item for item in (part.strip() for part in text.split(",")) if item))


def encode_history(times: Iterable[datetime]) -> str:
    return ",".join(format_time(t) for t in sorted(times))


def decode_history(text: str) -> tuple[datetime, ...]:
    parsed = (parse_time(part) for part in text.split(",") if part.strip())
    return tuple(sorted(t for t in parsed if t is not None))
