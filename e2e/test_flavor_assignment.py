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

from e2e import report
from e2e.conftest import Controllers, Target
from e2e.spot_ladder import QUEUE, SpotLadder, applied
from gke_tpu_priority.components.workloads.jobset import TpuJobSetSpec, tpu_jobset

JsonObj = dict[str, Any]
KUEUE = "kueue.x-k8s.io/v1beta2"
LADDER = SpotLadder("e2e-flavors")
NAMESPACE, TIER, SPOT, RESERVED = LADDER.namespace, LADDER.tier, LADDER.spot, LADDER.reserved


@pytest.fixture(scope="module")
def ladder(target: Target, controllers: Controllers) -> Iterator[None]:
    with applied(target, LADDER):
        yield


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
