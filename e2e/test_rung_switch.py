"""Real Kueue (v0.19.2) and the real JobSet webhook (v0.12.0) judge the reconciler's rung switch
(`hotswap.planner.rungs`), written by its own actuator.

Quota-only Kueue gives a requeued workload the first flavor whose quota fits, and evicting a JobSet frees exactly
the spot quota it held, so a plain requeue lands it on spot again (KEP-2560's flavor fallback is not in v0.19.2).
The switch: hold the Workload (`spec.active=false`) so Kueue evicts it and suspends the JobSet; pin the suspended
JobSet's pod templates to the next rung with a nodeSelector (the JobSet webhook lets nodeSelector change only while
suspended; node affinity stays immutable); delete the held Workload. The first test shows why the deletion: Kueue
keeps a suspended JobSet's Workload as it was when only its template's nodeSelector changes, so it would admit it
on spot again. The second runs the actuator's three writes and asserts Kueue admits the new Workload on the next
rung. The ClusterQueue's rungs here are spot, then a reservation. Admission is by quota alone (no TAS), so no node
is needed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from e2e import report
from e2e.conftest import Controllers, Target
from e2e.spot_ladder import QUEUE, SpotLadder, applied
from gke_tpu_priority.components.config.tpu import CAPACITY_LABEL
from gke_tpu_priority.components.workloads.jobset import TpuJobSetSpec, tpu_jobset
from gke_tpu_priority.hotswap.annotations import AnnotationKeys
from gke_tpu_priority.hotswap.kube.actuator import Actuator, Result
from gke_tpu_priority.hotswap.kube.client import new_api_client
from gke_tpu_priority.hotswap.kube.events import EventRecorder
from gke_tpu_priority.hotswap.kube.ratelimit import TokenBucket
from gke_tpu_priority.hotswap.kube.rung_pin import pin_patch
from gke_tpu_priority.hotswap.metrics import Metrics
from gke_tpu_priority.hotswap.planner.actions import ObjectRef, PinRung, Plan, StartRungSwitch

JsonObj = dict[str, Any]
WORKLOADS = "workloads.kueue.x-k8s.io"
JOBSETS = "jobsets.jobset.x-k8s.io"
LADDER = SpotLadder("e2e-rungs")
NAMESPACE, TIER, SPOT, RESERVED = LADDER.namespace, LADDER.tier, LADDER.spot, LADDER.reserved
KEYS = AnnotationKeys("hotswap.gke-tpu-priority.io")


@pytest.fixture(scope="module")
def ladder(target: Target, controllers: Controllers) -> Iterator[None]:
    with applied(target, LADDER):
        yield


def _workload(target: Target, jobset: str) -> JsonObj | None:
    for wl in target.kubectl.json("get", WORKLOADS, "-n", NAMESPACE)["items"]:
        if jobset in [o["name"] for o in wl["metadata"].get("ownerReferences", [])]:
            found: JsonObj = wl
            return found
    return None


def _until(what: str, probe: Any, timeout: float = 90) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        time.sleep(0.5)
    raise AssertionError(f"{what} within {timeout:.0f} s")


def _admitted_flavor(target: Target, jobset: str) -> str | None:
    wl = _workload(target, jobset)
    admission = (wl or {}).get("status", {}).get("admission")
    if not admission:
        return None
    flavors = {str(f) for ps in admission["podSetAssignments"] for f in ps.get("flavors", {}).values()}
    assert len(flavors) == 1, admission
    return flavors.pop()


def _create(target: Target, name: str) -> JsonObj:
    spec = TpuJobSetSpec.model_validate(
        {"name": name, "namespace": NAMESPACE, "queue": QUEUE, "priority": TIER, "topology": "4x4",
         "image": "busybox"}
    )  # fmt: skip
    obj = tpu_jobset(spec)
    response = target.rest.create(obj)
    assert response.ok, response.message
    assert _until("Kueue admits the JobSet", lambda: _admitted_flavor(target, name)) == SPOT
    return obj


def _jobset(target: Target, name: str) -> JsonObj:
    return target.kubectl.json("get", JOBSETS, name, "-n", NAMESPACE)


def _ref(obj: JsonObj, kind: str) -> ObjectRef:
    meta = obj["metadata"]
    return ObjectRef(kind, meta["namespace"], meta["name"], meta["uid"], meta.get("resourceVersion", ""))


def _suspended_and_out_of_quota(target: Target, name: str) -> bool:
    return _jobset(target, name)["spec"].get("suspend") is True and _admitted_flavor(target, name) is None


def test_kueue_keeps_a_suspended_jobsets_workload_when_only_its_node_selector_changes(
    target: Target, ladder: None
) -> None:
    name = "pin-only"
    obj = _create(target, name)
    try:
        first = _workload(target, name)
        assert first is not None
        patch = json.dumps({"spec": {"active": False}})
        target.kubectl.run("patch", WORKLOADS, first["metadata"]["name"], "-n", NAMESPACE, "--type=merge", "-p", patch)
        _until("Kueue suspends the held JobSet", lambda: _suspended_and_out_of_quota(target, name))
        js = _jobset(target, name)
        ops = pin_patch(js, js["metadata"]["uid"], ["slice"], CAPACITY_LABEL, "reservation")
        assert isinstance(ops, list) and ops
        target.kubectl.run("patch", JOBSETS, name, "-n", NAMESPACE, "--type=json", "-p", json.dumps(ops))
        time.sleep(5)  # Kueue's job reconciler has long seen the change by then
        after = _workload(target, name)
        assert after is not None and after["metadata"]["uid"] == first["metadata"]["uid"]
        selectors = [ps["template"]["spec"].get("nodeSelector", {}) for ps in after["spec"]["podSets"]]
        report.section("controllers").setdefault("rungSwitch", {})["pinOnlyWorkloadUpdated"] = any(
            CAPACITY_LABEL in s for s in selectors
        )
        assert all(CAPACITY_LABEL not in s for s in selectors), selectors
    finally:
        target.rest.delete(obj)


async def test_the_actuators_rung_switch_lands_the_jobset_on_the_next_rung(target: Target, ladder: None) -> None:
    name = "switched"
    obj = _create(target, name)
    seen: dict[str, Any] = {}
    api = await new_api_client(str(target.kubectl.kubeconfig), target.kubectl.context)
    try:
        metrics = Metrics()
        actuator = Actuator(
            api,
            KEYS,
            limiter=TokenBucket(100, 100),
            recorder=EventRecorder(api, "e2e", metrics),
            metrics=metrics,
            is_leader=lambda: True,
        )
        first = _workload(target, name)
        assert first is not None
        js_ref = _ref(_jobset(target, name), "JobSet")
        start = StartRungSwitch(_ref(first, "Workload"), js_ref, "reservation", {KEYS.rung_switch: "reservation"})
        (outcome,) = await actuator.execute(Plan(now=datetime.now(UTC), actions=(start,)))
        assert outcome.result is Result.APPLIED, outcome.detail
        _until("Kueue suspends the held JobSet", lambda: _suspended_and_out_of_quota(target, name))

        held = _workload(target, name)
        assert held is not None
        pin = PinRung(_ref(held, "Workload"), js_ref, "reservation", CAPACITY_LABEL, ("slice",))
        (outcome,) = await actuator.execute(Plan(now=datetime.now(UTC), actions=(pin,)))
        assert outcome.result is Result.APPLIED, outcome.detail

        flavor = _until("Kueue admits the recreated Workload", lambda: _admitted_flavor(target, name))
        after = _workload(target, name)
        assert after is not None
        seen |= {"flavorAfterSwitch": flavor, "workloadRecreated": after["metadata"]["uid"] != first["metadata"]["uid"]}
        assert flavor == RESERVED and seen["workloadRecreated"]
        assert KEYS.rung_switch not in after["metadata"].get("annotations", {})
        assert _jobset(target, name)["spec"].get("suspend") is False
    finally:
        report.section("controllers").setdefault("rungSwitch", {}).update(seen)
        await api.close()
        target.rest.delete(obj)
