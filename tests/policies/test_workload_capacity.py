"""`policies.check` catches work that can never run: a JobSet whose topology no flavor of its
queue selects, one that asks for more chips than its queue can ever be admitted with, and a quota smaller than one
slice. Before these rules each of them printed "No violations"."""

from __future__ import annotations

from typing import Any

from gke_tpu_priority.components.workloads import TpuJobSetSpec, tpu_jobset
from gke_tpu_priority.policies import check
from gke_tpu_priority.policies.rules.base import manifest_object

KUEUE = "kueue.x-k8s.io/v1beta2"


def flavor(name: str, topology: str) -> dict[str, Any]:
    labels = {"cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice", "cloud.google.com/gke-tpu-topology": topology}
    return {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": {"nodeLabels": labels}}


def cluster_queue(name: str, quotas: dict[str, int], cohort: str = "", limit: int | None = None) -> dict[str, Any]:
    def resource(chips: int) -> dict[str, Any]:
        entry: dict[str, Any] = {"name": "google.com/tpu", "nominalQuota": chips}
        if limit is not None:
            entry["borrowingLimit"] = limit
        return entry

    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": ["google.com/tpu"],
                "flavors": [{"name": f, "resources": [resource(c)]} for f, c in quotas.items()],
            }
        ],
    }
    if cohort:
        spec["cohortName"] = cohort
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def local_queue(cq: str) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE,
        "kind": "LocalQueue",
        "metadata": {"name": "training", "namespace": "ml"},
        "spec": {"clusterQueue": cq},
    }


def jobset(topology: str, slices: int) -> dict[str, Any]:
    spec = {
        "name": "llm",
        "namespace": "ml",
        "queue": "training",
        "priority": "training-high",
        "topology": topology,
        "slices": slices,
        "image": "trainer:1",
        "command": ["python", "train.py"],
    }
    return tpu_jobset(TpuJobSetSpec.model_validate(spec))


def messages(*manifests: dict[str, Any], rule: str) -> list[str]:
    objects = [manifest_object(m) for m in manifests]
    return [r.message for r in check.check_objects(objects) if r.rule == rule]


PLATFORM = (flavor("v6e-2x2", "2x2"), flavor("v6e-4x4", "4x4"))
FITS = "tpu-workload-fits-its-queue"
SLICE = "kueue-v1beta2-tpu-quota-holds-a-slice"


def test_a_jobset_whose_topology_no_flavor_has_is_reported() -> None:
    found = messages(
        *PLATFORM, cluster_queue("tpu", {"v6e-2x2": 8, "v6e-4x4": 32}), local_queue("tpu"), jobset("8x8", 1), rule=FITS
    )
    assert found == [
        "TPU JobSet ml/llm replicatedJobs[slice] pods need a 8x8 slice, but no flavor of ClusterQueue 'tpu' selects "
        "that topology (its TPU flavors: v6e-2x2 (2x2), v6e-4x4 (4x4)); Kueue would keep it pending forever. Use "
        "2x2 or 4x4, or submit it to a queue whose flavors have it."
    ]


def test_more_chips_than_the_queue_can_ever_have_is_reported() -> None:
    objects = (*PLATFORM, cluster_queue("tpu", {"v6e-4x4": 32}), local_queue("tpu"))
    assert messages(*objects, jobset("4x4", 2), rule=FITS) == []
    assert messages(*objects, jobset("4x4", 3), rule=FITS) == [
        "TPU JobSet ml/llm asks for 48 google.com/tpu in all, but ClusterQueue 'tpu' can never be admitted with more "
        "than 32 for its topologies (nominal quota plus what it may borrow); Kueue would keep it pending forever. Ask "
        "for fewer slices, or raise the queue's quota."
    ]


def test_borrowing_through_the_cohort_counts() -> None:
    objects = (
        *PLATFORM,
        cluster_queue("tpu", {"v6e-4x4": 16}, cohort="fleet"),
        cluster_queue("other", {"v6e-4x4": 32}, cohort="fleet"),
        local_queue("tpu"),
    )
    assert messages(*objects, jobset("4x4", 3), rule=FITS) == []
    assert len(messages(*objects, jobset("4x4", 4), rule=FITS)) == 1
    limited = (*PLATFORM, cluster_queue("tpu", {"v6e-4x4": 16}, "fleet", limit=16), *objects[3:])
    assert len(messages(*limited, jobset("4x4", 3), rule=FITS)) == 1


def test_without_the_platforms_objects_nothing_is_guessed() -> None:
    assert messages(jobset("8x8", 100), rule=FITS) == []


def test_a_quota_smaller_than_one_slice_is_reported() -> None:
    found = messages(*PLATFORM, cluster_queue("tpu", {"v6e-2x2": 4, "v6e-4x4": 8}), rule=SLICE)
    assert found == [
        "ClusterQueue 'tpu' gives flavor 'v6e-4x4' 8 google.com/tpu of nominal quota, less than one 4x4 slice (16 "
        "chips): no workload on it can ever be admitted on this quota. Use 0 (borrow only) or a multiple of 16."
    ]
    assert messages(*PLATFORM, cluster_queue("tpu", {"v6e-4x4": 0}), rule=SLICE) == []


def test_a_quota_given_as_a_quantity_string_is_read() -> None:
    queue = cluster_queue("tpu", {"v6e-4x4": 0})
    queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "8"
    assert len(messages(*PLATFORM, queue, rule=SLICE)) == 1


def test_the_stack_refuses_a_quota_below_one_slice() -> None:
    from gke_tpu_priority.components.config import ConfigError, parse_platform_config
    from testkit.mock_runtime import load_stack_config

    raw = load_stack_config("prod")["gke-tpu-priority:platform"]
    raw["queues"]["clusterQueues"][0]["quotas"][1]["chips"] = 8
    try:
        parse_platform_config(raw, stack_file=True)
    except ConfigError as error:
        assert error.problems == [
            "platform.queues.clusterQueues[0].quotas[1].chips: 8 is less than one slice of flavor 'v6e-4x4-spot' "
            "(16 chips), so no workload could ever be admitted on it; use 0 (borrow only) or a multiple of 16"
        ]
    else:
        raise AssertionError("a quota of half a slice was accepted")
