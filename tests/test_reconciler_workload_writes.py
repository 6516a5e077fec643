"""What the reconciler writes to a Workload at run time (hold, release, record and clear an operation) stays valid
for the pinned Kueue Workload schema. That Kueue's Workload webhook accepts those writes is e2e/test_hotswap.py, where
the reconciler holds and releases real Workloads."""

from __future__ import annotations


def test_reconciler_workload_writes_pass_the_workload_schema() -> None:
    from datetime import UTC, datetime

    from gke_tpu_priority.hotswap.annotations import AnnotationKeys, OpRecord
    from gke_tpu_priority.hotswap.config import HotswapConfig
    from gke_tpu_priority.hotswap.kube.actuator import WorkloadChecks
    from gke_tpu_priority.hotswap.planner.actions import (
        ClearOp,
        HoldVictim,
        ObjectRef,
        RecordOp,
        ReleaseReason,
        ReleaseVictim,
    )
    from testkit.apiserver import merge_patch
    from tests.hotswap_io import cluster
    from tests.support.crd_validation import validate

    keys = AnnotationKeys(HotswapConfig().annotation_domain)
    checks = WorkloadChecks(keys)
    js = cluster.jobset("victim", 2, "training-low")
    js["metadata"]["uid"] = "u-1"
    admitted = cluster.workload(js, 1_000_000)
    admitted["apiVersion"], admitted["kind"] = "kueue.x-k8s.io/v1beta2", "Workload"
    admitted["spec"]["podSets"][0]["template"] = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    admitted["status"]["admission"]["podSetAssignments"] = [
        {
            "name": "workers",
            "count": 4,
            "flavors": {"google.com/tpu": "v6e-4x4"},
            "resourceUsage": {"google.com/tpu": "16"},
        }
    ]
    for condition in admitted["status"]["conditions"]:
        condition["message"] = condition["reason"]
    assert validate(admitted).errors == (), validate(admitted).describe()
    ref = ObjectRef("Workload", "team-a", admitted["metadata"]["name"], "u-2")
    hold_annotations = {
        keys.held_by: "team-a/jobset-preemptor",
        keys.op_id: "op-1",
        keys.held_since: "2026-12-03T17:00:00Z",
    }
    bodies = [
        checks.hold(HoldVictim(ref, "op-1", ref, hold_annotations))[0],
        checks.release(
            ReleaseVictim(
                ref, "op-1", ReleaseReason.CAPACITY, keys.victim_hold_keys(), {keys.released_at: "2026-12-03T17:05:00Z"}
            )
        )[0],
        checks.record_op(
            RecordOp(ref, OpRecord("op-1", 0, ("a", "b"), ("ml/victim",), datetime(2026, 12, 3, tzinfo=UTC)), keys.op)
        )[0],
        checks.clear_op(ClearOp(ref, "op-1", (keys.op,)))[0],
    ]
    current = admitted
    for body in bodies:
        updated = merge_patch(current, body)
        assert validate(updated).errors == (), body  # annotation keys, spec.active: what the API server checks
        current = updated
    assert current["spec"]["active"] is True
