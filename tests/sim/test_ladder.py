"""Capacity ladder in the simulator: spot preemptions, queued flex-start capacity, flavor order."""

from __future__ import annotations

from datetime import timedelta

import pytest

from gke_tpu_priority.hotswap.config import HotswapConfig
from gke_tpu_priority.hotswap.model import ConditionStatus, Node, SliceShape
from gke_tpu_priority.hotswap.planner.actions import ReleaseReason, ReleaseVictim
from gke_tpu_priority.hotswap.slices import CAPACITY_LABEL, QUEUED_LABEL, QUEUED_TAINT, SliceHealth, classify_slices
from sim import kubescheduler, kueue
from sim.params import (
    HOUR,
    Capacity,
    FailureKind,
    Failures,
    Fleet,
    JobClass,
    RepairBand,
    Scenario,
)
from sim.policies.none import NonePolicy
from sim.policies.reconciler import ReconcilerPolicy
from sim.runner import POLICIES, run_one
from sim.scenarios import ladder, standard_scenarios
from sim.simulator import Simulator
from sim.snapshot import SPOT_LABEL, at, build_snapshot, node_labels
from sim.state import Job, JobState, Pod, PodPhase, Slice
from tests.sim.builders import HIGH, LOW, NEVER, two_classes

QUIET = Failures(slice_mtbf_h=1e9, spot_mtbf_h=1e9)
"""Neither hardware failures nor spot preemptions unless a test injects them."""


def _ladder(
    name: str,
    reservation: int,
    spot: int,
    queued: int,
    high: tuple[int, int] = (1, 0),
    low: tuple[int, int] = (1, 0),
    failures: Failures = QUIET,
    horizon_h: float = 1.0,
) -> Scenario:
    """`high`/`low` are (slices per JobSet, population); nothing finishes by itself."""
    base = two_classes(name, 5, horizon_h, reservation + spot + queued, high=(*high, NEVER), low=(*low, NEVER))
    fleet = Fleet(slices=reservation + spot + queued, spot_slices=spot, queued_slices=queued)
    return base.model_copy(update={"fleet": fleet, "failures": failures})


def _job(jid: int, priority: int, slices: int = 1) -> Job:
    cls = JobClass(name=f"c{priority}", priority=priority, slices=slices, population=1, mean_duration_h=1.0)
    return Job(id=jid, name=f"j{jid}", cls=cls, work_s=1.0, created=float(jid))


def _shape(sim: Simulator) -> SliceShape:
    fleet = sim.scenario.fleet
    return SliceShape(fleet.accelerator, fleet.topology, fleet.chips_per_host)


def _nodes(sim: Simulator, pool: str | None = None) -> list[Node]:
    """The TPU nodes the planner would see (of one pool)."""
    snap = build_snapshot(sim.slices, list(sim.live), [], _shape(sim), sim.scenario.fleet.machine_type)
    return [n for n in snap.nodes if pool is None or n.node_pool == pool]


def _pools(sim: Simulator, job: Job) -> set[Slice]:
    return {p.slice for p in job.pods if p.slice is not None}


# ------------------------------------------------------------------ ladder order of admission
def test_kueue_fills_reservation_then_spot_then_queued_in_priority_order() -> None:
    jobs = [_job(0, LOW), _job(1, HIGH), _job(2, LOW), _job(3, LOW), _job(4, LOW)]
    quotas = {Capacity.RESERVATION: 16, Capacity.SPOT: 16, Capacity.QUEUED: 32}
    plan = kueue.plan_ladder_admission(jobs, quotas, chips_per_slice=16)
    assert [j.id for j in plan.admit] == [1, 0, 2, 3]  # priority, then creation; the fifth does not fit
    assert [plan.flavor[j] for j in plan.admit] == [
        Capacity.RESERVATION,
        Capacity.SPOT,
        Capacity.QUEUED,
        Capacity.QUEUED,
    ]
    assert plan.preempt == []


def test_a_tier_above_spot_max_priority_skips_the_spot_rung_and_the_others_still_take_it() -> None:
    quotas = {Capacity.RESERVATION: 16, Capacity.SPOT: 16, Capacity.QUEUED: 32}
    for capped in (None, LOW):
        jobs = [_job(0, HIGH), _job(1, HIGH), _job(2, LOW)]
        plan = kueue.plan_ladder_admission(jobs, quotas, chips_per_slice=16, spot_max_priority=capped)
        flavors = {j.id: plan.flavor[j] for j in plan.admit}
        if capped is None:  # control: the second high JobSet takes spot, the low one the queued rung
            assert flavors == {0: Capacity.RESERVATION, 1: Capacity.SPOT, 2: Capacity.QUEUED}
        else:
            assert flavors == {0: Capacity.RESERVATION, 1: Capacity.QUEUED, 2: Capacity.SPOT}


def test_a_tier_above_spot_max_priority_preempts_past_the_spot_rung() -> None:
    """With no free quota anywhere, Kueue's preemption runs in the first flavor the workload may take: not spot."""
    spot_low, queued_low = _job(0, LOW), _job(1, LOW)
    for j, flavor in ((spot_low, Capacity.SPOT), (queued_low, Capacity.QUEUED)):
        j.state, j.quota_reserved, j.flavor = JobState.ADMITTED, True, flavor
    quotas = {Capacity.RESERVATION: 0, Capacity.SPOT: 16, Capacity.QUEUED: 16}
    for capped, victim in ((None, spot_low), (LOW, queued_low)):
        plan = kueue.plan_ladder_admission([spot_low, queued_low, _job(2, HIGH)], quotas, 16, spot_max_priority=capped)
        assert plan.admit == [] and plan.preempt == [victim]


def _tiers_admitted_on_spot(scenario: Scenario, policy: str) -> set[str]:
    sim = Simulator(scenario, POLICIES[policy]())
    seen: set[str] = set()
    admit = sim._admit

    def record(job: Job) -> None:
        admit(job)
        if job.flavor is Capacity.SPOT:
            seen.add(job.cls.name)

    sim._admit = record  # type: ignore[method-assign]
    sim.run()
    return seen


def test_with_spot_max_priority_no_policy_runs_the_top_tier_on_spot() -> None:
    scenario = ladder(seed=20260901, scale=0.05)
    capped = scenario.model_copy(
        update={"fleet": scenario.fleet.model_copy(update={"spot_max_priority": scenario.classes[1].priority})}
    )
    top = scenario.classes[0].name
    for policy in ("reconciler", "kueue-tas"):
        spot_tiers = {
            "all": _tiers_admitted_on_spot(scenario, policy),
            "capped": _tiers_admitted_on_spot(capped, policy),
        }
        assert top in spot_tiers["all"], (policy, spot_tiers)  # control: the top tier does reach spot
        assert top not in spot_tiers["capped"] and spot_tiers["capped"], (policy, spot_tiers)


def test_a_full_ladder_preempts_in_the_first_flavor_where_lower_priority_work_makes_room() -> None:
    res, spot = _job(0, LOW), _job(1, LOW)
    for j, flavor in ((res, Capacity.RESERVATION), (spot, Capacity.SPOT)):
        j.state, j.quota_reserved, j.flavor, j.last_admitted_at = JobState.ADMITTED, True, flavor, 0.0
    queued_high = _job(2, HIGH)
    quotas = {Capacity.RESERVATION: 16, Capacity.SPOT: 16, Capacity.QUEUED: 0}
    plan = kueue.plan_ladder_admission([res, spot, queued_high], quotas, chips_per_slice=16)
    assert plan.admit == [] and plan.preempt == [res]
    # A workload of the same priority preempts nobody: it waits.
    same = _job(3, LOW)
    assert kueue.plan_ladder_admission([res, spot, same], quotas, chips_per_slice=16).preempt == []


def test_in_the_simulator_jobs_land_on_their_flavor_and_queued_ones_only_after_provisioning() -> None:
    sim = Simulator(_ladder("order", reservation=1, spot=1, queued=2, low=(1, 4), horizon_h=0.05), NonePolicy())
    sim.run()
    provisioning = sim.timing.queued_provisioning_s
    assert sim.now < provisioning
    by_flavor = {c: [j for j in sim.live if j.flavor is c] for c in Capacity}
    assert [len(by_flavor[c]) for c in Capacity] == [1, 1, 2]
    for c in (Capacity.RESERVATION, Capacity.SPOT):
        (job,) = by_flavor[c]
        assert job.running and {s.capacity for s in _pools(sim, job)} == {c}
    queued = sim.slices[2:]
    assert all(not s.present for s in queued)
    for job in by_flavor[Capacity.QUEUED]:
        assert job.awaiting_capacity and not job.pods and job.run_start is None
    sim.loop.run(HOUR)
    for job in by_flavor[Capacity.QUEUED]:
        assert job.running and job.run_start is not None and job.run_start >= provisioning
        (own,) = _pools(sim, job)
        assert own.capacity is Capacity.QUEUED and own.owner is job and own.present


# ------------------------------------------------------------------ spot preemptions
def test_spot_preemptions_come_at_the_configured_rate_on_spot_slices_only() -> None:
    one_minute = (RepairBand(weight=1.0, low_s=60.0, high_s=60.0),)
    failures = Failures(slice_mtbf_h=1e9, spot_mtbf_h=10.0, spot_return_mixture=one_minute)
    sim = Simulator(_ladder("rate", reservation=4, spot=8, queued=0, failures=failures, horizon_h=5000.0), NonePolicy())
    sim.trace = []
    sim.run()
    notices = [w for _, w in sim.trace if w.startswith("spot preemption notice ")]
    spot_pools = {s.pool for s in sim.slices if s.capacity is Capacity.SPOT}
    assert {w.rsplit(" ", 1)[1] for w in notices} == spot_pools
    # Poisson: 8 slices x 5000 h / 10 h = 4000 expected (the 90 s down per preemption is negligible); sd ~63.
    assert 3750 < len(notices) < 4250


def test_a_spot_notice_terminates_the_pods_kills_them_after_15_s_and_deletes_the_nodes_after_30_s() -> None:
    sim = Simulator(_ladder("notice", reservation=0, spot=2, queued=0, high=(2, 1)), NonePolicy())
    sim.run()
    (job,) = sim.live
    assert job.running
    s = sim.slices[0]
    t0 = sim.now
    sim._fail_now(s, sim.timing.spot_notice_s + HOUR, FailureKind.SPOT_PREEMPTION)

    def nodes() -> list[Node]:
        return _nodes(sim, s.pool)

    sim.loop.run(t0 + 1.0)
    pods = [p for p in s.hosts if p is not None]
    assert len(pods) == 4
    assert all(p.phase is PodPhase.TERMINATING and p.disruption == "TerminationByKubelet" for p in pods)
    assert all(p.deleted_at is None for p in pods)  # graceful node shutdown kills, it does not delete via the API
    assert not s.node_ready and not s.schedulable and not job.running
    snap_nodes = nodes()
    assert len(snap_nodes) == 4 and all(n.ready is ConditionStatus.FALSE for n in snap_nodes)
    assert sim.detection_s(FailureKind.SPOT_PREEMPTION) == sim.timing.confirmed_grace_s
    # Restarting in place would take the 15 s kill plus the recreate; a spot return is far longer: lasting.
    t = sim.timing
    assert sim.lasting_after_s(FailureKind.SPOT_PREEMPTION) == t.spot_pod_grace_s + t.jobset_recreate_s
    assert job.incident_start == t0 and job.incident_lasting
    sim.loop.run(t0 + sim.timing.spot_pod_grace_s - 0.1)
    assert all(p is not None for p in s.hosts)
    sim.loop.run(t0 + sim.timing.spot_pod_grace_s)
    assert s.empty and all(p.failed for p in pods)
    assert len(nodes()) == 4  # the VMs are still shutting down
    sim.loop.run(t0 + sim.timing.spot_notice_s - 0.1)
    assert len(nodes()) == 4
    sim.loop.run(t0 + sim.timing.spot_notice_s)
    assert s.nodes_deleted and nodes() == []
    back = t0 + sim.timing.spot_notice_s + HOUR
    sim.loop.run(back)
    after = nodes()
    assert len(after) == 4 and all(n.creation_timestamp == at(back) for n in after)
    assert s.healthy and s.created_at == pytest.approx(back)


def test_the_planner_classifies_a_preempted_spot_slice_as_not_healthy_at_once() -> None:
    sim = Simulator(_ladder("classify", reservation=1, spot=1, queued=0, low=(1, 2)), NonePolicy())
    sim.run()
    spot = sim.slices[1]
    sim._fail_now(spot, sim.timing.spot_notice_s + HOUR, FailureKind.SPOT_PREEMPTION)
    sim.loop.run(sim.now + 1.0)
    found = classify_slices(_nodes(sim), at(sim.now), timedelta(seconds=20), timedelta(seconds=60), ["google.com/tpu"])
    assert found[spot.pool].health is not SliceHealth.HEALTHY
    assert found[sim.slices[0].pool].health is SliceHealth.HEALTHY


# ------------------------------------------------------------------ queued flex-start capacity
def test_snapshot_labels_carry_the_capacity_and_queued_nodes_are_request_owned() -> None:
    sim = Simulator(_ladder("labels", reservation=1, spot=1, queued=1, low=(1, 3)), NonePolicy())
    sim.run()
    res, spot, queued = sim.slices
    assert node_labels(res) == {CAPACITY_LABEL: "reservation"}
    assert node_labels(spot) == {CAPACITY_LABEL: "spot", SPOT_LABEL: "true"}
    assert node_labels(queued) == {CAPACITY_LABEL: "flex-start-queued", QUEUED_LABEL: "true"}
    owned = {n.node_pool: n.request_owned for n in _nodes(sim)}
    assert owned == {res.pool: False, spot.pool: False, queued.pool: True}
    queued_nodes = _nodes(sim, queued.pool)
    assert all(any(t.key == QUEUED_TAINT and t.value == "true" for t in n.taints) for n in queued_nodes)
    # Without a ladder nothing changes: no labels, nothing request-owned.
    plain = Simulator(two_classes("plain", 5, 0.1, 2), NonePolicy())
    plain.run()
    assert all(node_labels(s) == {} for s in plain.slices)


def test_kube_scheduler_never_binds_a_pod_to_queued_capacity_made_for_another_jobset() -> None:
    owner, other = _job(0, LOW), _job(1, HIGH)
    queued = Slice(id=0, pool="q", hosts=[None], capacity=Capacity.QUEUED, owner=owner)
    spot = Slice(id=1, pool="s", hosts=[None], capacity=Capacity.SPOT)
    other.flavor = Capacity.RESERVATION
    pod = Pod(job=other, attempt=0, child=0, index=0, created=0.0, uid=1)
    assert kubescheduler.schedule([pod], [queued, spot], preemption=True) == []  # wrong flavor, someone else's
    other.flavor = None
    (bind,) = kubescheduler.schedule([pod], [queued, spot], preemption=True)
    assert isinstance(bind, kubescheduler.Bind) and bind.slice is spot
    mine = Pod(job=owner, attempt=0, child=0, index=0, created=0.0, uid=2)
    (bind,) = kubescheduler.schedule([mine], [queued], preemption=False)
    assert isinstance(bind, kubescheduler.Bind) and bind.slice is queued


def test_an_evicted_owner_gives_its_queued_slice_back_and_nobody_else_uses_it_meanwhile() -> None:
    sim = Simulator(_ladder("giveback", reservation=1, spot=0, queued=1, low=(1, 3)), NonePolicy())
    sim.run()
    sim.loop.run(HOUR)  # past provisioning
    q = sim.slices[1]
    owner = q.owner
    assert owner is not None and owner.running and _pools(sim, owner) == {q}
    waiting = [j for j in sim.live if j.state is JobState.QUEUED]
    assert len(waiting) == 1
    sim.trace = []
    t0 = sim.now
    sim._evict(owner, JobState.QUEUED)
    sim.loop.run(t0 + 1.0)
    # The old pods are still terminating; the next queued workload's new request may already count on these
    # nodes coming back, but nobody can schedule there until GKE has filled it.
    assert q.present and not q.schedulable and (q.owner is None or q.owner.awaiting_capacity)
    sim.loop.run(t0 + sim.timing.pod_termination_grace_s + 1.0)
    assert not q.present
    sim.loop.run(t0 + 2 * HOUR)
    # Somebody got the queued quota again, through a new ProvisioningRequest: binds only after it was filled,
    # and only its own pods.
    filled = [(t, w.split(" ")[0]) for t, w in sim.trace if w.endswith("provisioning request filled")]
    assert len(filled) == 1
    filled_at, new_owner = filled[0]
    assert filled_at >= t0 + sim.timing.queued_provisioning_s
    binds = [(t, w) for t, w in sim.trace if w.startswith("bind ") and f"-> {q.pool}/" in w]
    assert binds and all(t >= filled_at and w.split(" ")[1].startswith(f"{new_owner}-") for t, w in binds)
    assert q.owner is not None and q.owner.name == new_owner


def _reconciler_case(ladder_fleet: bool, high_on_queued: bool) -> Simulator:
    """A high JobSet and lows; one of the high's slices crashes for 4 h; the reconciler decides."""
    if high_on_queued:  # the 2-slice high does not fit the 1 reservation slice: Kueue gives it queued capacity
        scenario = _ladder("rq", reservation=1, spot=0, queued=2, high=(2, 1), low=(1, 1))
    else:  # the high holds the reservation, the lows run on queued capacity
        scenario = _ladder("rr", reservation=2, spot=0, queued=2, high=(2, 1), low=(1, 2))
    if not ladder_fleet:
        scenario = scenario.model_copy(update={"fleet": Fleet(slices=scenario.fleet.slices)})
    sim = Simulator(scenario, ReconcilerPolicy())
    sim.run()
    sim.loop.run(HOUR)
    high = next(j for j in sim.live if j.priority == HIGH)
    assert high.running
    target = sorted(_pools(sim, high), key=lambda s: s.id)[0]
    sim.trace = []
    sim._fail_now(target, 4 * HOUR, FailureKind.CRASH)
    sim.loop.run(sim.now + 2 * HOUR)
    return sim


@pytest.mark.parametrize("high_on_queued", [False, True])
def test_the_reconciler_never_frees_queued_capacity_nor_frees_slices_for_a_queued_capacity_jobset(
    high_on_queued: bool,
) -> None:
    # Control: the same fleet without capacity modes, where the reconciler does hold a low JobSet.
    plain = _reconciler_case(ladder_fleet=False, high_on_queued=high_on_queued)
    assert plain.rec.holds >= 1
    sim = _reconciler_case(ladder_fleet=True, high_on_queued=high_on_queued)
    assert sim.rec.holds == 0 and sim.rec.victims == 0
    lows = [j for j in sim.live if j.priority == LOW]
    assert lows and all(j.running for j in lows)
    high = next(j for j in sim.live if j.priority == HIGH)
    assert sim.trace is not None
    queued_pools = {s.pool for s in sim.slices if s.capacity is Capacity.QUEUED}
    for _, w in sim.trace:
        if w.startswith(f"bind {high.name}-"):
            pool = w.split("-> ")[1].split("/")[0]
            # a queued-capacity high restarts only on its own request's slices; a reservation one never on queued
            assert (pool in queued_pools) is high_on_queued
            if high_on_queued:
                assert next(s for s in sim.slices if s.pool == pool).owner is high


# ------------------------------------------------------------------ the standard scenario
def test_the_ladder_scenario_follows_the_first_seven_and_exercises_every_rung() -> None:
    names = [s.name for s in standard_scenarios(scale=0.01)]
    assert names[7] == "ladder" and names.count("ladder") == 1
    sim = Simulator(ladder(scale=0.05), NonePolicy())
    sim.trace = []
    sim.run()
    assert any(w.startswith("spot preemption notice ") for _, w in sim.trace)
    assert any(w.endswith("provisioning request filled") for _, w in sim.trace)
    assert {j.flavor for j in sim.live if j.running} == set(Capacity)


def test_queued_capacity_that_does_not_exist_is_not_provisioned_capacity_and_the_ledger_balances() -> None:
    scenario = ladder(scale=0.05)
    summary = Simulator(scenario, NonePolicy()).run().summary
    full = scenario.fleet.slices * scenario.horizon_h * HOUR * 16
    assert summary["provisioned_chip_s"] < full
    useful = sum(summary["useful_chip_s_by_tier"].values())
    assert useful + sum(summary["badput_s"].values()) == pytest.approx(summary["provisioned_chip_s"], rel=1e-6)


def test_the_tas_peers_run_the_ladder_like_for_like() -> None:
    """kueue-tas and hero admit through the same flavor order (reservation, spot, queued) and get
    the same queued flex-start capacity as the quota-model policies, so every policy has the same provisioned
    chip-hours (within the provisioning gaps, which differ by a fraction of a per cent)."""
    scenario = ladder(seed=20260901, scale=0.05)
    provisioned = {
        p: run_one(scenario, p).summary["provisioned_chip_s"] for p in ("reconciler", "scheduler", "kueue-tas", "hero")
    }
    reference = provisioned["reconciler"]
    for policy, chip_s in provisioned.items():
        assert chip_s == pytest.approx(reference, rel=0.01), (policy, provisioned)
    # Queued capacity was provisioned: more than reservation and spot alone (24 of the 32 slices).
    assert reference > 24 * 16 * scenario.horizon_h * 3600.0 * 1.05


def test_the_reconciler_sends_held_victims_back_to_kueue_when_the_queued_rung_has_room() -> None:
    """A held victim whose rung has no free slice is released once the ClusterQueue's queued
    flex-start quota has room for it, and Kueue then provisions capacity for it, instead of waiting for a spot
    return. The snapshot carries that room as the controller reads it from the ClusterQueue. The rung switch is off:
    it moves reclaimed JobSets of every preempting tier into the same room first, which is not what this tests."""
    policy = ReconcilerPolicy()
    policy.keep_plans = True
    sim = Simulator(ladder(seed=20260901, scale=0.03), policy)
    sim.trace = []
    sim.start()  # `run` is start, loop, finish: the switch goes off once `attach` has derived the config
    policy.config = policy.config.model_copy(update={"spot_rung_switch": False})
    sim.loop.run(sim.scenario.horizon_h * HOUR)
    sim.finish()
    reasons = [a.reason for p in policy.plans for a in p.actions if isinstance(a, ReleaseVictim)]
    assert ReleaseReason.QUEUED_CAPACITY in reasons
    released = {
        a.workload.name.removeprefix("jobset-")
        for p in policy.plans
        for a in p.actions
        if isinstance(a, ReleaseVictim) and a.reason is ReleaseReason.QUEUED_CAPACITY
    }
    provisioned = {w.split()[0] for _, w in sim.trace if w.endswith("provisioning request filled")}
    assert released & provisioned, (released, sorted(provisioned)[:5])


def test_the_simulated_cluster_queue_reports_the_queued_rungs_unreserved_quota() -> None:
    sim = Simulator(_ladder("room", 1, 1, 2, high=(1, 1), low=(1, 1)), ReconcilerPolicy())
    policy = sim.policy
    assert isinstance(policy, ReconcilerPolicy)
    sim.start()
    sim.loop.run(3600.0)
    (queue,) = policy.snapshot().cluster_queues
    # Both JobSets fit reservation and spot: the queued rung's two slices of quota are free.
    assert queue.queued_room_chips == 2 * sim.chips_per_slice


def _reclaim_the_top_jobsets_spot_slice(policy: ReconcilerPolicy) -> tuple[Simulator, Job, Job]:
    """One top-tier and one low JobSet, each on a spot slice; GCP reclaims the top one's for 4 h. The queued rung
    (one slice) is free."""
    sim = Simulator(_ladder("switch", reservation=0, spot=2, queued=1, high=(1, 1), low=(1, 1)), policy)
    sim.run()
    top = next(j for j in sim.live if j.priority == HIGH)
    low = next(j for j in sim.live if j.priority == LOW)
    assert top.flavor is Capacity.SPOT and low.flavor is Capacity.SPOT and top.running and low.running
    (spot,) = _pools(sim, top)
    sim._fail_now(spot, sim.timing.spot_notice_s + 4 * HOUR, FailureKind.SPOT_PREEMPTION)
    sim.loop.run(sim.now + 20 * 60.0)
    return sim, top, low


def test_the_reconciler_moves_a_reclaimed_top_tier_jobset_to_the_queued_rung_instead_of_evicting() -> None:
    """The rung switch: the top-tier JobSet is pinned to the queued rung and runs there once GKE
    provisions it; the low JobSet on spot is never a victim. Switched off (the control), the low one is."""
    sim, top, low = _reclaim_the_top_jobsets_spot_slice(ReconcilerPolicy())
    assert top.pinned is Capacity.QUEUED and top.flavor is Capacity.QUEUED and top.running
    assert top.workload_generation == 1 and sim.rec.peer_actions.get("rung_switches") == 1
    assert low.running and low.victim_since is None and sim.rec.holds == 0
    assert all(p.slice is not None and p.slice.capacity is Capacity.QUEUED for p in top.pods)

    off = HotswapConfig(top_tier_priority=HIGH, spot_rung_switch=False)
    sim, top, low = _reclaim_the_top_jobsets_spot_slice(ReconcilerPolicy(off))
    assert top.pinned is None and top.flavor is Capacity.SPOT and top.running
    assert sim.rec.holds == 1 and not low.running
