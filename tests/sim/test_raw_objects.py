"""The benchmark's raw API objects convert back, through the reconciler's own ingest, to the simulator's snapshot."""

from __future__ import annotations

import json
from datetime import timedelta

from gke_tpu_priority.hotswap.kube.snapshot import SnapshotBuilder
from sim.raw import pages, raw_objects
from sim.scaling import fleet_snapshot
from sim.snapshot import at


def test_raw_objects_round_trip_to_the_simulated_snapshot() -> None:
    snapshot, now, _config = fleet_snapshot(32)
    by_kind: dict[str, list[dict[str, object]]] = {}
    for kind, obj in raw_objects(snapshot):
        by_kind.setdefault(kind, []).append(obj)
    builder = SnapshotBuilder(attribution_window=timedelta(minutes=10), clock=lambda: now)
    converted = builder.build(
        nodes=by_kind["nodes"],
        pods=by_kind["pods"],
        jobsets=by_kind["jobsets"],
        workloads=by_kind["workloads"],
        cluster_queues=by_kind["clusterqueues"],
    )
    assert converted.nodes == snapshot.nodes
    assert converted.jobsets == snapshot.jobsets
    assert converted.workloads == snapshot.workloads
    assert converted.cluster_queues == snapshot.cluster_queues
    assert converted.pods == snapshot.pods
    assert now > at(0)


def test_pages_carry_every_object_once_at_realistic_sizes() -> None:
    snapshot, _now, _config = fleet_snapshot(32)
    items: dict[str, list[dict[str, object]]] = {}
    sizes: dict[str, int] = {}
    for line in pages(snapshot, page_size=50):
        page = json.loads(line)
        assert len(page["items"]) <= 50
        items.setdefault(page["kind"], []).extend(page["items"])
        sizes[page["kind"]] = sizes.get(page["kind"], 0) + len(line)
    assert len(items["pods"]) == len(snapshot.pods) and len(items["workloads"]) == len(snapshot.workloads)
    per_pod = sizes["pods"] / len(items["pods"])
    per_jobset = sizes["jobsets"] / len(items["jobsets"])
    assert 7_000 < per_pod < 12_000 and 7_000 < per_jobset < 13_000  # GKE's ~9 KB pods, ~10 KB JobSets
