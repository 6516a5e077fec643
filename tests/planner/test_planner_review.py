"""Table tests for the review of the planner against the spec and Kueue (issue 11): minimality across shapes
(I7), release order (B.7(a)), held Workloads outside the view (I10) and `reclaimWithinCohort: Any`."""

from __future__ import annotations

from datetime import timedelta

from hotswap.annotations import AnnotationKeys, format_time
from hotswap.config import HotswapConfig
from hotswap.model import ClusterSnapshot, JobSet
from hotswap.planner import plan
from hotswap.planner.actions import HoldVictim, Plan, ReleaseReason, ReleaseVictim
from tests.planner.builders import T0, Fleet, JobSetBuilder, WorkloadBuilder
from tests.planner.invariants import assert_invariants, idempotence_violations

CFG = HotswapConfig()
KEYS = AnnotationKeys(CFG.annotation_domain)
FAILED_AT = T0 - timedelta(minutes=1)


def run(snapshot: ClusterSnapshot, config: HotswapConfig = CFG) -> Plan:
    result = plan(snapshot, T0, config)
    assert_invariants(snapshot, result, config)
    assert idempotence_violations(snapshot, result, config) == []
    return result


def hold_annotations(preemptor: str = "ml/high/js-high/0", op_id: str = "op-1", since: object = None) -> dict[str, str]:
    at = T0 - timedelta(minutes=5) if since is None else since
    return {KEYS.held_by: preemptor, KEYS.op_id: op_id, KEYS.held_since: format_time(at)}  # type: ignore[arg-type]


def held_by_us(fleet: Fleet, js: JobSet, **kwargs: object) -> None:
    builder = WorkloadBuilder.from_obj(fleet.workload_of(js)).active(False)
    for key, value in hold_annotations(**kwargs).items():  # type: ignore[arg-type]
        builder.annotation(key, value)
    fleet.set_workload(builder.obj())


def releases(result: Plan) -> dict[str, ReleaseReason]:
    return {a.workload.key: a.reason for a in result.actions if isinstance(a, ReleaseVictim)}


# --- 8. held Workloads outside the view -------------------------------------------------------------------------


def test_held_workload_of_a_namespace_no_longer_configured_is_released() -> None:
    fleet = Fleet().slices("a0", "b0")
    fleet.run(JobSetBuilder("ml", "high").replicated_job("w", 1), ["a0"], 1000)
    old = fleet.run(JobSetBuilder("old", "low").replicated_job("w", 1), ["b0"], 10)
    held_by_us(fleet, old)
    config = CFG.model_copy(update={"namespaces": ("ml",)})
    result = run(fleet.snapshot(), config)
    wl = fleet.workload_of(old)
    assert releases(result) == {wl.key: ReleaseReason.OUT_OF_SCOPE}
    (release,) = (a for a in result.actions if isinstance(a, ReleaseVictim))
    assert set(release.remove_annotations) >= {KEYS.held_by, KEYS.op_id, KEYS.held_since}
    assert result.diagnostics.victims_released == 1 and result.diagnostics.held_workloads == 0


def test_held_workload_whose_jobset_is_gone_is_released() -> None:
    fleet = Fleet().slices("a0")
    fleet.run(JobSetBuilder("ml", "high").replicated_job("w", 1), ["a0"], 1000)
    stray = WorkloadBuilder("ml", "jobset-gone").priority(10).admitted("cq").active(False)
    for key, value in hold_annotations().items():
        stray.annotation(key, value)
    fleet.set_workload(stray.obj())
    result = run(fleet.snapshot())
    assert releases(result) == {"ml/jobset-gone": ReleaseReason.OUT_OF_SCOPE}


def test_held_workload_in_view_keeps_the_normal_rules() -> None:
    """Control: a held victim of an open op in a configured namespace stays held (E3)."""
    fleet = Fleet().slices("a0")
    low = fleet.run(JobSetBuilder("ml", "low").replicated_job("w", 1), ["a0"], 10)
    held_by_us(fleet, low)
    config = CFG.model_copy(update={"namespaces": ("ml",)})
    result = run(fleet.snapshot(), config)
    assert ReleaseReason.OUT_OF_SCOPE not in releases(result).values()
    assert not any(isinstance(a, HoldVictim) for a in result.actions)
