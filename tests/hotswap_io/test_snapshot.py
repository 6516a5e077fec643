"""Raw objects -> typed snapshot: real shapes convert faithfully; malformed ones are ignored, never fatal (F21)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gke_tpu_priority.hotswap.kube.snapshot import (
    SnapshotBuilder,
    cluster_queue_from,
    jobset_from,
    node_from,
    pod_from,
    queued_flavor_names,
    tas_flavor_names,
    workload_from,
)
from gke_tpu_priority.hotswap.model import ConditionStatus, PodPhase, SliceShape, TaintEffect

from .cluster import jobset, pod, tpu_node, workload

NOW = datetime(2026, 9, 1, 12, tzinfo=UTC)


def with_uid(obj: dict[str, Any], uid: str, rv: str = "7") -> dict[str, Any]:
    obj["metadata"] |= {"uid": uid, "resourceVersion": rv}
    return obj


def test_node_labels_taints_and_readiness() -> None:
    raw = tpu_node("p0-0", "p0")
    raw["spec"]["taints"].append(
        {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "timeAdded": "2026-09-01T11:59:00Z"}
    )
    raw["status"]["conditions"][0] |= {"status": "Unknown", "lastTransitionTime": "2026-09-01T11:59:00Z"}
    node = node_from(raw)
    assert node is not None
    assert (node.node_pool, node.accelerator, node.topology, node.tpu_chips) == ("p0", "tpu-v6e-slice", "4x4", 4)
    assert node.machine_type == "ct6e-standard-4t"
    assert node.ready is ConditionStatus.UNKNOWN
    assert node.ready_transition_time == datetime(2026, 9, 1, 11, 59, tzinfo=UTC)
    unreachable = [t for t in node.taints if t.key == "node.kubernetes.io/unreachable"]
    assert unreachable[0].effect is TaintEffect.NO_EXECUTE and unreachable[0].time_added is not None


def test_jobset_shape_priority_and_policy() -> None:
    raw = with_uid(jobset("train", 2, "high"), "js-1")
    raw["status"] = {"restarts": 3, "terminalState": "Failed"}
    js = jobset_from(raw, {"high": 1000})
    assert js is not None
    (rj,) = js.replicated_jobs
    assert (rj.name, rj.replicas) == ("workers", 2)
    assert rj.shape == SliceShape("tpu-v6e-slice", "4x4", 4)
    assert js.pod_priority == 1000 and js.max_restarts == 10 and js.restarts == 3
    assert js.exclusive_topology == "cloud.google.com/gke-nodepool"
    assert js.terminal_state == "Failed"


def test_workload_owner_priority_admission_and_active() -> None:
    js = with_uid(jobset("train", 1, "p10"), "js-1")
    raw = with_uid(workload(js, 10), "wl-1")
    raw["spec"]["active"] = False
    wl = workload_from(raw)
    assert wl is not None
    assert (wl.owner_jobset_uid, wl.owner_jobset_name, wl.priority) == ("js-1", "train", 10)
    assert wl.cluster_queue == "cq" and wl.admitted and wl.quota_reserved and not wl.active
    assert wl.priority_class_ref is not None and wl.priority_class_ref.name == "p10"
    assert wl.resource_version == "7"


def test_pod_labels_and_disruption() -> None:
    js = with_uid(jobset("train", 1, "p10"), "js-1")
    raw = with_uid(pod(js, "p0-1", index=1, host=1, attempt=2, priority=10), "pod-1")
    raw["status"] = {
        "phase": "Failed",
        "conditions": [{"type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager"}],
    }
    parsed = pod_from(raw, {"p0-1": "p0"})
    assert parsed is not None
    assert (parsed.jobset_name, parsed.job_index, parsed.restart_attempt) == ("train", 1, 2)
    assert (parsed.node_pool, parsed.phase, parsed.priority) == ("p0", PodPhase.FAILED, 10)
    assert parsed.disruption_reason == "DeletionByTaintManager"


def test_unbound_pod_keeps_its_creation_time_for_starvation() -> None:
    js = with_uid(jobset("train", 1, "p10"), "js-1")
    raw = with_uid(pod(js, "p0-1", index=0, host=0, attempt=0, priority=10), "pod-1")
    raw["metadata"]["creationTimestamp"] = "2026-09-01T11:58:30Z"
    raw["spec"].pop("nodeName", None)
    raw["status"] = {"phase": "Pending"}
    parsed = pod_from(raw, {})
    assert parsed is not None
    assert parsed.node_name is None and parsed.phase is PodPhase.PENDING
    assert parsed.creation_timestamp == NOW - timedelta(seconds=90)
    raw["metadata"]["creationTimestamp"] = "yesterday"
    junk = pod_from(raw, {})
    assert junk is not None and junk.creation_timestamp is None


def test_cluster_queue_cohort_and_tas_detection() -> None:
    flavors = [{"metadata": {"name": "tas-v6e"}, "spec": {"topologyName": "gke"}}, {"metadata": {"name": "plain"}}]
    topologies = [
        {
            "metadata": {"name": "gke"},
            "spec": {
                "levels": [{"nodeLabel": "cloud.google.com/gke-nodepool"}, {"nodeLabel": "kubernetes.io/hostname"}]
            },
        }
    ]
    tas = tas_flavor_names(flavors, topologies)
    assert tas == frozenset({"tas-v6e"})
    cq = {
        "metadata": {"name": "cq"},
        "spec": {"cohortName": "tpu", "resourceGroups": [{"flavors": [{"name": "tas-v6e"}]}]},
    }
    parsed = cluster_queue_from(cq, tas)
    assert parsed is not None and parsed.cohort_name == "tpu" and parsed.uses_tas


def ladder_queue(reserved: object, quota: object = "64") -> dict[str, Any]:
    """A ClusterQueue as the package renders a capacity ladder: reservation, spot and queued flex-start flavors."""
    flavors = [
        {
            "name": name,
            "resources": [{"name": "google.com/tpu", "nominalQuota": q}, {"name": "cpu", "nominalQuota": "1k"}],
        }
        for name, q in (("v6e-reservation", "32"), ("v6e-spot", "64"), ("v6e-queued", quota))
    ]
    usage = [
        {"name": "v6e-reservation", "resources": [{"name": "google.com/tpu", "total": "32"}]},
        {
            "name": "v6e-queued",
            "resources": [{"name": "google.com/tpu", "total": reserved}, {"name": "cpu", "total": "9"}],
        },
    ]
    return {
        "metadata": {"name": "tpu-training"},
        "spec": {"resourceGroups": [{"coveredResources": ["google.com/tpu", "cpu"], "flavors": flavors}]},
        "status": {"flavorsReservation": usage},
    }


def test_queued_provisioning_room_is_the_queued_flavors_unreserved_tpu_quota() -> None:
    flavors = [
        {
            "metadata": {"name": "v6e-reservation"},
            "spec": {"nodeLabels": {"gke-tpu-priority.io/capacity": "reservation"}},
        },
        {"metadata": {"name": "v6e-spot"}, "spec": {"nodeLabels": {"cloud.google.com/gke-spot": "true"}}},
        {
            "metadata": {"name": "v6e-queued"},
            "spec": {"nodeLabels": {"gke-tpu-priority.io/capacity": "flex-start-queued"}},
        },
        {"metadata": {"name": "gke-queued"}, "spec": {"nodeLabels": {"cloud.google.com/gke-queued": "true"}}},
        {"metadata": {"name": "plain"}},
    ]
    queued = queued_flavor_names(flavors)
    assert queued == frozenset({"v6e-queued", "gke-queued"})
    parsed = cluster_queue_from(ladder_queue("16"), frozenset(), queued)
    assert parsed is not None and parsed.queued_room_chips == 48  # 64 nominal, 16 reserved; spot's room not counted
    unused = cluster_queue_from(ladder_queue("16"), frozenset(), frozenset())
    assert unused is not None and unused.queued_room_chips == 0  # no flavor known to be queued
    none_reserved = cluster_queue_from(ladder_queue(0) | {"status": {}}, frozenset(), queued)
    assert none_reserved is not None and none_reserved.queued_room_chips == 64
    for unreadable in ({"reserved": "1500m"}, {"reserved": "16", "quota": "lots"}):
        odd = cluster_queue_from(ladder_queue(**unreadable), frozenset(), queued)  # type: ignore[arg-type]
        assert odd is not None and odd.queued_room_chips == 0, unreadable


def test_builder_remembers_departed_pods_and_node_pools_within_the_window() -> None:
    clock = [NOW]
    builder = SnapshotBuilder(attribution_window=timedelta(minutes=10), clock=lambda: clock[0])
    js = with_uid(jobset("train", 1, "p10"), "js-1")
    node = tpu_node("p0-0", "p0")
    builder.on_node_event("ADDED", node)
    gone = with_uid(pod(js, "p0-0", index=0, host=0, attempt=0, priority=10), "pod-1")
    builder.on_pod_event("DELETED", gone)
    snapshot = builder.build(nodes=[], pods=[], jobsets=[], workloads=[], cluster_queues=[])
    (departed,) = snapshot.departed_pods
    assert (departed.jobset_name, departed.node_pool, departed.gone_at) == ("train", "p0", NOW)
    clock[0] = NOW + timedelta(minutes=11)
    assert builder.build(nodes=[], pods=[], jobsets=[], workloads=[], cluster_queues=[]).departed_pods == ()


def test_objects_missing_identity_are_skipped() -> None:
    builder = SnapshotBuilder(attribution_window=timedelta(minutes=10), clock=lambda: NOW)
    snapshot = builder.build(
        nodes=[{"metadata": {}}, tpu_node("ok", "p")],
        pods=[{"metadata": {"name": "x", "namespace": "ns", "uid": "u"}}],  # no jobset label
        jobsets=[{"metadata": {"name": "js"}}],  # no namespace/uid
        workloads=[{"metadata": {"name": "w", "namespace": "ns", "uid": "u"}}],  # no resourceVersion
        cluster_queues=[{"spec": {}}],
    )
    assert [n.name for n in snapshot.nodes] == ["ok"]
    assert (snapshot.pods, snapshot.jobsets, snapshot.workloads, snapshot.cluster_queues) == ((), (), (), ())


# Real field names, so junk lands where the converters look (random text keys would rarely hit them).
FIELD_NAMES = st.sampled_from(
    [
        "effect",
        "key",
        "type",
        "status",
        "name",
        "labels",
        "uid",
        "value",
        "nodeName",
        "phase",
        "replicas",
        "template",
        "spec",
        "metadata",
        "conditions",
        "reason",
        "namespace",
        "resourceVersion",
        "nodeSelector",
        "priorityClassName",
        "containers",
        "resources",
        "limits",
        "requests",
        "google.com/tpu",
        "kind",
        "apiVersion",
        "levels",
        "nodeLabel",
        "topologyName",
        "flavors",
        "resourceGroups",
        "cohortName",
        "cloud.google.com/gke-nodepool",
        "jobset.sigs.k8s.io/jobset-name",
        "lastTransitionTime",
        "active",
    ]
) | st.text(max_size=4)

UNHASHABLE_CASES = [
    (node_from, {"metadata": {"name": "n"}, "spec": {"taints": [{"key": "k", "effect": ["NoSchedule"]}]}}),
    (node_from, {"metadata": {"name": "n"}, "status": {"conditions": [{"type": "Ready", "status": {"x": 1}}]}}),
    (
        pod_from,
        {
            "metadata": {"name": "p", "namespace": "ns", "uid": "u", "labels": {"jobset.sigs.k8s.io/jobset-name": "j"}},
            "status": {"phase": ["Running"]},
        },
    ),
]


@pytest.mark.parametrize(("convert", "obj"), UNHASHABLE_CASES)
def test_unhashable_values_where_strings_belong(convert: Any, obj: dict[str, Any]) -> None:
    assert convert(obj) is not None


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 5)
    | st.text(max_size=5)
    | st.sampled_from(["True", "4", "4x4", "2026-09-01T12:00:00Z"]),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(FIELD_NAMES, children, max_size=4),
    max_leaves=20,
)


def mutate(base: dict[str, Any], path: list[str], value: Any) -> dict[str, Any]:
    """Replace one nested field of a realistic object by junk."""
    import copy

    obj = copy.deepcopy(base)
    target = obj
    for key in path[:-1]:
        nxt = target.get(key) if isinstance(target, dict) else None
        if not isinstance(nxt, dict):
            return obj
        target = nxt
    target[path[-1]] = value
    return obj


PATHS = [
    ["metadata"],
    ["metadata", "labels"],
    ["metadata", "annotations"],
    ["metadata", "ownerReferences"],
    ["spec"],
    ["spec", "taints"],
    ["spec", "replicatedJobs"],
    ["spec", "failurePolicy"],
    ["spec", "priority"],
    ["status"],
    ["status", "conditions"],
    ["status", "allocatable"],
    ["status", "restarts"],
    ["status", "admission"],
]


# Lists of objects with real field names and junk values: the shape of taints, conditions, replicatedJobs...
junk_objects = st.lists(st.dictionaries(FIELD_NAMES, json_values, max_size=6), min_size=1, max_size=3)


@settings(max_examples=300, deadline=None)
@given(path=st.sampled_from(PATHS), junk=json_values | junk_objects | st.dictionaries(FIELD_NAMES, json_values))
def test_malformed_fields_never_raise(path: list[str], junk: Any) -> None:
    """The converters themselves must cope (the builder's catch-all is only a last resort)."""
    js = with_uid(jobset("train", 1, "p10"), "js-1")
    builder = SnapshotBuilder(attribution_window=timedelta(minutes=10), clock=lambda: NOW)
    raw_pod = mutate(with_uid(pod(js, "n", 0, 0, 0, 10), "p"), path, junk)
    builder.on_pod_event("DELETED", raw_pod)
    builder.on_node_event("ADDED", mutate(tpu_node("n", "p"), path, junk))
    node_from(mutate(tpu_node("n", "p"), path, junk))
    pod_from(raw_pod, {"n": "p"})
    jobset_from(mutate(js, path, junk), {"p10": 10})
    workload_from(mutate(with_uid(workload(js, 10), "w"), path, junk))
    cluster_queue_from(mutate({"metadata": {"name": "cq"}, "spec": {"cohortName": "c"}}, path, junk))


@settings(max_examples=100, deadline=None)
@given(obj=st.dictionaries(st.sampled_from(["metadata", "spec", "status", "value"]), json_values, max_size=4))
def test_arbitrary_objects_never_raise(obj: dict[str, Any]) -> None:
    builder = SnapshotBuilder(attribution_window=timedelta(minutes=10), clock=lambda: NOW)
    builder.on_node_event("ADDED", obj)
    builder.on_pod_event("DELETED", obj)
    for convert in (node_from, pod_from, jobset_from, workload_from, cluster_queue_from):
        convert(obj)
    tas_flavor_names([obj], [obj])


def test_builder_remembers_whether_a_departed_pod_had_failed() -> None:
    """A pod deleted after its containers died confirms its node's failure at once; one deleted while running
    (a hold, a restart caused elsewhere) does not."""
    builder = SnapshotBuilder(attribution_window=timedelta(minutes=10), clock=lambda: NOW)
    js = with_uid(jobset("train", 1, "p10"), "js-1")
    builder.on_node_event("ADDED", tpu_node("p0-0", "p0"))
    failed = with_uid(pod(js, "p0-0", index=0, host=0, attempt=0, priority=10), "pod-1")
    failed["status"] = {**failed.get("status", {}), "phase": "Failed"}
    running = with_uid(pod(js, "p0-0", index=0, host=1, attempt=0, priority=10), "pod-2")
    running["status"] = {**running.get("status", {}), "phase": "Running"}
    builder.on_pod_event("DELETED", failed)
    builder.on_pod_event("DELETED", running)
    departed = builder.build(nodes=[], pods=[], jobsets=[], workloads=[], cluster_queues=[]).departed_pods
    assert sorted(d.failed for d in departed) == [False, True]


NODE_SELECTOR = "alpha.jobset.sigs.k8s.io/node-selector"
EXCLUSIVE = "alpha.jobset.sigs.k8s.io/exclusive-topology"


def _template_annotated(raw: dict[str, Any], annotations: dict[str, str]) -> dict[str, Any]:
    raw["spec"]["replicatedJobs"][0]["template"]["metadata"] = {"annotations": annotations}
    return raw


@pytest.mark.parametrize(
    ("jobset_annotations", "template_annotations", "static"),
    [
        ({EXCLUSIVE: "cloud.google.com/gke-nodepool"}, {NODE_SELECTOR: "true"}, True),
        ({}, {EXCLUSIVE: "cloud.google.com/gke-nodepool", NODE_SELECTOR: "true"}, True),
        ({EXCLUSIVE: "cloud.google.com/gke-nodepool", NODE_SELECTOR: "true"}, {}, True),
        # JobSet copies its own node-selector annotation to the Jobs only with its own exclusive annotation.
        ({NODE_SELECTOR: "true"}, {EXCLUSIVE: "cloud.google.com/gke-nodepool"}, False),
        ({EXCLUSIVE: "cloud.google.com/gke-nodepool"}, {}, False),
    ],
)
def test_node_selector_strategy_follows_jobset_on_metadata_and_replicated_job_template(
    jobset_annotations: dict[str, str], template_annotations: dict[str, str], static: bool
) -> None:
    raw = with_uid(jobset("train", 2, "high"), "js-1")
    raw["metadata"]["annotations"] = jobset_annotations
    js = jobset_from(_template_annotated(raw, template_annotations))
    assert js is not None
    assert js.exclusive_topology == "cloud.google.com/gke-nodepool"
    assert js.node_selector_strategy is static


@pytest.mark.parametrize(
    ("preemption", "reservation", "reclaim_any", "borrowing"),
    [
        (
            {"reclaimWithinCohort": "Any"},
            [{"name": "v6e", "resources": [{"name": "google.com/tpu", "total": "64", "borrowed": "16"}]}],
            True,
            True,
        ),
        (
            {"reclaimWithinCohort": "LowerPriority"},
            [{"name": "v6e", "resources": [{"name": "google.com/tpu", "total": "64", "borrowed": "0"}]}],
            False,
            False,
        ),
        ({}, [{"name": "v6e", "resources": [{"name": "google.com/tpu", "total": "64"}]}], False, False),
    ],
)
def test_cluster_queue_reclaim_policy_and_borrowing(
    preemption: dict[str, str], reservation: list[dict[str, Any]], reclaim_any: bool, borrowing: bool
) -> None:
    cq = {
        "metadata": {"name": "cq"},
        "spec": {"cohortName": "tpu", "preemption": preemption, "resourceGroups": []},
        "status": {"flavorsReservation": reservation},
    }
    parsed = cluster_queue_from(cq)
    assert parsed is not None and (parsed.reclaim_any, parsed.borrowing) == (reclaim_any, borrowing)
