"""Simulator tests: event ordering, determinism, conservation, and the policy ranking on a handcrafted case."""

from __future__ import annotations

from datetime import timedelta

import pytest

from gke_tpu_priority.components.config.kueue import KueueSettings, duration_seconds
from gke_tpu_priority.hotswap.config import HotswapConfig
from gke_tpu_priority.hotswap.planner.actions import EventReason, RecordOp
from sim import kubescheduler
from sim.bench import restart_floor_s
from sim.engine import EventLoop
from sim.params import HOUR, FailureKind, Failures, JobClass, Scenario, Timing
from sim.policies.reconciler import ReconcilerPolicy
from sim.runner import POLICIES, run_one
from sim.simulator import Simulator
from sim.state import Job, JobState, Pod, PodPhase, Slice
from tests.sim.builders import NEVER, small, two_classes


def test_events_run_in_time_then_insertion_order_and_cancel() -> None:
    loop = EventLoop()
    seen: list[str] = []
    loop.at(5.0, lambda: seen.append("b"))
    loop.at(1.0, lambda: seen.append("a"))
    loop.at(5.0, lambda: seen.append("c"))
    dropped = loop.at(3.0, lambda: seen.append("x"))
    dropped.cancel()

    def chain() -> None:
        loop.after(3.0, lambda: seen.append("d"))  # lands at 5.0, after b and c

    loop.at(2.0, chain)
    loop.run(10.0)
    assert seen == ["a", "b", "c", "d"]
    assert loop.now == 10.0
    with pytest.raises(ValueError, match="past"):
        loop.at(1.0, lambda: None)


def _small(seed: int = 3, horizon_h: float = 300.0) -> Scenario:
    return small(seed, horizon_h)


@pytest.mark.parametrize("policy", list(POLICIES))
def test_same_seed_same_result_and_conservation(policy: str) -> None:
    first = Simulator(_small(), POLICIES[policy]())
    a = first.run()
    b = run_one(_small(), policy)
    assert a.summary == b.summary
    assert a.events == b.events
    assert a.summary["incidents_all_priorities"] > 0
    # Conservation: every submitted job is finished, failed, running/admitted, queued or held; none vanished.
    states = first.end_states()
    assert sum(states.values()) == len(first.jobs)
    live = [j for j in first.jobs if j.state not in (JobState.FINISHED, JobState.FAILED)]
    assert len(live) == sum(c.population for c in first.scenario.classes)
    assert a.summary["lost_victims"] == 0


def test_different_seeds_differ() -> None:
    assert run_one(_small(seed=1), "none").summary != run_one(_small(seed=2), "none").summary


def _handcrafted(policy: str, config: HotswapConfig | None = None) -> Simulator:
    """4 slices, one 2-slice high job and three 1-slice low jobs (no spare, one low queued); one of the high
    job's slices fails for an hour (the lows are about 30 min past their last checkpoint). `config`: the
    reconciler's."""
    scenario = two_classes("handcrafted", 11, 1.0, 4, high=(2, 1, NEVER), low=(1, 3, NEVER))
    sim = Simulator(scenario, ReconcilerPolicy(config) if config is not None else POLICIES[policy]())
    sim.run()
    sim.trace = []
    target = next(s for s in sim.slices if any(p is not None and p.job.cls.name == "high" for p in s.hosts))
    sim._fail_now(target, HOUR, FailureKind.CRASH)
    sim.loop.run(3 * HOUR)
    return sim


def _handcrafted_mttr(policy: str) -> dict[str, object]:
    return _handcrafted(policy)._summary(3 * HOUR)


def _mttr(result: dict[str, object]) -> float:
    stats = result["mttr_s"]
    assert isinstance(stats, dict)
    return float(stats["p50"])


def test_policies_rank_as_expected_on_handcrafted_case() -> None:
    results = {p: _handcrafted_mttr(p) for p in POLICIES}
    none, sched, rec = results["none"], results["scheduler"], results["reconciler"]
    assert none["incidents"] == sched["incidents"] == rec["incidents"] == 1
    assert _mttr(none) > HOUR  # without preemption the high job waits for the one-hour repair
    assert _mttr(sched) < 300  # GKE pattern: two preemption waves, about two minutes
    assert sched["partial_preemptions"] == 1
    # Reconciler: whole-slice, Kueue-coherent eviction, no partial preemptions, nobody lost, and faster than
    # the scheduler pattern here (one termination grace instead of two preemption waves).
    assert rec["partial_preemptions"] == 0 and rec["lost_victims"] == 0 and none["victims"] == 0
    assert _mttr(rec) < 300
    assert _mttr(rec) <= _mttr(sched)


def test_C12_newcomer_is_fenced_before_its_pods_exist_and_the_preemptor_runs_on_the_ideal_path() -> None:
    """The hold releases quota and Kueue admits the queued low JobSet. The admission fence holds it before its
    leader is created (it would otherwise take a slice the preemptor needs, C12), so the preemptor runs as soon
    as its own restart allows, with no extra grace for a newcomer. Victims at detection: the fence is the subject
    here, not the default `evictionDelay` (tests/sim/test_eviction_delay.py)."""
    sim = _handcrafted("reconciler", HotswapConfig(eviction_delay=timedelta(0)))
    assert sim.trace is not None
    log = [what for _, what in sim.trace]
    holds = [w.split()[1] for w in log if w.startswith("hold ")]
    admitted = [w.split()[2] for w in log if w.startswith("kueue admits ")]
    assert len(holds) == 2 and holds[1] in admitted  # the second hold is the newcomer Kueue admitted
    assert not any(w.startswith(f"bind {holds[1]}") or w.startswith(f"{holds[1]} leaders") for w in log)
    assert any(w.startswith("high-") and w.endswith("running (attempt 1)") for w in log)
    high = next(j for j in sim.live if j.cls.name == "high")
    assert high.running
    assert {p.slice for p in high.pods if p.slice is not None} == {s for s in sim.slices if s.occupants() == {high}}
    # A crash fails the preemptor's pods with the node, which confirms the failure at once, so the victim's
    # termination grace runs alongside the preemptor's own restart: hotswap costs nothing over restarting in
    # place on a slice that is already back (the floor no policy can beat).
    floor = restart_floor_s(sim.timing.model_dump())
    ideal = floor + 1.0  # reaction and API write are hidden behind the restart; 1 s of slack
    assert len(sim.rec.mttr_high_s) == 1 and sim.rec.mttr_high_s[0] <= ideal


def test_transients_healing_before_the_restart_are_reported_apart_not_hidden() -> None:
    sim = _handcrafted("none")  # the one-hour fault is a lasting one
    summary = sim._summary(3 * HOUR)
    assert summary["mttr_s"]["n"] == 1 and summary["mttr_lasting_s"]["n"] == 1
    target = next(s for s in sim.slices if any(p is not None and p.job.cls.name == "high" for p in s.hosts))
    # Detected (pods fail at 10 s), but back before the restart needs it (45 s): restarting in place wins.
    assert sim.detection_s(FailureKind.CRASH) < 30.0 < sim.lasting_after_s(FailureKind.CRASH)
    sim._fail_now(target, 30.0, FailureKind.CRASH)
    sim.loop.run(4 * HOUR)
    summary = sim._summary(4 * HOUR)
    assert summary["mttr_s"]["n"] == 2 and summary["mttr_lasting_s"]["n"] == 1


def test_pooled_figures_sum_counts_and_take_percentiles_over_all_seeds() -> None:
    from sim.metrics import pool

    runs = [run_one(_small(seed=s, horizon_h=100.0), "none").summary for s in (1, 2)]
    pooled = pool(runs)
    assert pooled["incidents"] == runs[0]["incidents"] + runs[1]["incidents"]
    assert pooled["mttr_s"]["n"] == runs[0]["mttr_s"]["n"] + runs[1]["mttr_s"]["n"]
    assert sorted(pooled["mttr_samples_s"]) == sorted(runs[0]["mttr_samples_s"] + runs[1]["mttr_samples_s"])
    assert pooled["utilisation"] == round((runs[0]["utilisation"] + runs[1]["utilisation"]) / 2, 5)


def _pool_of(job: Job, sid: int, hosts: int = 4) -> Slice:
    s = Slice(id=sid, pool=f"p{sid}", hosts=[None] * hosts)
    for h in range(hosts):
        pod = Pod(job=job, attempt=0, child=0, index=h, created=0.0, uid=100 * sid + h, phase=PodPhase.RUNNING)
        pod.slice, pod.host, pod.running_at = s, h, 0.0
        s.hosts[h] = pod
    return s


def _job(jid: int, priority: int, slices: int) -> Job:
    cls = JobClass(name=f"c{priority}", priority=priority, slices=slices, population=1, mean_duration_h=1.0)
    return Job(id=jid, name=f"j{jid}", cls=cls, work_s=1.0, created=0.0, state=JobState.ADMITTED)


def test_two_leaders_of_one_jobset_never_preempt_their_way_into_the_same_pool() -> None:
    """Storm-tail regression: kube-scheduler filters a pod as if the nominated pods of equal or higher priority
    already ran on their nodes, so the second leader of a JobSet does not pick the pool its first leader was just
    nominated to (priority-scoped exclusive anti-affinity); before, both leaders landed in one pool and the
    JobSet waited for waitForPodsReady, round after round."""
    low_a, low_b, high = _job(1, 10, 1), _job(2, 10, 1), _job(3, 1000, 2)
    slices = [_pool_of(low_a, 0), _pool_of(low_b, 1)]
    leaders = [Pod(job=high, attempt=0, child=c, index=0, created=1.0, uid=900 + c) for c in range(2)]
    decisions = kubescheduler.schedule(leaders, slices, preemption=True)
    chosen = {d.preemptor.child: d.slice.id for d in decisions if isinstance(d, kubescheduler.Preempt)}
    assert chosen == {0: 0, 1: 1}


def test_a_nominated_leader_still_passes_anti_affinity_before_it_binds() -> None:
    """The nominated node is only tried first: an equal-priority leader of another job-key bound there meanwhile
    sends the pod elsewhere instead of binding next to it."""
    other, high = _job(1, 1000, 1), _job(3, 1000, 2)
    crowded = Slice(id=0, pool="p0", hosts=[None] * 4)
    squatter = Pod(job=other, attempt=0, child=0, index=0, created=0.0, uid=1, phase=PodPhase.STARTING)
    squatter.slice, squatter.host, crowded.hosts[0] = crowded, 0, squatter
    empty = Slice(id=1, pool="p1", hosts=[None] * 4)
    leader = Pod(job=high, attempt=0, child=0, index=0, created=1.0, uid=2, nominated=(crowded, 1))
    decisions = kubescheduler.schedule([leader], [crowded, empty], preemption=True)
    assert [(type(d).__name__, d.slice.id) for d in decisions] == [("Bind", 1)]


def _leader_collision(policy: str) -> Simulator:
    """2 slices: a high and a low 1-slice JobSet. Both slices crash and heal inside detection (no infra
    evidence, so no op), the high one first: both restarted leaders bind in the one healed pool (exclusive
    placement only separates equal priorities) and, with preemptionPolicy Never, neither can place its followers."""
    scenario = two_classes("collision", 5, 1.0, 2)
    policy_impl = POLICIES[policy]()
    sim = Simulator(scenario, policy_impl)
    sim.run()
    sim.trace = []
    if isinstance(policy_impl, ReconcilerPolicy):
        policy_impl.keep_plans = True
    high = next(s for s in sim.slices if any(p is not None and p.job.cls.name == "high" for p in s.hosts))
    low = next(s for s in sim.slices if s is not high)
    sim._fail_now(high, 20.0, FailureKind.CRASH)
    sim._fail_now(low, 27.0, FailureKind.CRASH)
    sim.loop.run(4 * HOUR)
    return sim


def test_mixed_priority_leader_collision_is_resolved_by_the_reconciler_not_left_to_waitForPodsReady() -> None:
    """Storm-tail regression: the reconciler holds the low JobSet sharing the high one's slice (a slice priority
    inversion) instead of both waiting for waitForPodsReady and colliding again after the same backoff."""
    stuck = _leader_collision("none")
    log = [what for _, what in stuck.trace or []]
    leaders = [w.split(" -> ")[1].split("/")[0] for w in log if w.startswith("bind ") and "-w-0-0-a1" in w]
    assert len(set(leaders[:2])) == 1  # both leaders first met in one pool: the deadlock the fix is for
    # Only waitForPodsReady ends it (recoveryTimeout for the running JobSet).
    assert stuck.rec.pods_ready_evictions == 2
    assert stuck.rec.mttr_high_s[0] > stuck.timing.pods_ready_recovery_timeout_s

    sim = _leader_collision("reconciler")
    assert sim.rec.pods_ready_evictions == 0
    assert len(sim.rec.mttr_high_s) == 1 and sim.rec.mttr_high_s[0] < 120
    policy = sim.policy
    assert isinstance(policy, ReconcilerPolicy)
    reasons = [e.reason for p in policy.plans for e in p.events]
    assert EventReason.INVERSION_RESOLVED in reasons
    low = next(j for j in sim.live if j.cls.name == "low")
    high = next(j for j in sim.live if j.cls.name == "high")
    assert high.running and low.running  # the low JobSet was released and runs on the healed second slice
    assert sim.lost_victims() == 0


def test_simulated_kueue_timings_are_the_ones_the_platform_deploys() -> None:
    """The benchmark should describe the platform users get, so its Kueue timings follow the component's
    defaults (a change there must be carried over here)."""
    deployed = KueueSettings().wait_for_pods_ready
    timing = Timing()
    assert timing.pods_ready_timeout_s == duration_seconds(deployed.timeout)
    assert timing.pods_ready_recovery_timeout_s == duration_seconds(deployed.recovery_timeout)
    assert timing.requeue_backoff_base_s == deployed.backoff_base_seconds
    assert timing.requeue_backoff_max_s == deployed.backoff_max_seconds


def _starved(config: HotswapConfig) -> tuple[Simulator, Job, float]:
    """3 slices, three 1-slice high JobSets and a queued low one. high-0's slice crashes for three hours; its infra
    op is blocked (nothing lower runs) until waitForPodsReady evicts it, and the low JobSet admitted into its quota
    takes the slice another high JobSet finishes on. Re-admitted without infra evidence (it is older than the
    attribution window), high-0 waits for a slice the low JobSet physically holds: Kueue sees enough quota and
    kube-scheduler does not preempt (preemptionPolicy Never). Returns the run, high-0 and when it was re-admitted."""
    scenario = two_classes("starved", 7, 0.5, 3, high=(1, 3, NEVER))
    policy = ReconcilerPolicy(config)
    sim = Simulator(scenario, policy)
    sim.run()
    sim.trace = []
    policy.keep_plans = True
    start = sim.now
    high = next(j for j in sim.live if j.cls.name == "high")
    broken = next(s for s in sim.slices if any(p is not None and p.job is high for p in s.hosts))
    sim._fail_now(broken, 3 * HOUR, FailureKind.CRASH)
    other = next(j for j in sim.live if j.cls.name == "high" and j is not high)
    sim._submit = lambda cls: None  # type: ignore[method-assign,assignment,return-value]  # no replacements
    # Between high-0's waitForPodsReady eviction and the end of its requeue backoff, while the low JobSet is admitted.
    sim.loop.at(start + sim.timing.pods_ready_recovery_timeout_s + 30.0, lambda: sim._finish(other))
    sim.loop.run(start + 4 * HOUR)
    assert sim.trace is not None
    readmitted = [t for t, what in sim.trace if what == f"kueue admits {high.name}"]
    return sim, high, readmitted[0]


def test_a_starved_high_jobset_takes_the_low_jobsets_slice_after_starvation_grace() -> None:
    """Regression: without starvation preemption high-0 waited for the three-hour repair (waitForPodsReady evicted
    it again and again); with it the low JobSet is held after starvationGrace and high-0 runs one termination grace
    and restart later."""
    stuck, high, _ = _starved(HotswapConfig(starvation_grace=timedelta(0)))
    assert stuck.rec.mttr_high_s[0] > 2 * HOUR and stuck.rec.pods_ready_evictions >= 3 and stuck.rec.holds == 0

    config = HotswapConfig()
    sim, high, readmitted = _starved(config)
    assert sim.trace is not None
    running = next(t for t, what in sim.trace if what == f"{high.name} running (attempt 1)")
    restart = restart_floor_s(sim.timing.model_dump())
    assert running - readmitted <= config.starvation_grace.total_seconds() + restart + 5.0
    assert sim.rec.pods_ready_evictions == 1 and sim.rec.holds == 1 and sim.lost_victims() == 0
    policy = sim.policy
    assert isinstance(policy, ReconcilerPolicy)
    planned = [e.message for p in policy.plans for e in p.events if e.reason is EventReason.PLANNED]
    assert len(planned) == 1 and "trigger starvation" in planned[0]
    assert max(p.diagnostics.starved_preemptors for p in policy.plans) == 1
    low = next(j for j in sim.live if j.cls.name == "low")
    assert low.running  # released once the slice was repaired


def _deep_queue() -> Scenario:
    """A 2-slice high JobSet on 8 slices with a deep queue of 1-slice low JobSets (24 for 6 free slots), failing
    often: every hold frees quota Kueue gives the next queued low JobSet."""
    return two_classes(
        "deep_queue", 3, 40.0, 8, high=(2, 1, 50.0), low=(1, 24, 6.0), failures=Failures(rate_multiplier=100.0)
    )


def test_admission_fence_holds_per_operation_are_bounded_in_a_deep_queue() -> None:
    """Unbounded, the fence would hold 15-16 never-started JobSets per operation here, one after
    another as each hold freed the quota for the next. Bounded at fenceHoldsPerSlice (2) per reserved slice (an op of
    the 2-slice JobSet reserves 2, or 3 after a top-up replaced a lost slice), and nobody is lost."""
    policy = ReconcilerPolicy(HotswapConfig())
    policy.keep_plans = True
    bounded = Simulator(_deep_queue(), policy).run().summary
    assert bounded["ops_holding"] > 0 and bounded["lost_victims"] == 0 and bounded["partial_preemptions"] == 0
    assert 0 < bounded["fence_holds_per_op"]["max"] <= 2 * 3
    records = [a.op for p in policy.plans for a in p.actions if isinstance(a, RecordOp) and a.op is not None]
    assert records and all(op.fenced <= 2 * len(op.reserved) for op in records)
    unbounded = Simulator(_deep_queue(), ReconcilerPolicy(HotswapConfig(fence_holds_per_slice=100))).run().summary
    assert unbounded["fence_holds_per_op"]["max"] > 2 * 2  # the scenario does cascade
