"""`kubectl hotswap status`: what the reconciler holds, for whom, since when and why, read from the cluster's state.

Everything the reconciler knows it keeps in annotations (held victims: held-by, op-id, held-since, hold-count;
preemptors: their open operation), and it explains each hold in an Event. This module only reads those: pure
functions from listed objects to rows, and rows to a table that fits a terminal. The listing is
:mod:`hotswap.kube.status`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

import yaml

from gke_tpu_priority.hotswap.annotations import NODEPOOL_LABEL, AnnotationKeys, HeldBy, OpRecord, parse_time

JsonObj = Mapping[str, Any]
HELD_REASON = "HotswapVictimHeld"


@dataclass(frozen=True, slots=True)
class HeldRow:
    workload: str
    """namespace/name of the held Workload."""
    jobset: str
    preemptor: str
    """namespace/name of the JobSet it is held for ('?' when the annotation is unreadable)."""
    op_id: str
    since: datetime | None
    holds: int
    why: str
    """The HotswapVictimHeld Event's note for this hold, else what the annotations say."""


@dataclass(frozen=True, slots=True)
class OpRow:
    preemptor: str
    """namespace/name of the preemptor's Workload."""
    op_id: str
    attempt: int
    since: datetime | None
    slices: tuple[str, ...]
    victims: tuple[str, ...]
    fenced: int


@dataclass(frozen=True, slots=True)
class QuarantineRow:
    slice: str
    """The node pool (a multi-host slice), or '-' for a node without one."""
    nodes: tuple[str, ...]
    """Its nodes carrying the reconciler's quarantine taint: no new pod lands there until the slice is back."""


def quarantine_rows(nodes: Iterable[JsonObj], keys: AnnotationKeys) -> list[QuarantineRow]:
    """Nodes carrying the quarantine taint, grouped by node pool."""
    pools: dict[str, list[str]] = {}
    for node in nodes:
        spec = node.get("spec")
        taints = spec.get("taints") if isinstance(spec, Mapping) else None
        if not any(isinstance(t, Mapping) and t.get("key") == keys.quarantine_taint for t in taints or []):
            continue
        labels = _meta(node).get("labels")
        pool = labels.get(NODEPOOL_LABEL, "-") if isinstance(labels, Mapping) else "-"
        pools.setdefault(str(pool), []).append(str(_meta(node).get("name", "?")))
    return [QuarantineRow(pool, tuple(sorted(names))) for pool, names in sorted(pools.items())]


def _meta(obj: JsonObj) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _annotations(obj: JsonObj) -> Mapping[str, str]:
    found = _meta(obj).get("annotations")
    return found if isinstance(found, Mapping) else {}


def _key(obj: JsonObj) -> str:
    meta = _meta(obj)
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _jobset(obj: JsonObj) -> str:
    for owner in _meta(obj).get("ownerReferences") or []:
        if isinstance(owner, Mapping) and owner.get("kind") == "JobSet":
            return str(owner.get("name", ""))
    return ""


def hold_notes(events: Iterable[JsonObj]) -> dict[tuple[str, str, str], str]:
    """(namespace, JobSet, op id) -> the latest HotswapVictimHeld note (events.k8s.io/v1 Events)."""
    latest: dict[tuple[str, str, str], tuple[str, str]] = {}
    for event in events:
        if event.get("reason") != HELD_REASON:
            continue
        found = event.get("regarding")
        regarding: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
        op_ids = [v for k, v in _annotations(event).items() if k.endswith("/op-id")]
        key = (str(regarding.get("namespace", "")), str(regarding.get("name", "")), op_ids[0] if op_ids else "")
        when = str(event.get("eventTime") or _meta(event).get("creationTimestamp") or "")
        if key not in latest or when >= latest[key][0]:
            latest[key] = (when, str(event.get("note", "")))
    return {key: note for key, (_, note) in latest.items()}


def held_rows(workloads: Iterable[JsonObj], events: Iterable[JsonObj], keys: AnnotationKeys) -> list[HeldRow]:
    notes = hold_notes(events)
    rows: list[HeldRow] = []
    for wl in workloads:
        annotations = _annotations(wl)
        held_by = annotations.get(keys.held_by)
        if not held_by:
            continue
        decoded = HeldBy.decode(held_by)
        preemptor = f"{decoded.namespace}/{decoded.name}" if decoded else "?"
        namespace = str(_meta(wl).get("namespace", ""))
        jobset = _jobset(wl)
        op_id = annotations.get(keys.op_id, "")
        count = annotations.get(keys.hold_count, "")
        why = notes.get((namespace, jobset, op_id)) or (
            f"held for {preemptor} (no Event left: Events expire after an hour)"
        )
        rows.append(
            HeldRow(
                workload=_key(wl),
                jobset=jobset,
                preemptor=preemptor,
                op_id=op_id,
                since=parse_time(annotations.get(keys.held_since, "")),
                holds=int(count) if count.isdigit() else 1,
                why=why,
            )
        )
    return sorted(rows, key=lambda r: (r.since is None, r.since or datetime.min, r.workload))


def op_rows(workloads: Iterable[JsonObj], keys: AnnotationKeys) -> list[OpRow]:
    rows: list[OpRow] = []
    for wl in workloads:
        text = _annotations(wl).get(keys.op)
        record = OpRecord.decode(text) if text else None
        if record is None:
            continue
        rows.append(
            OpRow(_key(wl), record.op_id, record.attempt, record.since, record.reserved, record.victims, record.fenced)
        )
    return sorted(rows, key=lambda r: r.preemptor)


def age(since: datetime | None, now: datetime) -> str:
    """`3h05m`, `12m`, `40s`: how long ago, as an operator reads it."""
    if since is None:
        return "?"
    seconds = max(0, int((now - since).total_seconds()))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m" if minutes else f"{secs}s"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    # The last column (the reason) is never padded: it may be long, and the terminal wraps it.
    line = "  ".join(f"{{:<{w}}}" for w in widths[:-1]) + "  {}"
    return [line.format(*header), *(line.format(*r) for r in rows)]


def _stamp(since: datetime | None) -> str:
    return since.strftime("%Y-%m-%dT%H:%M:%SZ") if since else "?"


def _held_table(held: Sequence[HeldRow], now: datetime, wide: bool) -> list[str]:
    header = ["WORKLOAD", "JOBSET", "HELD FOR", *(["SINCE"] if wide else []), "AGE", "HOLDS", "OP", "WHY"]
    rows = [
        [
            r.workload,
            r.jobset or "-",
            r.preemptor,
            *([_stamp(r.since)] if wide else []),
            age(r.since, now),
            str(r.holds),
            r.op_id or "-",
            r.why,
        ]
        for r in held
    ]
    return _table(header, rows)


def _ops_table(ops: Sequence[OpRow], now: datetime, wide: bool) -> list[str]:
    extra = ["ATTEMPT", "SINCE"] if wide else []
    header = ["PREEMPTOR", "OP", *extra, "AGE", *(["FENCED"] if wide else []), "RESERVED SLICES", "VICTIMS"]
    rows = [
        [
            r.preemptor,
            r.op_id,
            *([str(r.attempt), _stamp(r.since)] if wide else []),
            age(r.since, now),
            *([str(r.fenced)] if wide else []),
            ",".join(r.slices) or "-",
            ",".join(r.victims) or "-",
        ]
        for r in ops
    ]
    return _table(header, rows)


def render(
    held: Sequence[HeldRow],
    ops: Sequence[OpRow],
    now: datetime,
    quarantined: Sequence[QuarantineRow] = (),
    wide: bool = False,
) -> str:
    """The tables; ``wide`` adds when each hold and operation started, the attempt and the fenced count."""
    out: list[str] = []
    if held:
        out.append(f"Held by the reconciler: {len(held)} Workload(s)")
        out += _held_table(held, now, wide)
    else:
        out.append("Nothing is held by the reconciler.")
    out.append("")
    if ops:
        out.append(f"Open operations: {len(ops)}")
        out += _ops_table(ops, now, wide)
    else:
        out.append("No open operations.")
    if quarantined:
        out.append("")
        out.append(f"Quarantined slices (a host down; no new pods until the slice is back): {len(quarantined)}")
        out += _table(("SLICE", "NODES"), [(r.slice, ",".join(r.nodes)) for r in quarantined])
    return "\n".join(out)


def status_document(
    held: Sequence[HeldRow],
    ops: Sequence[OpRow],
    quarantined: Sequence[QuarantineRow] = (),
    warnings: Sequence[str] = (),
) -> dict[str, Any]:
    """The answer as data (``-o json`` and ``-o yaml``): ``partial`` is true, and ``warnings`` says why, when part
    of what status reads could not be read."""

    def plain(row: HeldRow | OpRow) -> dict[str, Any]:
        data = asdict(row)
        data["since"] = _stamp(row.since) if row.since else None
        for key, value in data.items():
            if isinstance(value, tuple):
                data[key] = list(value)
        return data

    return {
        "held": [plain(r) for r in held],
        "operations": [plain(r) for r in ops],
        "quarantined": [{"slice": r.slice, "nodes": list(r.nodes)} for r in quarantined],
        "partial": bool(warnings),
        "warnings": list(warnings),
    }


def render_json(document: Mapping[str, Any]) -> str:
    return json.dumps(document, indent=2)


def render_yaml(document: Mapping[str, Any]) -> str:
    return yaml.safe_dump(dict(document), sort_keys=False, default_flow_style=False).rstrip("\n")
