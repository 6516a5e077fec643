"""A multi-team scenario shaped like the prod stack (ClusterQueues in a cohort, borrowing and
lending), where the hero controller's premise holds and hero drains; cohort quota as Kueue checks it."""

from __future__ import annotations

import pytest

from sim.cohort import Cohort
from sim.params import ClusterQueueSpec, Fleet, JobClass, Scenario
from sim.runner import run_one
from sim.scenarios import multi_team, standard_scenarios
from sim.state import Job, JobState

CHIPS = 16


def _cohort() -> Cohort:
    scenario = multi_team()
    cohort = Cohort.of(scenario, CHIPS)
    assert cohort is not None
    return cohort


def _job(i: int, cls: JobClass, *, admitted: bool = True, at: float = 0.0) -> Job:
    job = Job(id=i, name=f"{cls.name}-{i}", cls=cls, work_s=1.0, created=float(i))
    if admitted:
        job.state, job.quota_reserved, job.last_admitted_at = JobState.ADMITTED, True, at
    return job


def test_one_cluster_queue_has_no_cohort() -> None:
    assert Cohort.of(Scenario(), CHIPS) is None


def test_a_queue_borrows_what_the_cohort_lends_and_no_more() -> None:
    cohort = _cohort()
    # team-a nominal 10 slices, team-b 22 slices of which it lends 4.
    assert cohort.fits({"team-a": 0, "team-b": 0}, "team-a", 14 * CHIPS)
    assert not cohort.fits({"team-a": 0, "team-b": 0}, "team-a", 15 * CHIPS)  # 10 own + 4 lent by team-b
    assert cohort.fits({"team-a": 12 * CHIPS, "team-b": 20 * CHIPS}, "team-b", 0)
    # team-b's own 18 slices are never lent: with 20 in use and team-a borrowing 2, one more fits team-b only
    # while team-a's borrowed quota leaves room in the pool.
    assert cohort.fits({"team-a": 10 * CHIPS, "team-b": 20 * CHIPS}, "team-a", 2 * CHIPS)
    assert not cohort.fits({"team-a": 10 * CHIPS, "team-b": 21 * CHIPS}, "team-a", 2 * CHIPS)
    assert not cohort.fits({"team-a": 0, "team-b": 0}, "team-b", 33 * CHIPS)


def test_reclaim_takes_only_borrowed_lower_priority_work_of_other_queues() -> None:
    scenario = multi_team()
    high, _medium, low = scenario.classes
    cohort = _cohort()
    team_b = [_job(i, low, at=float(i)) for i in range(22)]  # team-b at its nominal: borrows nothing
    hero = _job(100, high, admitted=False)
    used = {"team-a": 10 * CHIPS, "team-b": 22 * CHIPS}
    # Quota does not fit (the pool is used up by team-b's lent part... team-b is within nominal): no candidate.
    assert cohort.victims(hero, team_b, used, CHIPS) is None
    borrower = _job(200, low, at=500.0)
    used_b = {"team-a": 8 * CHIPS, "team-b": 23 * CHIPS}  # team-b borrows one slice
    victims = cohort.victims(hero, [*team_b, borrower], used_b, CHIPS)
    assert victims == [borrower]  # the newest borrowed workload, and only down to team-b's nominal
    # A higher-priority borrower is never reclaimed by lower-priority work.
    team_b_low = _job(300, low, admitted=False)
    hero_borrowing = _job(301, high, at=1.0)
    assert cohort.victims(team_b_low, [hero_borrowing], {"team-a": 12 * CHIPS, "team-b": 18 * CHIPS}, CHIPS) in (
        None,
        [],
    )


def test_multi_team_is_a_standard_scenario_shaped_like_prod() -> None:
    scenario = next(sc for sc in standard_scenarios() if sc.name == "multi_team")
    assert [q.name for q in scenario.cluster_queues] == ["team-a", "team-b"]
    assert sum(q.nominal_slices for q in scenario.cluster_queues) == scenario.fleet.slices
    demand = {q.name: 0 for q in scenario.cluster_queues}
    for c in scenario.classes:
        demand[c.queue] += c.slices * c.population
    assert demand == {"team-a": 12, "team-b": 20}  # team-a borrows 2 slices team-b lends
    assert not scenario.checkpoint_signal


@pytest.mark.parametrize("bad", ["", "team-c"])
def test_a_class_must_name_a_cluster_queue(bad: str) -> None:
    with pytest.raises(ValueError, match="queue"):
        Scenario(
            classes=(JobClass(name="a", priority=1, slices=1, population=1, mean_duration_h=1.0, queue=bad),),
            cluster_queues=(ClusterQueueSpec(name="team-a", nominal_slices=32),),
        )


def test_cohort_and_ladder_do_not_mix() -> None:
    with pytest.raises(ValueError, match="ladder"):
        Scenario(
            fleet=Fleet(slices=32, spot_slices=8),
            classes=(JobClass(name="a", priority=1, slices=1, population=1, mean_duration_h=1.0, queue="t"),),
            cluster_queues=(ClusterQueueSpec(name="t", nominal_slices=32),),
        )


def test_hero_drains_in_the_multi_team_scenario() -> None:
    """Hero's premise holds: its drains run (the actions hotswap.json records), and Kueue's own preemption takes
    no team-b workload within team-b's quota."""
    scenario = multi_team(seed=20260901, scale=0.1)
    hero = run_one(scenario, "hero").summary["actions"]
    assert hero["hero_drains"] > 0
    assert hero["hero_drain_victims"] >= hero["hero_drains"]
    assert hero.get("kueue_admission_preemptions", 0) == 0
