"""The JobSet and Kueue controller managers as local processes behind their charts' objects.

The chart is installed as it renders (its Deployment gets a pod on a fake system node, which kwok reports
Running); the manager binary built from the same release runs here instead of in that pod, with:

- the chart's own ConfigMap as its configuration, changed only where a process outside a pod must differ: the
  webhook, metrics and health endpoints listen on free ports of 127.0.0.1;
- the chart's ServiceAccount as its identity (a TokenRequest token in a kubeconfig), so the chart's RBAC is what
  is tested, not an admin's rights;
- its webhook certificate as its own cert-controller writes it into the chart's Secret, copied to the directory the
  manager reads (in a pod the kubelet mounts that Secret there; cert-controller only waits for the files);
- the API server reaching its webhook Service through the egress proxy (e2e.egress) at its local port.
"""

from __future__ import annotations

import base64
import fcntl
import http.client
import json
import ssl
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from e2e import private_mount
from e2e.cluster import LocalCluster
from e2e.kubectl import Kubectl
from e2e.processes import Process, free_port, wait_for
from tools import toolchain

JsonObj = dict[str, Any]
# Hard-coded in JobSet v0.12.0's cert rotator (pkg/util/cert/cert.go), and where the charts mount the webhook
# Secret: one directory per machine, unless each manager gets a private mount of its cluster's own directory there
# (e2e.private_mount). Kueue reads its certificate directory from its configuration, so it gets one per cluster.
SERVING_CERTS = Path("/tmp/k8s-webhook-server/serving-certs")


class DirectoryLock:
    """A machine-wide lock on a certificate directory that only one manager may use at a time: a second local
    cluster waits for the first to finish (and says so) instead of overwriting its webhook certificate."""

    def __init__(self, directory: Path) -> None:
        self.path = directory.parent / f".{directory.name}.lock"
        self._file: Any = None

    def acquire(self, timeout: float) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = self.path.open("w")
        deadline, told = time.monotonic() + timeout, False
        while True:
            try:
                fcntl.flock(self._file, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() > deadline:
                    self._file.close()
                    raise TimeoutError(
                        f"{self.path} stayed locked for {timeout:.0f} s: another local cluster runs a manager "
                        "that uses this directory; stop it or wait for it to finish"
                    ) from None
                if not told:
                    print(f"waiting for {self.path}: another local cluster uses it", flush=True)
                    told = True
                time.sleep(2)

    def release(self) -> None:
        if self._file is not None:
            fcntl.flock(self._file, fcntl.LOCK_UN)
            self._file.close()
            self._file = None


def shared_directory_lock() -> DirectoryLock | None:
    """The machine-wide lock a local cluster must hold for its JobSet manager, or None where each manager gets a
    private mount of its own directory and any number of clusters run at once."""
    return None if private_mount.available() else DirectoryLock(SERVING_CERTS)


@dataclass(frozen=True)
class ManagerSpec:
    name: str
    binary: str
    namespace: str
    service_account: str
    config_map: str
    config_key: str
    config: JsonObj  # the chart's configuration, as rendered
    api_services: tuple[str, ...] = ()  # Services behind the chart's aggregated APIs


def _find(objects: list[JsonObj], kind: str, predicate: Any = None) -> JsonObj:
    matches = [o for o in objects if o["kind"] == kind and (predicate is None or predicate(o))]
    if len(matches) != 1:
        raise RuntimeError(f"expected one {kind} in the chart, found {len(matches)}")
    return matches[0]


def manager_spec(name: str, binary: str, namespace: str, chart: list[JsonObj]) -> ManagerSpec:
    """What the chart says about its manager: its ServiceAccount, ConfigMap and configuration."""
    deployment = _find(chart, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    config_maps = [v["configMap"]["name"] for v in volumes.values() if "configMap" in v]
    config_map = _find(chart, "ConfigMap", lambda o: o["metadata"]["name"] in config_maps)
    (key, text), *_ = config_map["data"].items()
    return ManagerSpec(
        name=name,
        binary=binary,
        namespace=namespace,
        service_account=pod["serviceAccountName"],
        config_map=config_map["metadata"]["name"],
        config_key=key,
        config=yaml.safe_load(text),
        api_services=tuple(
            sorted(
                {o["spec"]["service"]["name"] for o in chart if o["kind"] == "APIService" and o["spec"].get("service")}
            )
        ),
    )


class CertSync:
    """Plays the kubelet's part for one Secret: copies tls.crt/tls.key into a directory whenever they change."""

    def __init__(self, kubectl: Kubectl, namespace: str, secret: str, directory: Path) -> None:
        self.kubectl, self.namespace, self.secret, self.directory = kubectl, namespace, secret, directory
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"cert-sync-{secret}", daemon=True)
        self.synced = threading.Event()

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        for stale in ("tls.crt", "tls.key"):
            (self.directory / stale).unlink(missing_ok=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        last: dict[str, str] = {}
        while not self._stop.is_set():
            done = self.kubectl.run("get", "secret", "-n", self.namespace, self.secret, "-o", "json", check=False)
            data = json.loads(done.stdout).get("data", {}) if done.returncode == 0 else {}
            if data.get("tls.crt") and data.get("tls.key") and data != last:
                for key in ("tls.key", "tls.crt"):  # the key first: certwatcher reloads on the certificate
                    target = self.directory / key
                    tmp = target.with_suffix(".tmp")
                    tmp.write_bytes(base64.b64decode(data[key]))
                    tmp.chmod(0o600)
                    tmp.rename(target)
                last = data
                self.synced.set()
            self._stop.wait(1.0)


class LocalManager:
    """One controller manager process standing in for its chart's pod."""

    def __init__(
        self, cluster: LocalCluster, spec: ManagerSpec, cert_dir: Path = SERVING_CERTS, lock: bool = True
    ) -> None:
        """`lock=False`: the caller holds the certificate directory's DirectoryLock for the whole run (needed only
        where `shared_directory_lock()` gives one)."""
        self.cluster, self.spec, self.cert_dir = cluster, spec, cert_dir
        # Where the certificate is written on this side; the manager reads `cert_dir`, which is this directory
        # mounted privately when the path is the one shared by every JobSet manager.
        self.private = cert_dir == SERVING_CERTS and private_mount.available()
        self.host_cert_dir = cluster.directory / f"{spec.name}-certs" if self.private else cert_dir
        self.webhook_port = free_port()
        self.visibility_port = free_port()
        self.health_port = free_port()
        self.metrics_port = free_port()
        self.process: Process | None = None
        self.certs: CertSync | None = None
        self.ready_seconds = 0.0
        self.restarts = 0
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._directory_lock = DirectoryLock(cert_dir) if lock and not self.private else None
        self._supervisor = threading.Thread(target=self._supervise, name=f"supervise-{spec.name}", daemon=True)

    def _config(self) -> JsonObj:
        config: JsonObj = json.loads(json.dumps(self.spec.config))
        config.setdefault("webhook", {}).update(port=self.webhook_port, host="127.0.0.1", certDir=str(self.cert_dir))
        if self.spec.name == "kueue":
            # Kueue's aggregated visibility API (behind the chart's APIService) listens here instead of :8082.
            config["visibilityServer"] = {"bindAddress": "127.0.0.1", "bindPort": self.visibility_port}
        config.setdefault("health", {})["healthProbeBindAddress"] = f"127.0.0.1:{self.health_port}"
        config.setdefault("metrics", {})["bindAddress"] = f"127.0.0.1:{self.metrics_port}"
        # In a pod the namespace comes from the ServiceAccount mount; out of cluster it must be said.
        election = config.setdefault("leaderElection", {})
        if not election.get("resourceNamespace"):
            election["resourceNamespace"] = self.spec.namespace
        return config

    def start(self, timeout: float = 180, lock_timeout: float = 3600) -> None:
        if self._directory_lock is not None:
            self._directory_lock.acquire(lock_timeout)
        kubectl = self.cluster.kubectl()
        started = time.monotonic()
        token = kubectl.run(
            "create", "token", self.spec.service_account, "-n", self.spec.namespace, "--duration=24h"
        ).stdout.strip()  # fmt: skip
        kubeconfig = self.cluster.kubeconfig_for(self.spec.name, token)
        config_path = self.cluster.directory / f"{self.spec.name}-config.yaml"
        config = self._config()
        config_path.write_text(yaml.safe_dump(config))
        certs = config.get("internalCertManagement", {})
        self.certs = CertSync(kubectl, self.spec.namespace, certs["webhookSecretName"], self.host_cert_dir)
        self.certs.start()
        self.cluster.routes.add(self.spec.namespace, certs["webhookServiceName"], 443, self.webhook_port)
        for service in self.spec.api_services:
            self.cluster.routes.add(self.spec.namespace, service, 443, self.visibility_port)
        argv = [str(toolchain.binary(self.spec.binary)), f"--kubeconfig={kubeconfig}", f"--config={config_path}"]
        if self.private:
            argv = private_mount.wrap(argv, self.host_cert_dir, self.cert_dir)
        self.process = Process(self.spec.name, argv, self.cluster.directory / "logs")
        self.process.start()
        self.cluster.processes.append(self.process)
        wait_for(
            f"{self.spec.name}'s webhook certificate", lambda: self.certs is not None and self.certs.synced.is_set(),
            timeout, self.process,
        )  # fmt: skip
        wait_for(
            f"{self.spec.name} to serve its webhook",
            self.serving,
            timeout,
            self.process,
        )
        self.ready_seconds = round(time.monotonic() - started, 1)
        self._supervisor.start()

    def _supervise(self) -> None:
        """Start the manager again when it exits, as its Deployment would: a manager that cannot renew its leader
        lease in time (an API-server restart) exits on purpose and counts on being restarted."""
        while not self._stopping.wait(1.0):
            with self._lock:
                if self.process is None or self.process.running:
                    continue
                self.restarts += 1
            self._stopping.wait(min(10.0, 2.0 * self.restarts))  # the kubelet's back-off, shortened
            with self._lock:
                if not self._stopping.is_set() and not self.process.running:
                    self.process.start()

    def restart(self, timeout: float = 180) -> None:
        """Stop and start the manager, then wait until it serves: what a failing liveness probe leads to. A manager
        started while the API server was down can hang in start-up (Kueue v0.19.2 does); this gets it back."""
        assert self.process is not None
        with self._lock:
            self.process.stop()
            self.process.start()
            self.restarts += 1
        wait_for(f"{self.spec.name} to serve after a restart", self.serving, timeout, self.process)

    def serving(self) -> bool:
        """Any TLS answer on the webhook port: the server starts only once its certificate is in place."""
        connection = http.client.HTTPSConnection(
            "127.0.0.1", self.webhook_port, context=ssl._create_unverified_context(), timeout=5
        )
        try:
            connection.request("GET", "/")
            connection.getresponse()
            return True
        finally:
            connection.close()

    def stop(self) -> None:
        self._stopping.set()
        if self._supervisor.is_alive():
            self._supervisor.join(timeout=15)
        if self.process is not None:
            self.process.stop()
        if self.certs is not None:
            self.certs.stop()
        if self._directory_lock is not None:
            self._directory_lock.release()
