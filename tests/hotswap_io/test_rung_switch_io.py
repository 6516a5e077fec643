"""The rung switch's writes against the fake API server: the hold, the pin (a conditional JSON patch of the
suspended JobSet) with the Workload's deletion, and giving up; plus the pure patch builder."""

from __future__ import annotations

from typing import Any

import pytest

from gke_tpu_priority.hotswap.kube.actuator import Result
from gke_tpu_priority.hotswap.kube.release_all import release_all
from gke_tpu_priority.hotswap.kube.rung_pin import pin_patch
from gke_tpu_priority.hotswap.planner.actions import EndRungSwitch, PinRung, StartRungSwitch
from gke_tpu_priority.hotswap.slices import CAPACITY_LABEL, QUEUED_CAPACITY
from testkit.apiserver import FakeApiServer

from .cluster import JOBSETS, NS, WORKLOADS, jobset
from .conftest import ClientFactory
from .test_actuator import KEYS, make_actuator, plan_of, ref, seed_workload

pytestmark = pytest.mark.timeout(20)

SWITCHING = {KEYS.rung_switch: QUEUED_CAPACITY, KEYS.rung_switch_since: "2026-09-01T12:00:00Z"}


def seed_jobset(api: FakeApiServer, suspended: bool, selector: dict[str, str] | None = None) -> Any:
    obj = jobset("top", 1, "p2000")
    obj["spec"]["suspend"] = suspended
    if selector is not None:
        obj["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["nodeSelector"] = selector
    return api.put(JOBSETS, obj)


def pin(wl: Any, js: Any) -> PinRung:
    return PinRung(ref(wl), ref(js, "JobSet"), QUEUED_CAPACITY, CAPACITY_LABEL, ("workers",))


def selector_of(api: FakeApiServer) -> dict[str, str]:
    stored = api.get(JOBSETS, "top", NS)
    assert stored is not None
    return dict(stored["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["nodeSelector"])


async def test_start_is_one_write_of_the_annotations_and_active_false(
    api: FakeApiServer, make_client: ClientFactory
) -> None:
    wl = seed_workload(api, "jobset-top")
    js = seed_jobset(api, suspended=False)
    action = StartRungSwitch(ref(wl), ref(js, "JobSet"), QUEUED_CAPACITY, SWITCHING)
    (outcome,) = await make_actuator(await make_client("r")).execute(plan_of(action))
    assert outcome.result is Result.APPLIED
    (write,) = api.writes("r")
    assert write.body["spec"] == {"active": False}
    stored = api.get(WORKLOADS, "jobset-top", NS)
    assert stored is not None and stored["metadata"]["annotations"] == SWITCHING


async def test_pin_patches_the_suspended_jobset_then_deletes_the_held_workload(
    api: FakeApiServer, make_client: ClientFactory
) -> None:
    wl = seed_workload(api, "jobset-top", SWITCHING, active=False)
    js = seed_jobset(api, suspended=True)
    (outcome,) = await make_actuator(await make_client("r")).execute(plan_of(pin(wl, js)))
    assert outcome.result is Result.APPLIED, outcome.detail
    assert selector_of(api)[CAPACITY_LABEL] == QUEUED_CAPACITY
    assert api.get(WORKLOADS, "jobset-top", NS) is None
    patch, delete = api.writes("r")
    assert patch.content_type.startswith("application/json-patch+json")
    assert delete.method == "DELETE"


async def test_pin_of_a_jobset_that_is_running_again_is_refused_by_the_server_and_nothing_is_deleted(
    api: FakeApiServer, make_client: ClientFactory
) -> None:
    wl = seed_workload(api, "jobset-top", SWITCHING, active=False)
    js = seed_jobset(api, suspended=True)
    api.patch(JOBSETS, "top", {"spec": {"suspend": False}}, NS)  # resumed after the read the plan was made on
    actuator = make_actuator(await make_client("r"))
    (outcome,) = await actuator.execute(plan_of(pin(wl, js)))
    assert outcome.result is Result.CONFLICT
    assert CAPACITY_LABEL not in selector_of(api)
    assert api.get(WORKLOADS, "jobset-top", NS) is not None


async def test_pin_of_a_workload_no_longer_held_for_the_switch_is_abandoned(
    api: FakeApiServer, make_client: ClientFactory
) -> None:
    wl = seed_workload(api, "jobset-top", SWITCHING, active=True)
    js = seed_jobset(api, suspended=True)
    (outcome,) = await make_actuator(await make_client("r")).execute(plan_of(pin(wl, js)))
    assert outcome.result is Result.ABANDONED
    assert api.writes("r") == []


async def test_end_reactivates_and_removes_the_annotations(api: FakeApiServer, make_client: ClientFactory) -> None:
    wl = seed_workload(api, "jobset-top", SWITCHING, active=False)
    action = EndRungSwitch(ref(wl), KEYS.rung_switch_keys(), "given up")
    (outcome,) = await make_actuator(await make_client("r")).execute(plan_of(action))
    assert outcome.result is Result.APPLIED
    stored = api.get(WORKLOADS, "jobset-top", NS)
    assert stored is not None and stored["spec"]["active"] is True and stored["metadata"]["annotations"] == {}


def test_pin_patch_adds_the_key_escaped_and_is_conditional_on_uid_and_suspend() -> None:
    js = jobset("top", 1, "p")
    ops = pin_patch(js, "uid-1", ["workers"], CAPACITY_LABEL, QUEUED_CAPACITY)
    assert ops == [
        {"op": "test", "path": "/metadata/uid", "value": "uid-1"},
        {"op": "test", "path": "/spec/suspend", "value": True},
        {
            "op": "add",
            "path": "/spec/replicatedJobs/0/template/spec/template/spec/nodeSelector/gke-tpu-priority.io~1capacity",
            "value": QUEUED_CAPACITY,
        },
    ]


def test_pin_patch_is_empty_when_pinned_and_refuses_another_capacity_or_a_missing_job() -> None:
    js = jobset("top", 1, "p")
    selector = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["nodeSelector"]
    selector[CAPACITY_LABEL] = QUEUED_CAPACITY
    assert pin_patch(js, "u", ["workers"], CAPACITY_LABEL, QUEUED_CAPACITY) == []
    selector[CAPACITY_LABEL] = "spot"
    assert "already selects gke-tpu-priority.io/capacity=spot" in str(
        pin_patch(js, "u", ["workers"], CAPACITY_LABEL, QUEUED_CAPACITY)
    )
    assert "not found" in str(pin_patch(js, "u", ["coordinator"], CAPACITY_LABEL, QUEUED_CAPACITY))
    del js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["nodeSelector"]
    (_, _, add) = pin_patch(js, "u", ["workers"], CAPACITY_LABEL, QUEUED_CAPACITY)
    assert add["path"].endswith("/nodeSelector") and add["value"] == {CAPACITY_LABEL: QUEUED_CAPACITY}


async def test_release_all_gives_a_switch_in_flight_back(api: FakeApiServer, make_client: ClientFactory) -> None:
    """Uninstalling mid-switch must not leave the top tier's Workload inactive (I10)."""
    seed_workload(api, "jobset-top", {**SWITCHING, KEYS.hold_count: "1"}, active=False)
    report = await release_all(await make_client("ops"), KEYS)
    assert report.released == [f"{NS}/jobset-top"] and report.ok
    stored = api.get(WORKLOADS, "jobset-top", NS)
    assert stored is not None and stored["spec"]["active"] is True
    assert stored["metadata"]["annotations"] == {KEYS.hold_count: "1"}
