"""The hotswap e2e scenario's pure parts (e2e/hotswap_scenario.py): what it deploys and submits, and how a
timeline of observations becomes the report's figures."""

from __future__ import annotations

from typing import Any

import pytest

from e2e.hotswap_scenario import (
    BATCH_JOB,
    BATCH_POOL,
    HP_NAME,
    STACK,
    Fault,
    Mode,
    PodView,
    Sample,
    WorkloadView,
    back_victims,
    evicted_victims,
    expected_pods,
    lost_workloads,
    milestones,
    outcome,
    partial_evictions,
    pod_view,
    recovered_at,
    requeued_victims,
    scenario_jobsets,
    scenario_platform,
    scenario_workloads,
    trace,
    workload_view,
)
from testkit.mock_runtime import load_stack_config
from tools.bench_docs import hotswap_runs_table

EXPECTED = {"lp-0": 4, "lp-1": 4, "lp-host": 1, HP_NAME: 8}


def _pods(jobset: str, pool: str, count: int, created: float, phase: str = "Running") -> list[PodView]:
    return [
        PodView(f"{jobset}-{created:g}-{i}", jobset, f"{pool}-{i}", pool, phase, created, False) for i in range(count)
    ]


def _wl(jobset: str, active: bool = True, admitted: bool = True, evicted: bool = False, **kw: Any) -> WorkloadView:
    return WorkloadView(
        name=f"jobset-{jobset}", jobset=jobset, active=active, admitted=admitted, evicted=evicted,
        evicted_reason=kw.get("reason", ""), requeued=kw.get("requeued", False), finished=kw.get("finished", False),
    )  # fmt: skip


def _sample(at: float, pods: list[PodView], workloads: dict[str, WorkloadView]) -> Sample:
    return Sample(at, tuple(pods), tuple(workloads.values()), tuple(EXPECTED))


def _steady(at: float, hp_created: float = 0.0, hp_pools: tuple[str, str] = ("a", "b")) -> tuple[list[PodView], dict]:
    pods = [
        *_pods("lp-0", "c", 4, 0.0),
        *_pods("lp-1", "d", 4, 0.0),
        *_pods("lp-host", "e", 1, 0.0),
        *_pods(HP_NAME, hp_pools[0], 4, hp_created),
        *_pods(HP_NAME, hp_pools[1], 4, hp_created),
    ]
    return pods, {name: _wl(name) for name in EXPECTED}


def _hotswap_run() -> list[Sample]:
    """Fault at t=100 on pool a; lp-0 (pool c) held at 105, gone by 107; hp runs on b and c from 112; the repair at
    160; lp-0 released at 175 and running on a from 180."""
    pods, wls = _steady(0)
    samples = [_sample(t, pods, wls) for t in (90.0, 95.0, 100.0)]
    hp_b = [p for p in pods if p.jobset == HP_NAME and p.pool == "b"]
    others = [p for p in pods if p.jobset in ("lp-1", "lp-host")]
    lp0 = [p for p in pods if p.jobset == "lp-0"]
    samples.append(_sample(102.0, [*others, *lp0, *hp_b], wls))  # old hp pods leaving
    held = {**wls, "lp-0": _wl("lp-0", active=False)}
    samples.append(_sample(105.0, [*others, *lp0], held))
    evicted = {**wls, "lp-0": _wl("lp-0", active=False, admitted=False, evicted=True, reason="Deactivated")}
    samples.append(_sample(107.0, list(others), evicted))
    new_hp = [*_pods(HP_NAME, "b", 4, 108.0, "Pending"), *_pods(HP_NAME, "c", 4, 108.0, "Pending")]
    samples.append(_sample(109.0, [*others, *new_hp], evicted))
    running_hp = [*_pods(HP_NAME, "b", 4, 108.0), *_pods(HP_NAME, "c", 4, 108.0)]
    samples.append(_sample(112.0, [*others, *running_hp], evicted))
    samples.append(_sample(160.0, [*others, *running_hp], evicted))
    requeued = {**wls, "lp-0": _wl("lp-0", active=True, admitted=False, requeued=True)}
    samples.append(_sample(175.0, [*others, *running_hp], requeued))
    back = [*others, *running_hp, *_pods("lp-0", "a", 4, 176.0)]
    samples.append(_sample(180.0, back, wls))
    return samples


def test_the_scenario_stack_is_the_dev_stack_with_its_4x4_pool_sized_to_the_fleet() -> None:
    base = load_stack_config("dev")
    config = scenario_platform(base)
    pools = {p["name"]: p for p in config["gke-tpu-priority:platform"]["tpuPools"]}
    assert pools["dev-4x4"]["slices"] == 4
    assert pools["dev-2x2"] == {p["name"]: p for p in base["gke-tpu-priority:platform"]["tpuPools"]}["dev-2x2"]
    assert base["gke-tpu-priority:platform"]["tpuPools"][1]["slices"] == 1  # the stack itself is untouched


def test_the_scenario_fills_the_fleet_with_template_jobsets() -> None:
    jobsets = {j["metadata"]["name"]: j for j in scenario_jobsets()}
    assert {n: expected_pods(j) for n, j in jobsets.items()} == EXPECTED
    assert jobsets[HP_NAME]["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "training-high"
    assert {j["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] for n, j in jobsets.items() if n != HP_NAME} == {
        "training-low"
    }
    assert list(jobsets)[-1] == HP_NAME  # the low-priority JobSets fill the fleet first


def test_a_hotswap_run_reduces_to_its_figures() -> None:
    samples = _hotswap_run()
    assert recovered_at(samples, 100.0, 8) == 112.0
    assert evicted_victims(samples) == ["lp-0"]
    assert requeued_victims(samples, ["lp-0"]) == ["lp-0"]
    assert back_victims(samples[-1], ["lp-0"], EXPECTED) == ["lp-0"]
    assert partial_evictions(samples, EXPECTED) == []
    assert lost_workloads(samples[2], samples[-1]) == []
    marks = milestones(samples, 100.0, ["lp-0"], EXPECTED)
    assert marks == {
        "hpOldPodsLeaving": 102.0, "hpOldPodsGone": 105.0, "hpNewPodsCreated": 109.0, "hpNewPodsAllCreated": 109.0,
        "victimHeld": 105.0, "victimEvicted": 107.0, "victimQuotaReleased": 107.0, "victimPodsGone": 107.0,
        "victimReleased": 175.0, "victimReadmitted": 180.0, "victimPodsCreated": 180.0, "victimRunning": 180.0,
    }  # fmt: skip
    result = outcome(Mode.RECONCILER, Fault.HOST_FAILURE, "a-1", samples, 100.0, 160.0, EXPECTED, {}).as_report()
    assert result["recoverySeconds"] == 12.0
    assert result["recoveredBeforeRepair"] is True
    assert (result["victimsEvicted"], result["victimsRequeued"], result["victimsBack"]) == (1, 1, 1)
    assert (result["partialEvictions"], result["lostWorkloads"]) == (0, 0)
    assert result["highPriorityPoolsAfter"] == ["b", "c"]
    assert result["timelineSeconds"]["highPriorityRecovered"] == 12.0


def test_a_victim_left_half_running_is_a_partial_eviction() -> None:
    pods, wls = _steady(0)
    half = [p for p in pods if not (p.jobset == "lp-1" and p.node.endswith(("-2", "-3")))]
    samples = [_sample(t, half, wls) for t in (100.0, 110.0, 125.0)]
    assert partial_evictions(samples, EXPECTED) == ["lp-1"]
    # A moment of it (a restart passing through) is not one.
    assert partial_evictions(samples[:2], EXPECTED) == []


def test_a_workload_that_is_gone_or_finished_is_lost() -> None:
    pods, wls = _steady(0)
    start = _sample(0.0, pods, wls)
    gone = {k: v for k, v in wls.items() if k != "lp-1"}
    finished = {**gone, "lp-0": _wl("lp-0", finished=True)}
    assert lost_workloads(start, _sample(10.0, pods, finished)) == ["lp-0", "lp-1"]


def test_without_the_new_attempt_running_there_is_no_recovery() -> None:
    pods, wls = _steady(0)
    assert recovered_at([_sample(t, pods, wls) for t in (100.0, 200.0)], 100.0, 8) is None


def test_kueue_and_pod_objects_are_read_as_the_servers_write_them() -> None:
    workload = {
        "metadata": {"name": "jobset-lp-0-1", "ownerReferences": [{"kind": "JobSet", "name": "lp-0"}]},
        "spec": {"active": False},
        "status": {
            "conditions": [
                {"type": "Evicted", "status": "True", "reason": "Deactivated"},
                {"type": "Admitted", "status": "False"},
                {"type": "Requeued", "status": "False"},
            ]
        },
    }
    assert workload_view(workload) == WorkloadView(
        "jobset-lp-0-1", "lp-0", False, False, True, "Deactivated", False, False
    )
    pod = {
        "metadata": {"name": "p", "labels": {"jobset.sigs.k8s.io/jobset-name": "hp"}, "deletionTimestamp": "x"},
        "spec": {"nodeName": "tpu-4x4-0-1"},
        "status": {"phase": "Running"},
    }
    assert pod_view(pod, 5.0, {"tpu-4x4-0-1": "tpu-4x4-0"}) == PodView(
        "p", "hp", "tpu-4x4-0-1", "tpu-4x4-0", "Running", 5.0, True
    )


def test_the_trace_keeps_only_changes() -> None:
    samples = _hotswap_run()
    lines = trace(samples, 100.0)
    assert [line["t"] for line in lines][:3] == [-10.0, 2.0, 5.0]
    assert lines[0]["lp-0"] == {"pods": {"Running": 4}, "workload": "AQ", "pools": ["c"]}


@pytest.mark.parametrize("fault", list(Fault))
def test_every_fault_has_a_name_for_the_report(fault: Fault) -> None:
    assert fault.value == fault.value.lower() and " " not in fault.value


def test_the_stack_enables_fast_fail_but_only_the_unreachable_run_opts_in() -> None:
    config = scenario_platform(load_stack_config(STACK))
    settings = config["gke-tpu-priority:platform"]["hotswap"]["settings"]
    assert settings["fastFail"] == {"enabled": True, "after": "10s"}
    annotation = "hotswap.gke-tpu-priority.io/fast-fail"
    plain = {j["metadata"]["name"]: j for j in scenario_workloads()}
    opted = {j["metadata"]["name"]: j for j in scenario_workloads(fast_fail=True)}
    assert all(annotation not in j["metadata"].get("annotations", {}) for j in plain.values())
    assert opted[HP_NAME]["metadata"]["annotations"][annotation] == "true"
    assert [n for n, j in opted.items() if annotation in j["metadata"].get("annotations", {})] == [HP_NAME]


def test_the_batch_job_variant_puts_a_plain_job_on_one_pool_first() -> None:
    objects = scenario_workloads(with_batch_job=True)
    assert [o["metadata"]["name"] for o in objects] == [BATCH_JOB, "lp-0", "lp-host", HP_NAME]
    job = objects[0]
    assert (job["apiVersion"], job["kind"], expected_pods(job)) == ("batch/v1", "Job", 4)
    pod = job["spec"]["template"]["spec"]
    assert pod["nodeSelector"]["cloud.google.com/gke-nodepool"] == BATCH_POOL
    assert pod["containers"][0]["resources"]["limits"] == {"google.com/tpu": "4"}
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "training"
    # A plain Job's pods are counted under the Job; a JobSet's under the JobSet, not its child Job.
    plain = {"metadata": {"name": "p", "labels": {"batch.kubernetes.io/job-name": BATCH_JOB}}, "spec": {}}
    child = {
        "metadata": {
            "name": "q",
            "labels": {"batch.kubernetes.io/job-name": "hp-slice-0", "jobset.sigs.k8s.io/jobset-name": "hp"},
        },
        "spec": {},
    }
    assert pod_view(plain, 0.0, {}).jobset == BATCH_JOB
    assert pod_view(child, 0.0, {}).jobset == "hp"
    assert scenario_workloads() == scenario_jobsets()


def test_a_runs_outcome_becomes_its_row_of_the_side_by_side_table() -> None:
    run = outcome(Mode.OFF, Fault.SPOT_PREEMPTION, "a-1", _hotswap_run(), 100.0, 160.0, EXPECTED, {}).as_report()
    table = hotswap_runs_table([run])
    assert table.splitlines()[-1] == "| off | spot-preemption | 12.0 | yes | 1 / 1 / 1 | 0 | 0 | no |"
