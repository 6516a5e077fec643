"""Apply a plan's writes to a snapshot, purely: what the cluster looks like right after the controller's
writes and before Kueue, JobSet or kube-scheduler react. Used for idempotence checks and by the simulator."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from datetime import UTC, datetime

from gke_tpu_priority.hotswap.model import ClusterSnapshot, DepartedPod, JobSet, Node, Taint, TaintEffect, Workload
from gke_tpu_priority.hotswap.planner.actions import (
    ClearOp,
    EndRungSwitch,
    FastFailPod,
    HoldVictim,
    PinRung,
    RecordOp,
    ReleaseVictim,
    StartRungSwitch,
    TaintNode,
    Write,
)


def _bump(resource_version: str) -> str:
    return str(int(resource_version) + 1) if resource_version.isdigit() else f"{resource_version}+1"


def _annotate(wl: Workload, set_: Mapping[str, str], remove: Iterable[str] = ()) -> dict[str, str]:
    annotations = {k: v for k, v in wl.annotations.items() if k not in set(remove)}
    annotations.update(set_)
    return annotations


def _taint(node: Node, action: TaintNode) -> Node:
    kept = tuple(t for t in node.taints if t.key != action.key)
    added = (Taint(action.key, TaintEffect.NO_SCHEDULE),) if action.present else ()
    return replace(node, taints=kept + added)


def apply_actions(snapshot: ClusterSnapshot, actions: Iterable[Write], now: datetime | None = None) -> ClusterSnapshot:
    """Return a new snapshot with every action applied (the input is not modified).

    Writes whose uid or resourceVersion no longer match are skipped, as the API server would reject them.
    `now` timestamps force-failed pods in `departed_pods` (defaults to the wall clock).
    """
    workloads = {(w.namespace, w.name): w for w in snapshot.workloads}
    jobsets = {js.uid: js for js in snapshot.jobsets}
    pods = {(p.namespace, p.name): p for p in snapshot.pods}
    departed = list(snapshot.departed_pods)
    nodes = {n.name: n for n in snapshot.nodes}
    for action in actions:
        if isinstance(action, TaintNode):
            node = nodes.get(action.node.name)
            if node is not None:
                nodes[node.name] = _taint(node, action)
            continue
        if isinstance(action, FastFailPod):
            pod = pods.get((action.pod.namespace, action.pod.name))
            if pod is None or pod.uid != action.pod.uid:
                continue
            del pods[(pod.namespace, pod.name)]
            departed.append(
                DepartedPod(
                    namespace=pod.namespace,
                    jobset_name=pod.jobset_name,
                    restart_attempt=pod.restart_attempt,
                    node_name=pod.node_name,
                    node_pool=pod.node_pool,
                    gone_at=now or datetime.now(UTC),
                    priority=pod.priority,
                    disruption_reason=pod.disruption_reason,
                )
            )
            continue
        ref = action.workload
        wl = workloads.get((ref.namespace, ref.name))
        if wl is None or wl.uid != ref.uid or (ref.resource_version and ref.resource_version != wl.resource_version):
            continue
        rv = _bump(wl.resource_version)
        if isinstance(action, PinRung):
            # The pinned template, and the Workload deleted (Kueue's new one is not in this snapshot yet).
            js = jobsets.get(action.jobset.uid)
            if js is not None:
                jobsets[js.uid] = _pinned(js, action)
            del workloads[(wl.namespace, wl.name)]
            continue
        if isinstance(action, HoldVictim):
            annotations = _annotate(wl, action.set_annotations, action.remove_annotations)
            wl = replace(wl, annotations=annotations, active=False, resource_version=rv)
        elif isinstance(action, ReleaseVictim):
            annotations = _annotate(wl, action.set_annotations, action.remove_annotations)
            wl = replace(wl, annotations=annotations, active=True, resource_version=rv)
        elif isinstance(action, RecordOp):
            wl = replace(wl, annotations=_annotate(wl, action.annotations()), resource_version=rv)
        elif isinstance(action, ClearOp):
            wl = replace(wl, annotations=_annotate(wl, {}, action.remove_annotations), resource_version=rv)
        elif isinstance(action, StartRungSwitch):
            wl = replace(wl, annotations=_annotate(wl, action.set_annotations), active=False, resource_version=rv)
        elif isinstance(action, EndRungSwitch):
            annotations = _annotate(wl, {}, action.remove_annotations)
            wl = replace(wl, annotations=annotations, active=True, resource_version=rv)
        workloads[(wl.namespace, wl.name)] = wl
    return replace(
        snapshot,
        nodes=tuple(nodes.values()),
        workloads=tuple(workloads.values()),
        jobsets=tuple(jobsets.values()),
        pods=tuple(pods.values()),
        departed_pods=tuple(departed),
    )


def _pinned(js: JobSet, action: PinRung) -> JobSet:
    """The JobSet with the named replicated jobs' pod templates selecting `action.capacity`."""
    rjs = tuple(
        replace(rj, shape=replace(rj.shape, capacity=action.capacity))
        if rj.name in action.replicated_jobs and rj.shape is not None
        else rj
        for rj in js.replicated_jobs
    )
    return replace(js, replicated_jobs=rjs)
