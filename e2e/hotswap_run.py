"""Drive the hotswap scenario on the local cluster: submit the JobSets, inject a fault, watch, repair, measure.

The reconciler runs as in e2e/test_reconciler.py: `hotswap run` as a local process with a TokenRequest token of
its ServiceAccount and the stack's own ConfigMap, its ops endpoints on free loopback ports. An observer thread
samples the scenario namespace (pods, Workloads, JobSets) about twice a second; e2e/hotswap_scenario.py turns the
samples into figures. Every wait is bounded and fails naming what it waited for and the state it last saw.
"""

from __future__ import annotations

import calendar
import json
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import yaml

from e2e import faults
from e2e.cluster import LocalCluster
from e2e.hotswap_scenario import (
    HP_NAME,
    JOBSET_NAME_LABEL,
    NAMESPACE,
    NODEPOOL_LABEL,
    Fault,
    Mode,
    Outcome,
    Sample,
    WorkloadView,
    expected_pods,
    hp_recovered,
    outcome,
    pod_view,
    scenario_workloads,
    trace,
    workload_view,
)
from e2e.kubectl import Kubectl
from e2e.processes import Process, free_port, http_ok, wait_for
from e2e.rest import RestClient
from gke_tpu_priority.components.workloads.jobset import HOTSWAP_DOMAIN

JsonObj = dict[str, Any]
JOBSETS = f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{NAMESPACE}/jobsets"
JOBS = f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs"
WORKLOADS = f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{NAMESPACE}/workloads"
PODS = f"/api/v1/namespaces/{NAMESPACE}/pods"
EVENTS = f"/apis/events.k8s.io/v1/namespaces/{NAMESPACE}/events"

# GKE repairs a failed TPU host in up to about 10 minutes (GKE's auto-repair); the scenario repairs after this many
# seconds so that a run fits CI. The reconciler must bring the JobSet back well before; without it the JobSet
# waits for the repair, so its recovery is this plus its restart. It is also past the time kube-controller-manager's
# pod garbage collector takes to remove a deleted node's pods (40 s of quarantine, a 20 s period): a node created
# again earlier would find them still bound to it.
REPAIR_AFTER_SECONDS = 90.0
# The reconciler's configuration is the stack's ConfigMap, but for one duration: a repaired slice counts as healthy
# only after `recoveryStabilization` (120 s by default, against flapping hosts on GKE). The scripted repair does
# not flap, and two minutes of waiting per run would not fit CI's budget.
RECONCILER_OVERRIDES = {"HOTSWAP_RECOVERY_STABILIZATION": "10s"}
SAMPLE_PERIOD = 0.5
QUARANTINE_TAINT = f"{HOTSWAP_DOMAIN}/unhealthy-slice"


def _timestamp(text: str) -> float:
    return float(calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%SZ")))


def _list(rest: RestClient, path: str) -> list[JsonObj]:
    response = rest.request("GET", path)
    if not response.ok:
        raise RuntimeError(f"GET {path}: {response.status}: {response.message}")
    items: list[JsonObj] = response.body.get("items", [])
    return items


def wait_until(what: str, probe: Callable[[], bool], timeout: float, state: Callable[[], str]) -> float:
    """Poll until `probe` holds; seconds waited. On timeout, fail naming what was waited for and the last state."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if probe():
            return time.monotonic() - started
        time.sleep(SAMPLE_PERIOD)
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}; state seen: {state()}")


class Observer:
    """Samples the scenario namespace on its own connection until stopped."""

    def __init__(self, rest: RestClient, pools: dict[str, str]) -> None:
        self.rest, self.pools = rest, pools
        self.samples: list[Sample] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="hotswap-observer", daemon=True)
        self.errors = 0

    def look(self) -> Sample:
        at = time.time()
        pods = tuple(
            pod_view(p, _timestamp(p["metadata"]["creationTimestamp"]), self.pools) for p in _list(self.rest, PODS)
        )
        workloads = tuple(workload_view(w) for w in _list(self.rest, WORKLOADS))
        # The JobSets, and the plain Jobs no JobSet owns.
        only_jobsets = _list(self.rest, JOBSETS)
        jobsets = only_jobsets + [
            j for j in _list(self.rest, JOBS) if not j["metadata"].get("labels", {}).get(JOBSET_NAME_LABEL)
        ]
        failed = tuple(
            j["metadata"]["name"]
            for j in jobsets
            if any(c["type"] == "Failed" and c["status"] == "True" for c in j.get("status", {}).get("conditions", []))
        )
        restarts = tuple(
            (
                j["metadata"]["name"],
                int(j["status"].get("restarts", 0)),
                int(j["status"].get("restartsCountTowardsMax", 0)),
            )
            for j in only_jobsets
            if "status" in j
        )
        return Sample(at, pods, workloads, tuple(j["metadata"]["name"] for j in jobsets), failed, restarts)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.samples.append(self.look())
            except (OSError, RuntimeError):
                self.errors += 1  # the API server is busy; the next sample will do
            self._stop.wait(SAMPLE_PERIOD)


class Reconciler:
    """One `hotswap run` replica as the stack's ServiceAccount with the stack's configuration."""

    def __init__(self, cluster: LocalCluster, kubectl: Kubectl, objects: list[JsonObj], name: str) -> None:
        deployment = _find(objects, "Deployment", "hotswap-reconciler")
        namespace = deployment["metadata"]["namespace"]
        volumes = deployment["spec"]["template"]["spec"]["volumes"]
        (config_map,) = [v["configMap"]["name"] for v in volumes if "configMap" in v]
        config: JsonObj = yaml.safe_load(_find(objects, "ConfigMap", config_map)["data"]["config.yaml"])
        self.health_port = free_port()
        config.update(healthPort=self.health_port, metricsPort=free_port())
        self.config = config
        path = cluster.directory / f"hotswap-{name}.yaml"
        path.write_text(yaml.safe_dump(config))
        account = deployment["spec"]["template"]["spec"]["serviceAccountName"]
        token = kubectl.run("create", "token", account, "-n", namespace, "--duration=1h").stdout.strip()
        kubeconfig = cluster.kubeconfig_for(f"hotswap-{name}", token)
        self.name = name
        election = config.get("leaderElection", {})
        self.lease = (str(election.get("leaseNamespace")), str(election.get("leaseName")))
        self.process = Process(
            f"hotswap-{name}",
            [
                sys.executable, "-m", "gke_tpu_priority.hotswap", "run", f"--config={path}",
                f"--kubeconfig={kubeconfig}", f"--identity={name}", "--bind-address=127.0.0.1",
            ],
            cluster.directory / "logs",
            env=RECONCILER_OVERRIDES,
        )  # fmt: skip

    def start(self) -> None:
        self.process.start()
        wait_for(f"hotswap {self.name} /healthz", lambda: http_ok(self.health_port, "/healthz"), 60, self.process)

    def stop(self) -> None:
        self.process.stop()


def _find(objects: list[JsonObj], kind: str, name: str) -> JsonObj:
    (found,) = [o for o in objects if o["kind"] == kind and o["metadata"].get("name") == name]
    return found


class Scenario:
    """One cluster, the scenario stack applied; `run` plays one fault in one mode and cleans up after itself."""

    def __init__(
        self,
        cluster: LocalCluster,
        rest: RestClient,
        kubectl: Kubectl,
        objects: list[JsonObj],
        with_batch_job: bool = False,
    ) -> None:
        self.cluster, self.rest, self.kubectl, self.objects = cluster, rest, kubectl, objects
        self.with_batch_job = with_batch_job
        self.jobsets = scenario_workloads(with_batch_job)
        self.expected = {j["metadata"]["name"]: expected_pods(j) for j in self.jobsets}
        self.events: list[JsonObj] = []
        self.takeover: JsonObj = {}

    def pools(self) -> dict[str, str]:
        return {
            n["metadata"]["name"]: n["metadata"].get("labels", {}).get(NODEPOOL_LABEL, "")
            for n in _list(self.rest, "/api/v1/nodes")
        }

    def _state(self, observer: Observer) -> Callable[[], str]:
        def describe() -> str:
            try:
                sample = observer.look()
            except (OSError, RuntimeError) as err:
                return f"(cannot look: {err})"
            parts = []
            for name in self.expected:
                w = sample.workload_of(name)
                phases: dict[str, int] = {}
                for p in sample.pods_of(name):
                    key = p.phase + ("/deleting" if p.deleting else "")
                    phases[key] = phases.get(key, 0) + 1
                wl = "no workload" if w is None else (
                    f"active={w.active} admitted={w.admitted} evicted={w.evicted}({w.evicted_reason}) "
                    f"requeued={w.requeued}"
                )  # fmt: skip
                parts.append(f"{name}: pods {phases or 'none'}; {wl}")
            return "; ".join(parts)

        return describe

    def _all_running(self, observer: Observer, names: list[str]) -> Callable[[], bool]:
        def probe() -> bool:
            sample = observer.look()
            return all(len(sample.running(n)) == self.expected[n] == len(sample.pods_of(n)) for n in names)

        return probe

    def submit(self, obj: JsonObj) -> None:
        response = self.rest.create(obj)
        if not response.ok:
            raise RuntimeError(
                f"{obj['kind']} {obj['metadata']['name']} refused: {response.status}: {response.message}"
            )

    def run(
        self, mode: Mode, fault: Fault, repair_after: float = REPAIR_AFTER_SECONDS, kill_leader_at_hold: bool = False
    ) -> Outcome:
        """One fault in one mode. `kill_leader_at_hold`: two reconciler replicas; the leader is killed (SIGKILL)
        as soon as it has held a victim, mid-eviction, and the standby must take the Lease and finish the job
        from what the first one wrote on the Workloads."""
        # Only the unreachable fault's JobSet opts in to fast-fail: nothing else would end its pods.
        self.jobsets = scenario_workloads(self.with_batch_job, fast_fail=fault is Fault.UNREACHABLE)
        observer = Observer(self.rest, self.pools())
        state = self._state(observer)
        names = [f"{mode.value}-{fault.value}"] + (
            [f"{mode.value}-{fault.value}-standby"] if kill_leader_at_hold else []
        )
        replicas = [Reconciler(self.cluster, self.kubectl, self.objects, name) for name in names]
        self.takeover = {}
        timeline: dict[str, float] = {}
        broken: str | None = None  # a failed node not yet repaired, for the clean-up
        try:
            if mode is not Mode.OFF:
                lease = replicas[0].lease
                replicas[0].start()
                wait_until(
                    f"{names[0]} to hold the Lease", lambda: self.holder(lease) == names[0], 60,
                    lambda: f"holder {self.holder(lease)}",
                )  # fmt: skip
                for standby in replicas[1:]:
                    standby.start()
            low = [j for j in self.jobsets if j["metadata"]["name"] != HP_NAME]
            high = [j for j in self.jobsets if j["metadata"]["name"] == HP_NAME]
            # A plain Job's pods carry no JobSet job-key, so JobSet's exclusive placement does not keep a JobSet's
            # leader off the Job's pool: submitted together, lp-0's leader can land there before the Job's last
            # host is bound, and the two then wait on each other's nodes. The Job runs first, alone.
            plain_jobs = [j for j in low if j["kind"] == "Job"]
            for job in plain_jobs:
                self.submit(job)
            if plain_jobs:
                wait_until(
                    "the plain Jobs to run", self._all_running(observer, [j["metadata"]["name"] for j in plain_jobs]),
                    180, state,
                )  # fmt: skip
            for jobset in (j for j in low if j["kind"] != "Job"):
                self.submit(jobset)
            wait_until(
                "the low-priority JobSets to run", self._all_running(observer, [j["metadata"]["name"] for j in low]),
                180, state,
            )  # fmt: skip
            for jobset in high:
                self.submit(jobset)
            wait_until("the high-priority JobSet to run", self._all_running(observer, [HP_NAME]), 180, state)
            hp_pods = sorted(observer.look().running(HP_NAME), key=lambda p: (p.pool, p.node))
            failed_node = hp_pods[1].node  # the second host of the first of its slices
            failed_pool = self.pools().get(failed_node, "")
            observer.start()
            time.sleep(2 * SAMPLE_PERIOD)
            fault_at = time.time()
            broken = failed_node
            faults.inject(self.rest, fault, failed_node)
            timeline["faultInjected"] = time.time()
            repair_at = fault_at + repair_after
            recovered = self._all_running_after(observer, fault_at)
            if kill_leader_at_hold:
                self._kill_leader_at_hold(observer, replicas, fault_at, timeline, state)
            while time.time() < repair_at:
                if "highPriorityRunning" not in timeline and recovered():
                    timeline["highPriorityRunning"] = time.time()
                if "sliceQuarantined" not in timeline and self._quarantined(failed_pool):
                    timeline["sliceQuarantined"] = time.time()
                time.sleep(SAMPLE_PERIOD)
            faults.repair(self.rest, fault, failed_node)
            broken = None
            timeline["repaired"] = time.time()
            repair_at = time.time()
            wait_until(f"node {failed_node} Ready again", lambda: faults.node_ready(self.rest, failed_node), 120, state)
            timeline["nodeReady"] = time.time()
            wait_until("the high-priority JobSet to run again", recovered, 180, state)
            wait_until(
                "every JobSet to run again after the repair", self._all_running(observer, list(self.expected)),
                240, state,
            )  # fmt: skip
            timeline["allRunning"] = time.time()
            if "sliceQuarantined" in timeline:
                wait_until(
                    "the quarantine taint to be lifted", lambda: not self.quarantined_nodes(), 60,
                    lambda: f"still tainted: {self.quarantined_nodes()}",
                )  # fmt: skip
                timeline["quarantineLifted"] = time.time()
            time.sleep(2)
            observer.stop()
            self.events = _list(self.rest, EVENTS)
            return outcome(mode, fault, failed_node, observer.samples, fault_at, repair_at, self.expected, timeline)
        finally:
            observer.stop()
            for replica in replicas:
                replica.stop()
            origin = timeline.get("faultInjected", time.time())
            trace_path = self.cluster.directory / f"hotswap-{mode.value}-{fault.value}.trace.jsonl"
            trace_path.write_text("".join(json.dumps(line) + "\n" for line in trace(observer.samples, origin)))
            if broken is not None:
                faults.repair(self.rest, fault, broken)
            self._lift_quarantine()
            self.clean()

    def quarantined_nodes(self) -> list[str]:
        """Nodes carrying the reconciler's quarantine taint."""
        return sorted(
            n["metadata"]["name"]
            for n in _list(self.rest, "/api/v1/nodes")
            if any(t.get("key") == QUARANTINE_TAINT for t in n.get("spec", {}).get("taints", []))
        )

    def _quarantined(self, pool: str) -> bool:
        """Every present host of `pool` carries the quarantine taint."""
        members = [name for name, p in self.pools().items() if p == pool]
        tainted = set(self.quarantined_nodes())
        return bool(members) and all(name in tainted for name in members)

    def _lift_quarantine(self) -> None:
        """A run that failed half-way may leave the taint behind; the next run must start on schedulable nodes."""
        for node in _list(self.rest, "/api/v1/nodes"):
            taints = node.get("spec", {}).get("taints", [])
            if any(t.get("key") == QUARANTINE_TAINT for t in taints):
                kept = [t for t in taints if t.get("key") != QUARANTINE_TAINT]
                patch = {"metadata": {"resourceVersion": node["metadata"]["resourceVersion"]}, "spec": {"taints": kept}}
                self.rest.request(
                    "PATCH", f"/api/v1/nodes/{node['metadata']['name']}", patch, content_type=faults.MERGE
                )  # fmt: skip

    def holder(self, lease: tuple[str, str]) -> str | None:
        response = self.rest.request("GET", f"/apis/coordination.k8s.io/v1/namespaces/{lease[0]}/leases/{lease[1]}")
        holder = response.body.get("spec", {}).get("holderIdentity") if response.ok else None
        return str(holder) if holder else None

    def _kill_leader_at_hold(
        self,
        observer: Observer,
        replicas: list[Reconciler],
        fault_at: float,
        timeline: dict[str, float],
        state: Callable[[], str],
    ) -> None:
        leader, standby = replicas
        held: list[WorkloadView] = []

        def a_victim_held() -> bool:
            held[:] = [w for w in observer.look().workloads if w.jobset != HP_NAME and not w.active]
            return bool(held)

        wait_until("the leader to hold a victim", a_victim_held, 60, state)
        leader.process.kill()
        timeline["leaderKilled"] = time.time()
        wait_until(
            f"{standby.name} to take the Lease", lambda: self.holder(leader.lease) == standby.name, 60,
            lambda: f"holder {self.holder(leader.lease)}",
        )  # fmt: skip
        timeline["standbyLeads"] = time.time()
        # What the first leader wrote is still there for the second: the hold (spec.active=false and its
        # annotations) unless the op is already over and the victim released.
        workload = self.rest.request("GET", f"{WORKLOADS}/{held[0].name}").body
        annotations = workload.get("metadata", {}).get("annotations", {})
        self.takeover = {
            "victim": held[0].jobset,
            "heldAfterTakeover": workload.get("spec", {}).get("active") is False,
            "holdAnnotations": sorted(k for k in annotations if k.startswith(HOTSWAP_DOMAIN)),
        }

    def _all_running_after(self, observer: Observer, fault_at: float) -> Callable[[], bool]:
        return lambda: hp_recovered(observer.look(), fault_at, self.expected[HP_NAME])

    def clean(self, timeout: float = 180) -> None:
        """No JobSet, Workload or pod left in the namespace, every node Ready: the next run starts afresh."""
        for collection in (JOBSETS, JOBS):
            for obj in _list(self.rest, collection):
                self.rest.request(
                    "DELETE", f"{collection}/{obj['metadata']['name']}", {"propagationPolicy": "Background"}
                )  # fmt: skip

        def empty() -> bool:
            return not (
                _list(self.rest, JOBSETS) or _list(self.rest, JOBS) or _list(self.rest, WORKLOADS)
                or _list(self.rest, PODS)
            )  # fmt: skip

        def left() -> str:
            return (
                f"jobsets {len(_list(self.rest, JOBSETS))}, workloads {len(_list(self.rest, WORKLOADS))}, "
                f"pods {[p['metadata']['name'] for p in _list(self.rest, PODS)]}"
            )

        wait_until("the scenario namespace to empty", empty, timeout, left)
