"""A node whose kubelet is this harness: the pods bound to it are backed by local processes.

`pulumi up` installs the Kueue and JobSet charts and the reconciler's Deployment and then waits until their pods are
Ready, and only then creates the objects their webhooks judge. kwok would report those pods Ready at once, before
anything serves; here a pod is Ready exactly when the process standing in for it serves (the chart's manager binary
behind its Service, `hotswap run` as its ServiceAccount), so the engine's awaits mean what they mean on GKE. Deleting
a pod stops its process (SIGTERM first: the reconciler releases its holds then), then the pod is finalised as a
kubelet would. Pods nothing backs (none in the stacks the suite runs) are reported Ready at once, as kwok would.
"""

from __future__ import annotations

import datetime
import itertools
import json
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import yaml

from e2e.cluster import LocalCluster
from e2e.controllers import SERVING_CERTS, LocalManager, manager_spec
from e2e.kubectl import Kubectl
from e2e.processes import Process, free_port, http_ok

JsonObj = dict[str, Any]
LABEL = "e2e.gke-tpu-priority.dev/process-backed"


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _now_micro() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Backer(Protocol):
    """What stands in for one kind of pod."""

    def matches(self, pod: JsonObj) -> bool: ...
    def ready(self, pod: JsonObj) -> bool:
        """Start what the pod runs if it is not running yet; True once it serves."""
        ...

    def gone(self, pod: JsonObj, remaining: list[JsonObj]) -> None:
        """The pod is being deleted; `remaining` are the other live pods this backer matches."""
        ...

    def stop(self) -> None: ...


def _owner_deployment(kubectl: Kubectl, pod: JsonObj) -> str | None:
    """The Deployment behind a pod, through its ReplicaSet (read once per pod: owners never change)."""
    namespace = pod["metadata"]["namespace"]
    for ref in pod["metadata"].get("ownerReferences", []):
        if ref["kind"] == "ReplicaSet":
            rs = kubectl.json("get", "replicaset", ref["name"], "-n", namespace)
            for owner in rs["metadata"].get("ownerReferences", []):
                if owner["kind"] == "Deployment":
                    return str(owner["name"])
    return None


@dataclass
class ManagerBacker:
    """A chart's controller manager (Kueue or JobSet): one process for the Deployment, started again after a
    back-off when it exits, stopped when the Deployment's last pod goes. The owner of the node holds the certificate
    directory's lock for the whole run (JobSet's is one per machine)."""

    cluster: LocalCluster
    name: str
    binary: str
    namespace: str
    cert_dir: Path = SERVING_CERTS
    manager: LocalManager | None = None
    restarts: int = 0
    _starting: threading.Thread | None = None
    _failed: str | None = None
    _retry_at: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def matches(self, pod: JsonObj) -> bool:
        return bool(pod["metadata"]["namespace"] == self.namespace)

    def _chart_objects(self) -> list[JsonObj]:
        """The chart's objects as installed (the engine rendered them): its Deployment, ConfigMaps and APIServices."""
        kubectl = self.cluster.kubectl()
        objects = kubectl.json("get", "deployments,configmaps", "-n", self.namespace)["items"]
        services = kubectl.json("get", "apiservices")["items"]
        ours = [s for s in services if (s["spec"].get("service") or {}).get("namespace") == self.namespace]
        return [*objects, *ours]

    def _start(self) -> None:
        try:
            spec = manager_spec(self.name, self.binary, self.namespace, self._chart_objects())
            manager = LocalManager(self.cluster, spec, self.cert_dir, lock=False)
            self.manager = manager
            manager.start()
        except Exception as error:
            # As a pod's container would: a manager started before its CRDs exist (the engine creates a chart's
            # objects in parallel) exits, and is started again after a back-off.
            if self.manager is not None:
                self.manager.stop()
                self.manager = None
            self._failed = f"{self.name}: {error}"
            self._retry_at = time.monotonic() + min(20.0, 5.0 * 2**self.restarts)

    def ready(self, pod: JsonObj) -> bool:
        with self._lock:
            crashed = self._starting is not None and not self._starting.is_alive() and self._failed is not None
            if crashed and time.monotonic() >= self._retry_at:
                print(f"e2e: restarting {self.name} after: {self._failed}", file=sys.stderr, flush=True)
                self.restarts += 1
                self._failed, self._starting = None, None
            if self._starting is None:
                self._starting = threading.Thread(target=self._start, name=f"start-{self.name}", daemon=True)
                self._starting.start()
                return False
            if self._starting.is_alive() or self.manager is None or self._failed:
                return False
        try:
            return self.manager.serving()
        except OSError:
            return False

    def gone(self, pod: JsonObj, remaining: list[JsonObj]) -> None:
        if not remaining:
            self.stop()

    def stop(self) -> None:
        with self._lock:
            starting, self._starting = self._starting, None
        if starting is not None:
            starting.join(timeout=200)
        if self.manager is not None:
            self.manager.stop()
            self.manager = None

    @property
    def failure(self) -> str | None:
        """A start that failed and is not being retried (a retry in progress is not a failure yet)."""
        return self._failed if self.restarts >= 5 else None


@dataclass
class ReconcilerBacker:
    """The hotswap reconciler: `hotswap run` per pod, as the Deployment's ServiceAccount, with the ConfigMap its pod
    mounts (ops endpoints moved to free loopback ports); SIGTERM on deletion, so it releases its holds."""

    cluster: LocalCluster
    namespace: str
    deployment: str = "hotswap-reconciler"
    processes: dict[str, tuple[Process, int]] = field(default_factory=dict)
    _owners: dict[str, str | None] = field(default_factory=dict)

    def matches(self, pod: JsonObj) -> bool:
        if pod["metadata"]["namespace"] != self.namespace:
            return False
        uid = pod["metadata"]["uid"]
        if uid not in self._owners:
            self._owners[uid] = _owner_deployment(self.cluster.kubectl(), pod)
        return self._owners[uid] == self.deployment

    def _launch(self, pod: JsonObj) -> tuple[Process, int]:
        kubectl = self.cluster.kubectl()
        spec = pod["spec"]
        (config_map,) = [v["configMap"]["name"] for v in spec.get("volumes", []) if "configMap" in v]
        data = kubectl.json("get", "configmap", config_map, "-n", self.namespace)["data"]
        config = yaml.safe_load(data["config.yaml"])
        health = free_port()
        config.update(healthPort=health, metricsPort=free_port())
        name = pod["metadata"]["name"]
        path = self.cluster.directory / f"{name}.yaml"
        path.write_text(yaml.safe_dump(config))
        token = kubectl.run(
            "create", "token", spec["serviceAccountName"], "-n", self.namespace, "--duration=2h"
        ).stdout.strip()  # fmt: skip
        kubeconfig = self.cluster.kubeconfig_for(name, token)
        process = Process(
            name,
            [
                sys.executable, "-m", "gke_tpu_priority.hotswap", "run", f"--config={path}",
                f"--kubeconfig={kubeconfig}", f"--identity={name}", "--bind-address=127.0.0.1",
            ],
            self.cluster.directory / "logs",
        )  # fmt: skip
        process.start()
        return process, health

    def ready(self, pod: JsonObj) -> bool:
        name = pod["metadata"]["name"]
        if name not in self.processes:
            self.processes[name] = self._launch(pod)
        process, health = self.processes[name]
        try:
            return process.running and http_ok(health, "/healthz")
        except OSError:
            return False  # not listening yet

    def gone(self, pod: JsonObj, remaining: list[JsonObj]) -> None:
        entry = self.processes.pop(pod["metadata"]["name"], None)
        if entry is not None:
            entry[0].stop()  # SIGTERM, then SIGKILL after its grace

    def stop(self) -> None:
        for process, _ in self.processes.values():
            process.stop()
        self.processes.clear()


@dataclass
class ProcessBackedNode:
    cluster: LocalCluster
    backers: list[Any]
    name: str = "controllers-0"
    labels: dict[str, str] = field(default_factory=dict)
    ready_seconds: dict[str, float] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _ips: dict[str, str] = field(default_factory=dict)
    _next_ip: Iterator[int] = field(default_factory=lambda: itertools.count(2))
    _first_seen: dict[str, float] = field(default_factory=dict)

    @property
    def node_labels(self) -> dict[str, str]:
        return {"kubernetes.io/hostname": self.name, "kubernetes.io/os": "linux", LABEL: "true", **self.labels}

    def start(self) -> None:
        kubectl = self.cluster.kubectl()
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": self.name, "labels": self.node_labels},
            "spec": {},
        }
        kubectl.run("create", "-f", "-", stdin=json.dumps(node))
        self._heartbeat(kubectl)
        for target in (self._heartbeats, self._sync_pods):
            thread = threading.Thread(target=target, name=f"{self.name}-{target.__name__}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=30)
        for backer in self.backers:
            backer.stop()

    # ---- the kubelet's node duties -----------------------------------------------------------------------------
    def _heartbeat(self, kubectl: Kubectl) -> None:
        capacity = {"cpu": "16", "memory": "64Gi", "pods": "110", "ephemeral-storage": "100Gi"}
        now = _now()
        status = {
            "status": {
                "capacity": capacity,
                "allocatable": capacity,
                "conditions": [
                    {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "process-backed",
                     "lastHeartbeatTime": now, "lastTransitionTime": now},
                ],
                "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
            }
        }  # fmt: skip
        kubectl.run("patch", "node", self.name, "--subresource=status", "--type=merge", "-p", json.dumps(status))
        lease = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": "kube-node-lease"},
            "spec": {"holderIdentity": self.name, "leaseDurationSeconds": 40, "renewTime": _now_micro()},
        }
        kubectl.run("apply", "--server-side", "--force-conflicts", "--field-manager=e2e-kubelet", "-f", "-",
                    stdin=json.dumps(lease))  # fmt: skip

    def _heartbeats(self) -> None:
        kubectl = self.cluster.kubectl()
        while not self._stop.wait(10):
            try:
                self._heartbeat(kubectl)
            except Exception as error:  # the API server may be restarting; the next beat tries again
                print(f"e2e: {self.name} heartbeat failed: {error}", file=sys.stderr, flush=True)

    # ---- the kubelet's pod duties ------------------------------------------------------------------------------
    def _backer(self, pod: JsonObj) -> Any | None:
        return next((b for b in self.backers if b.matches(pod)), None)

    def _sync_pods(self) -> None:
        kubectl = self.cluster.kubectl()
        while not self._stop.wait(1):
            try:
                self._sync_once(kubectl)
            except Exception as error:
                print(f"e2e: {self.name} pod sync failed: {error}", file=sys.stderr, flush=True)

    def _sync_once(self, kubectl: Kubectl) -> None:
        pods = kubectl.json("get", "pods", "--all-namespaces", f"--field-selector=spec.nodeName={self.name}")["items"]
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        for pod in pods:
            key = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
            backer = self._backer(pod)
            if pod["metadata"].get("deletionTimestamp"):
                if backer is not None:
                    backer.gone(pod, [p for p in live if backer.matches(p)])
                kubectl.run("delete", "pod", pod["metadata"]["name"], "-n", pod["metadata"]["namespace"],
                            "--grace-period=0", "--force", "--wait=false", check=False)  # fmt: skip
                self._ips.pop(key, None)
                continue
            self._first_seen.setdefault(key, time.monotonic())
            ready = True if backer is None else backer.ready(pod)
            if ready and key not in self.ready_seconds:
                self.ready_seconds[key] = round(time.monotonic() - self._first_seen[key], 1)
            self._report(kubectl, pod, key, ready)

    def _report(self, kubectl: Kubectl, pod: JsonObj, key: str, ready: bool) -> None:
        current = pod.get("status", {})
        was_ready = any(c["type"] == "Ready" and c["status"] == "True" for c in current.get("conditions", []))
        if current.get("phase") == "Running" and was_ready == ready:
            return
        if key not in self._ips:  # unique for the run (a pod network's addresses, never reached)
            n = next(self._next_ip)
            self._ips[key] = f"10.244.{250 + n // 250}.{n % 250 + 2}"
        ip = self._ips[key]
        now = _now()
        flag = "True" if ready else "False"
        containers = [
            {"name": c["name"], "image": c["image"], "imageID": "", "ready": ready, "started": True,
             "restartCount": 0, "state": {"running": {"startedAt": current.get("startTime", now)}}}
            for c in pod["spec"]["containers"]
        ]  # fmt: skip
        status = {
            "status": {
                "phase": "Running",
                "hostIP": "127.0.0.1",
                "podIP": ip,
                "podIPs": [{"ip": ip}],
                "startTime": current.get("startTime", now),
                "conditions": [
                    {"type": t, "status": s, "lastTransitionTime": now}
                    for t, s in (("PodScheduled", "True"), ("Initialized", "True"), ("ContainersReady", flag),
                                 ("Ready", flag))
                ],
                "containerStatuses": containers,
            }
        }  # fmt: skip
        kubectl.run("patch", "pod", pod["metadata"]["name"], "-n", pod["metadata"]["namespace"],
                    "--subresource=status", "--type=merge", "-p", json.dumps(status), check=False)  # fmt: skip

    def failures(self) -> list[str]:
        return [f for b in self.backers if (f := getattr(b, "failure", None))]
