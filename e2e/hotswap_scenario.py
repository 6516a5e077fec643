"""GKE's documented hotswap scenario on the local control plane: what runs, and what a run measured.

Pure parts only (no I/O): the stack the scenario deploys, the JobSets it submits (made by the package's workload
template), and the reduction of a timeline of cluster observations to the figures the report carries: seconds from
the fault until the high-priority JobSet runs again on healthy slices, victims evicted, requeued and back, partial
evictions, lost workloads. The I/O that drives a run lives in e2e/hotswap_run.py, the faults in e2e/faults.py.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from gke_tpu_priority.components.workloads.jobset import TpuJobSetSpec, tpu_jobset

JsonObj = dict[str, Any]

STACK = "dev"
"""The stack whose Kueue configuration, tiers, queues, admission policy and reconciler configuration the scenario
deploys, with its TPU pools sized to the local cluster's fake fleet (`scenario_platform`)."""
NAMESPACE = "tpu-training"
QUEUE = "training"
HIGH, LOW = "training-high", "training-low"
IMAGE = "us-docker.pkg.dev/e2e/hotswap/train:1"
HP_NAME = "hp"
HP_SLICES = 2
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
NODEPOOL_LABEL = "cloud.google.com/gke-nodepool"


class Fault(StrEnum):
    """What happens to one host of one of the high-priority JobSet's slices."""

    HOST_FAILURE = "host-failure"
    """The node goes NotReady (its kubelet stops reporting) and its pods are terminated with a DisruptionTarget
    condition, as GKE does on a TPU host failure; repaired in place."""
    UNREACHABLE = "unreachable"
    """The node's kubelet stops posting (Ready=Unknown, the unreachable taints) and nothing fails its pods: they
    stay Running in the API. Only the reconciler's opt-in fast-fail ends them (the JobSet is annotated for it);
    repaired in place."""
    NODE_DELETION = "node-deletion"
    """The Node object is deleted (the VM is gone); kube-controller-manager's pod garbage collector fails and
    deletes its pods; repaired by creating the node again."""
    HOST_FAILURE_SLICE_REPAIR = "host-failure-slice-repair"
    """As HOST_FAILURE, with GKE's repair of the multi-host slice under way: a slice is repaired whole (all its
    hosts recreated together), so its surviving hosts are cordoned too. On GKE that starts with auto-repair's
    trigger (NotReady for about 10 minutes) or a TPU health signal whose delay is unpublished; here at once."""
    SPOT_PREEMPTION = "spot-preemption"
    """Spot reclaim: the kubelet's graceful node shutdown terminates the pods (DisruptionTarget,
    `TerminationByKubelet`), then the VM stops and the node is NotReady; repaired in place."""


class Mode(StrEnum):
    """Who reacts to the fault."""

    RECONCILER = "reconciler"
    """The hotswap reconciler runs (the stack's `hotswap.mode: reconciler`)."""
    OFF = "off"
    """Nothing but Kueue, JobSet and kube-scheduler: the JobSet waits for the repair."""
    SCHEDULER_ASSISTED = "scheduler-assisted"
    """GKE's documented pattern (the stack's `hotswap.mode: scheduler-assisted`): TPU tiers preempt lower ones
    through kube-scheduler, pod by pod, and the reconciler completes each eviction through Kueue."""


# The 4x4 pool of the dev stack, resized to the fake fleet's four 4x4 slices (e2e/nodes.py default_fleet), so
# the ClusterQueue's quota is the fleet's capacity, as a real stack's is.
FLEET_4X4_SLICES = 4
FAST_FAIL_AFTER = "10s"


def scenario_platform(stack_config: JsonObj, mode: Mode = Mode.RECONCILER) -> JsonObj:
    """The dev stack's configuration with its 4x4 pool resized to the fake fleet; everything else as it is, but
    `hotswap.mode` for the scheduler-assisted run."""
    config = copy.deepcopy(stack_config)
    platform = config["gke-tpu-priority:platform"]
    if mode is Mode.SCHEDULER_ASSISTED:
        platform.setdefault("hotswap", {})["mode"] = Mode.SCHEDULER_ASSISTED.value
    pools = [p for p in platform["tpuPools"] if p["topology"] == "4x4"]
    if len(pools) != 1:
        raise ValueError(f"stack {STACK} must have exactly one 4x4 pool for the scenario, has {len(pools)}")
    pools[0]["slices"] = FLEET_4X4_SLICES
    # Fast-fail acts only on JobSets annotated for it (the unreachable fault's); on, with its shortest delay, so the
    # stack grants its RBAC and the unreachable run fits before the repair.
    settings = platform.setdefault("hotswap", {}).setdefault("settings", {})
    settings["fastFail"] = {"enabled": True, "after": FAST_FAIL_AFTER}
    return config


BATCH_JOB = "lp-batch"
BATCH_POOL = "tpu-4x4-0"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"


def batch_job(pool: str = BATCH_POOL) -> JsonObj:
    """A plain TPU `batch/v1` Job queued in Kueue beside the JobSets: one 4x4 slice's four hosts, held on one node
    pool by its own node selector (it has no JobSet exclusive placement)."""
    template = scenario_jobsets()[0]["spec"]["replicatedJobs"][0]["template"]["spec"]
    pod = copy.deepcopy(template["template"])
    pod["spec"]["nodeSelector"] = {**pod["spec"]["nodeSelector"], NODEPOOL_LABEL: pool}
    pod["spec"]["containers"][0]["env"] = []
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": BATCH_JOB,
            "namespace": NAMESPACE,
            "labels": {"kueue.x-k8s.io/queue-name": QUEUE, "kueue.x-k8s.io/priority-class": LOW},
        },
        "spec": {
            "parallelism": template["parallelism"],
            "completions": template["completions"],
            "completionMode": "Indexed",
            "backoffLimit": 0,
            "podFailurePolicy": template["podFailurePolicy"],
            "template": pod,
        },
    }


def scenario_workloads(with_batch_job: bool = False, fast_fail: bool = False) -> list[JsonObj]:
    """The scenario's JobSets; with `with_batch_job`, a plain batch/v1 Job takes lp-1's place (and goes first,
    running before the JobSets are submitted, so its node selector finds its pool free); with `fast_fail`, the
    high-priority JobSet opts in to fast-fail."""
    jobsets = scenario_jobsets(fast_fail)
    if not with_batch_job:
        return jobsets
    return [batch_job(), *(j for j in jobsets if j["metadata"]["name"] != "lp-1")]


def scenario_jobsets(fast_fail: bool = False) -> list[JsonObj]:
    """GKE's example, with the package's template: two 1-slice low-priority JobSets and a single-host one fill the
    fleet beside the 2-slice high-priority JobSet, so a fault leaves no spare 4x4 slice. Low-priority first."""
    specs = [
        TpuJobSetSpec(name="lp-0", namespace=NAMESPACE, queue=QUEUE, priority=LOW, topology="4x4", image=IMAGE),
        TpuJobSetSpec(name="lp-1", namespace=NAMESPACE, queue=QUEUE, priority=LOW, topology="4x4", image=IMAGE),
        TpuJobSetSpec(name="lp-host", namespace=NAMESPACE, queue=QUEUE, priority=LOW, topology="2x2", image=IMAGE),
        TpuJobSetSpec(
            name=HP_NAME,
            namespace=NAMESPACE,
            queue=QUEUE,
            priority=HIGH,
            topology="4x4",
            slices=HP_SLICES,
            image=IMAGE,
            fast_fail=fast_fail,
        ),
    ]
    return [tpu_jobset(spec) for spec in specs]


def expected_pods(jobset: JsonObj) -> int:
    if jobset["kind"] == "Job":
        return int(jobset["spec"]["parallelism"])
    return sum(int(r["replicas"]) * int(r["template"]["spec"]["parallelism"]) for r in jobset["spec"]["replicatedJobs"])


# ---- observations ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PodView:
    name: str
    jobset: str
    node: str
    pool: str
    phase: str
    created: float  # seconds on the run's clock (time.time())
    deleting: bool


@dataclass(frozen=True)
class WorkloadView:
    name: str
    jobset: str
    active: bool
    admitted: bool
    evicted: bool
    evicted_reason: str
    requeued: bool
    finished: bool


@dataclass(frozen=True)
class Sample:
    """One look at the namespace: every pod, Workload and JobSet (or plain Job) of the scenario."""

    at: float
    pods: tuple[PodView, ...]
    workloads: tuple[WorkloadView, ...]
    jobsets: tuple[str, ...]
    failed_jobsets: tuple[str, ...] = ()
    restarts: tuple[tuple[str, int, int], ...] = ()
    """Per JobSet: `status.restarts` and `status.restartsCountTowardsMax` (restarts its failure policy's
    infrastructure rule did not count against `maxRestarts` are in the first only)."""

    def pods_of(self, jobset: str) -> list[PodView]:
        return [p for p in self.pods if p.jobset == jobset]

    def running(self, jobset: str) -> list[PodView]:
        return [p for p in self.pods_of(jobset) if p.phase == "Running" and not p.deleting]

    def workload_of(self, jobset: str) -> WorkloadView | None:
        found = [w for w in self.workloads if w.jobset == jobset]
        return found[0] if found else None


def _condition(obj: JsonObj, kind: str) -> JsonObj | None:
    return next((c for c in obj.get("status", {}).get("conditions", []) if c.get("type") == kind), None)


def _true(obj: JsonObj, kind: str) -> bool:
    found = _condition(obj, kind)
    return found is not None and found.get("status") == "True"


def workload_view(obj: JsonObj) -> WorkloadView:
    owners = obj["metadata"].get("ownerReferences", [])
    jobset = next((o["name"] for o in owners if o.get("kind") in ("JobSet", "Job")), "")
    evicted = _condition(obj, "Evicted")
    return WorkloadView(
        name=obj["metadata"]["name"],
        jobset=jobset,
        active=obj.get("spec", {}).get("active", True) is not False,
        admitted=_true(obj, "Admitted"),
        evicted=evicted is not None and evicted.get("status") == "True",
        evicted_reason=str(evicted.get("reason", "")) if evicted else "",
        requeued=_true(obj, "Requeued"),
        finished=_true(obj, "Finished"),
    )


def pod_view(obj: JsonObj, created: float, pools: dict[str, str]) -> PodView:
    node = obj.get("spec", {}).get("nodeName", "")
    labels = obj["metadata"].get("labels", {})
    return PodView(
        name=obj["metadata"]["name"],
        # A JobSet's pods carry its name; a plain Job's only the Job's (a JobSet's pods carry their child Job's too).
        jobset=labels.get(JOBSET_NAME_LABEL) or labels.get(JOB_NAME_LABEL, ""),
        node=node,
        pool=pools.get(node, ""),
        phase=obj.get("status", {}).get("phase", ""),
        created=created,
        deleting="deletionTimestamp" in obj["metadata"],
    )


# ---- figures ---------------------------------------------------------------------------------------------------


@dataclass
class Outcome:
    """What one run of one fault in one mode measured."""

    mode: str
    fault: str
    failed_node: str
    repair_after_seconds: float
    recovery_seconds: float | None
    recovered_before_repair: bool
    victims_evicted: list[str] = field(default_factory=list)
    victims_requeued: list[str] = field(default_factory=list)
    victims_back: list[str] = field(default_factory=list)
    partial_evictions: list[str] = field(default_factory=list)
    lost_workloads: list[str] = field(default_factory=list)
    hp_pools_after: list[str] = field(default_factory=list)
    timeline: dict[str, float] = field(default_factory=dict)
    pod_start_seconds: list[float] = field(default_factory=list)
    hp_restarts: tuple[int, int] = (0, 0)
    restarted_onto_failed_slice: bool = False
    """The high-priority JobSet's new attempt had pods bound to the failed slice's surviving hosts before the
    repair: kube-scheduler and JobSet's exclusive placement know nothing of slice health, so a restarted Job's
    leader may land there, and its follower for the failed host then waits for the repair."""

    def as_report(self) -> JsonObj:
        return {
            "mode": self.mode,
            "fault": self.fault,
            "failedNode": self.failed_node,
            "repairAfterSeconds": self.repair_after_seconds,
            "recoverySeconds": self.recovery_seconds,
            "recoveredBeforeRepair": self.recovered_before_repair,
            "victimsEvicted": len(self.victims_evicted),
            "victimsRequeued": len(self.victims_requeued),
            "victimsBack": len(self.victims_back),
            "partialEvictions": len(self.partial_evictions),
            "lostWorkloads": len(self.lost_workloads),
            "victims": sorted(self.victims_evicted),
            "highPriorityPoolsAfter": self.hp_pools_after,
            "restartedOntoFailedSlice": self.restarted_onto_failed_slice,
            "highPriorityRestarts": {"restarts": self.hp_restarts[0], "countTowardsMax": self.hp_restarts[1]},
            "timelineSeconds": {k: round(v, 1) for k, v in sorted(self.timeline.items(), key=lambda kv: kv[1])},
            "podCreateToRunningSeconds": _spread(self.pod_start_seconds),
        }


def _spread(values: list[float]) -> JsonObj:
    if not values:
        return {"pods": 0}
    ordered = sorted(values)
    return {
        "pods": len(ordered),
        "median": round(ordered[len(ordered) // 2], 1),
        "max": round(ordered[-1], 1),
    }


def recovered_at(samples: list[Sample], fault_at: float, expected: int) -> float | None:
    """First time every pod of the high-priority JobSet was Running again: all `expected` of them, each created
    after the fault (a new attempt). The failed node is NotReady and tainted until its repair, so none of them
    runs there before it."""
    for sample in samples:
        if sample.at >= fault_at and hp_recovered(sample, fault_at, expected):
            return sample.at
    return None


def hp_recovered(sample: Sample, fault_at: float, expected: int) -> bool:
    running = sample.running(HP_NAME)
    return (
        len(running) == expected
        and len(sample.pods_of(HP_NAME)) == expected
        and all(p.created >= fault_at - 1 for p in running)  # creationTimestamp has whole seconds
    )


def _first(samples: list[Sample], after: float | None, predicate: Any) -> float | None:
    if after is None:
        return None
    return next((s.at for s in samples if s.at >= after and predicate(s)), None)


def milestones(
    samples: list[Sample], fault_at: float, victims: list[str], expected: dict[str, int]
) -> dict[str, float]:
    """When each step of the recovery was first seen, on the run's clock: the high-priority JobSet's restart (old
    pods leaving and gone, new pods created) and, for the first victim, its hold, Kueue's eviction, its pods gone,
    its release, Kueue's re-admission and its pods running. What is never seen is left out."""
    marks: dict[str, float | None] = {}
    old = [p.name for p in (samples[0].pods_of(HP_NAME) if samples else [])]
    marks["hpOldPodsLeaving"] = _first(
        samples, fault_at, lambda s: len([p for p in s.running(HP_NAME) if p.name in old]) < len(old)
    )
    marks["hpOldPodsGone"] = _first(samples, fault_at, lambda s: not any(p.name in old for p in s.pods_of(HP_NAME)))
    marks["hpNewPodsCreated"] = _first(
        samples, fault_at, lambda s: any(p.created >= fault_at - 1 for p in s.pods_of(HP_NAME))
    )
    marks["hpNewPodsAllCreated"] = _first(
        samples,
        fault_at,
        lambda s: len([p for p in s.pods_of(HP_NAME) if p.created >= fault_at - 1]) == expected[HP_NAME],
    )
    if victims:
        victim = victims[0]

        def wl(s: Sample) -> WorkloadView | None:
            return s.workload_of(victim)

        held = _first(samples, fault_at, lambda s: (w := wl(s)) is not None and not w.active)
        marks["victimHeld"] = held
        marks["victimEvicted"] = _first(samples, held, lambda s: (w := wl(s)) is not None and w.evicted)
        marks["victimQuotaReleased"] = _first(samples, held, lambda s: (w := wl(s)) is not None and not w.admitted)
        marks["victimPodsGone"] = _first(samples, held, lambda s: not s.pods_of(victim))
        released = _first(samples, held, lambda s: (w := wl(s)) is not None and w.active)
        marks["victimReleased"] = released
        marks["victimReadmitted"] = _first(samples, released, lambda s: (w := wl(s)) is not None and w.admitted)
        marks["victimPodsCreated"] = _first(samples, released, lambda s: bool(s.pods_of(victim)))
        marks["victimRunning"] = _first(
            samples, released, lambda s: len(s.running(victim)) == expected[victim] == len(s.pods_of(victim))
        )
    return {k: v for k, v in marks.items() if v is not None}


def pod_start_seconds(samples: list[Sample]) -> list[float]:
    """Per pod: creation (its creationTimestamp, whole seconds) to the first sample that saw it Running."""
    created: dict[str, float] = {}
    running: dict[str, float] = {}
    for sample in samples:
        for pod in sample.pods:
            created.setdefault(pod.name, pod.created)
            if pod.phase == "Running" and pod.node:
                running.setdefault(pod.name, sample.at)
    # Pods already running at the first sample tell nothing about their start.
    first = {p.name for p in samples[0].pods} if samples else set()
    return sorted(max(0.0, running[n] - created[n]) for n in running if n not in first)


def restarted_onto(samples: list[Sample], fault_at: float, repair_at: float, pool: str) -> bool:
    """Whether a pod of the high-priority JobSet's new attempt was bound to `pool` between fault and repair."""
    return any(
        p.pool == pool and p.created >= fault_at - 1
        for s in samples
        if fault_at <= s.at < repair_at
        for p in s.pods_of(HP_NAME)
    )


def evicted_victims(samples: list[Sample]) -> list[str]:
    """Low-priority JobSets whose Workload was deactivated or evicted at some point of the run."""
    seen = {
        w.jobset for s in samples for w in s.workloads if w.jobset != HP_NAME and (not w.active or w.evicted)
    }  # fmt: skip
    return sorted(seen)


def requeued_victims(samples: list[Sample], victims: list[str]) -> list[str]:
    """Victims whose Workload stayed (not deleted, not finished) and was given back to Kueue's queue: active
    again, and requeued or admitted again, at some point after its eviction."""
    out = []
    for victim in victims:
        evicted_at = next(
            (s.at for s in samples if (w := s.workload_of(victim)) and (not w.active or w.evicted)), None
        )  # fmt: skip
        if evicted_at is None:
            continue
        later = [s.workload_of(victim) for s in samples if s.at >= evicted_at]
        if all(w is not None and not w.finished for w in later) and any(
            w is not None and w.active and (w.requeued or w.admitted) for w in later
        ):
            out.append(victim)
    return out


def back_victims(final: Sample, victims: list[str], expected: dict[str, int]) -> list[str]:
    """Victims running whole again at the end: every pod Running."""
    return [v for v in victims if len(final.running(v)) == expected[v] and len(final.pods_of(v)) == expected[v]]


def partial_evictions(samples: list[Sample], expected: dict[str, int], settle: float = 20.0) -> list[str]:
    """Low-priority JobSets that lost part of their pods and kept running on the rest: some but not all of their
    pods Running while their Workload stayed admitted and active, for longer than `settle` seconds (a JobSet's own
    restart or Kueue's eviction passes through such states for a moment; a slice shared by two JobSets, or a
    victim whose pods were preempted one by one, stays in it)."""
    partial: set[str] = set()
    started: dict[str, float] = {}
    for sample in samples:
        for jobset, want in expected.items():
            if jobset == HP_NAME:
                continue
            w = sample.workload_of(jobset)
            running = len(sample.running(jobset))
            if w is not None and w.active and w.admitted and 0 < running < want:
                since = started.setdefault(jobset, sample.at)
                if sample.at - since > settle:
                    partial.add(jobset)
            else:
                started.pop(jobset, None)
    return sorted(partial)


def lost_workloads(initial: Sample, final: Sample) -> list[str]:
    """JobSets that had a Workload at the start and, at the end, have none, a finished one, or have failed."""
    lost = []
    for jobset in initial.jobsets:
        w = final.workload_of(jobset)
        if jobset not in final.jobsets or w is None or w.finished or jobset in final.failed_jobsets:
            lost.append(jobset)
    return sorted(lost)


def outcome(
    mode: Mode,
    fault: Fault,
    failed_node: str,
    samples: list[Sample],
    fault_at: float,
    repair_at: float,
    expected: dict[str, int],
    timeline: dict[str, float],
) -> Outcome:
    recovered = recovered_at(samples, fault_at, expected[HP_NAME])
    victims = evicted_victims(samples)
    failed_pool = next((p.pool for s in samples for p in s.pods if p.node == failed_node), "")
    final = samples[-1]
    initial = next(s for s in samples if s.at >= fault_at - 5)
    hp_pools = sorted({p.pool for p in final.running(HP_NAME)})
    marks = {k: v - fault_at for k, v in {**timeline, **milestones(samples, fault_at, victims, expected)}.items()}
    if recovered is not None:
        marks["highPriorityRecovered"] = recovered - fault_at
    return Outcome(
        mode=mode.value,
        fault=fault.value,
        failed_node=failed_node,
        repair_after_seconds=round(repair_at - fault_at, 1),
        recovery_seconds=None if recovered is None else round(recovered - fault_at, 1),
        recovered_before_repair=recovered is not None and recovered < repair_at,
        victims_evicted=victims,
        victims_requeued=requeued_victims(samples, victims),
        victims_back=back_victims(final, victims, expected),
        partial_evictions=partial_evictions(samples, expected),
        lost_workloads=lost_workloads(initial, final),
        hp_pools_after=hp_pools,
        timeline=marks,
        pod_start_seconds=pod_start_seconds(samples),
        restarted_onto_failed_slice=restarted_onto(samples, fault_at, repair_at, failed_pool),
        hp_restarts=next(((r, c) for name, r, c in final.restarts if name == HP_NAME), (0, 0)),
    )


def trace(samples: list[Sample], origin: float) -> list[JsonObj]:
    """The samples in short, one line each, for reading a run afterwards: per JobSet, its pods by phase and its
    Workload's state; consecutive identical lines are dropped."""
    lines: list[JsonObj] = []
    last: JsonObj | None = None
    for sample in samples:
        state: JsonObj = {}
        for name in sorted({p.jobset for p in sample.pods} | set(sample.jobsets)):
            phases: dict[str, int] = {}
            for p in sample.pods_of(name):
                key = p.phase + ("/deleting" if p.deleting else "")
                phases[key] = phases.get(key, 0) + 1
            w = sample.workload_of(name)
            flags = "" if w is None else "".join(
                flag for flag, on in (
                    ("A", w.active), ("Q", w.admitted), ("E", w.evicted), ("R", w.requeued), ("F", w.finished)
                ) if on
            )  # fmt: skip
            state[name] = {"pods": phases, "workload": flags, "pools": sorted({p.pool for p in sample.running(name)})}
        if state != last:
            lines.append({"t": round(sample.at - origin, 2), **state})
            last = state
    return lines
