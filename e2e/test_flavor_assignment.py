"""Real Kueue (v0.19.2) judges the JobSet builder's `allowSpot: false`: its flavor assigner skips a spot flavor for
a JobSet whose required node affinity excludes spot capacity, and assigns the next rung instead.

A ClusterQueue whose first flavor is spot (nodeLabels `gke-tpu-priority.io/capacity: spot`) and second is a
reservation: the same JobSet admits on spot by default and on the reservation with `allowSpot: false`. Admission
is by quota alone (no TAS), so no node is needed; the JobSets are deleted before their pods could matter.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from components.config.tpu import CAPACITY_LABEL
from components.workloads.jobset import TpuJobSetSpec, tpu_jobset
from e2e import report
from e2e.apply import apply_all, delete_all
from e2e.conftest import Controllers, Target

JsonObj = dict[str, Any]
KUEUE = "kueue.x-k8s.io/v1beta2"
NAMESPACE = "e2e-flavors"
QUEUE = "training"
TIER = "e2e-flavors-top"
SPOT, RESERVED = "e2e-flavors-spot", "e2e-flavors-reserved"
TPU = "google.com/tpu"


def _setup() -> list[JsonObj]:
    def flavor(name: str, capacity: str) -> JsonObj:
        return {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": name},
                "spec": {"nodeLabels": {CAPACITY_LABEL: capacity}}}  # fmt: skip

    def quota(name: str) -> JsonObj:
        return {"name": name, "resources": [{"name": TPU, "nominalQuota": "256"}]}

    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": TIER}, "value": 900000,
         "preemptionPolicy": "Never"},
        {"apiVersion": KUEUE, "kind": "WorkloadPriorityClass", "metadata": {"name": TIER}, "value": 900000},
        flavor(SPOT, "spot"),
        flavor(RESERVED, "reservation"),
        {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": NAMESPACE},
         "spec": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": NAMESPACE}},
                  "resourceGroups": [{"coveredResources": [TPU], "flavors": [quota(SPOT), quota(RESERVED)]}]}},
        {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": QUEUE, "namespace": NAMESPACE},
         "spec": {"clusterQueue": NAMESPACE}},
    ]  # fmt: skip


@pytest.fixture(scope="module")
def ladder(target: Target, controllers: Controllers) -> Iterator[None]:
    objects = _setup()
    try:
        assert [o.as_json() for o in apply_all(target.rest, objects) if not o.accepted] == []
        yield
    finally:
        left = delete_all(target.rest, objects)
    assert not left, left


def _admitted_flavor(target: Target, jobset: str, timeout: float = 90) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for wl in target.kubectl.json("get", f"workloads.{KUEUE.split('/')[0]}", "-n", NAMESPACE)["items"]:
            owners = [o["name"] for o in wl["metadata"].get("ownerReferences", [])]
            admission = wl.get("status", {}).get("admission")
            if jobset in owners and admission:
                flavors = {str(f) for ps in admission["podSetAssignments"] for f in ps.get("flavors", {}).values()}
                assert len(flavors) == 1, admission
                return flavors.pop()
        time.sleep(1)
    raise AssertionError(f"Kueue admitted no Workload of JobSet {jobset} within {timeout:.0f} s")


def _jobset(name: str, allow_spot: bool) -> JsonObj:
    spec = TpuJobSetSpec.model_validate(
        {"name": name, "namespace": NAMESPACE, "queue": QUEUE, "priority": TIER, "topology": "4x4",
         "image": "busybox", "allowSpot": allow_spot}
    )  # fmt: skip
    return tpu_jobset(spec)


@pytest.mark.parametrize(("allow_spot", "expected"), [(True, SPOT), (False, RESERVED)], ids=["default", "off-spot"])
def test_kueue_assigns_the_spot_flavor_only_to_a_jobset_that_allows_spot(
    target: Target, ladder: None, allow_spot: bool, expected: str
) -> None:
    name = "on-spot" if allow_spot else "off-spot"
    obj = _jobset(name, allow_spot)
    response = target.rest.create(obj)
    assert response.ok, response.message
    try:
        flavor = _admitted_flavor(target, name)
        report.section("controllers").setdefault("flavorAssignment", {})[name] = flavor
        assert flavor == expected
    finally:
        target.rest.delete(obj)
