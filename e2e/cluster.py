"""A Kubernetes control plane on 127.0.0.1 from binaries built from upstream: etcd, kube-apiserver,
kube-controller-manager, kube-scheduler, and kwok playing the kubelets of fake TPU v6e nodes.

    python -m e2e.cluster [--dir build/e2e/cluster]   start it, print how to reach it, stop it all on Ctrl-C
    python -m e2e.cluster --stack dev                 the same with a stack's platform on it (e2e/playground_run.py)

Every port is picked free at start, so two clusters can run side by side. The API server is configured like a
GKE control plane of the same release where it matters to the package: RBAC and Node authorization,
ValidatingAdmissionPolicy, the admission plugins GKE enables, service-account tokens, the aggregation layer.
"""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import json
import shutil
import signal
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

import yaml

from e2e.egress import EgressProxy
from e2e.kubectl import Kubectl
from e2e.nodes import KWOK_SELECTOR, fleet_nodes
from e2e.pki import ClusterPki, KeyPair, make_pki
from e2e.processes import Process, free_port, http_ok, https_ok, wait_for
from tools import toolchain

SERVICE_CIDR = "10.96.0.0/16"
# GKE enables these on top of the API server's defaults (which already include ValidatingAdmissionPolicy,
# MutatingAdmissionWebhook, ValidatingAdmissionWebhook, ResourceQuota, Priority, DefaultTolerationSeconds, ...).
ADMISSION_PLUGINS = "NodeRestriction,PodSecurity,Priority,DefaultTolerationSeconds,TaintNodesByCondition"
# No cloud, no kubelets: the controllers that only make sense with them stay off.
KCM_CONTROLLERS = ",".join(
    (
        "*",
        "-cloud-node-lifecycle-controller",
        "-service-lb-controller",
        "-node-route-controller",
        "-persistentvolume-attach-detach-controller",
    )
)


def _kubeconfig(path: Path, server: str, ca: Path, user: KeyPair | None = None, token: str | None = None) -> Path:
    credentials: dict[str, str] = {}
    if user is not None:
        credentials = {"client-certificate": str(user.cert), "client-key": str(user.key)}
    if token is not None:
        credentials = {"token": token}
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "e2e", "cluster": {"server": server, "certificate-authority": str(ca)}}],
        "users": [{"name": "e2e", "user": credentials}],
        "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": "e2e"}}],
        "current-context": "e2e",
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
    return path


@dataclass
class Routes:
    """Which local port serves which Service port: the egress proxy's table, filled as controllers start."""

    kubectl: Kubectl | None = None
    by_service: dict[tuple[str, str, int], int] = field(default_factory=dict)
    _by_ip: dict[tuple[str, int], int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, namespace: str, service: str, port: int, local_port: int) -> None:
        with self._lock:
            self.by_service[(namespace, service, port)] = local_port
            self._by_ip.clear()

    def resolve(self, host: str, port: int) -> int | None:
        with self._lock:
            if (host, port) in self._by_ip:
                return self._by_ip[(host, port)]
            if self.kubectl is None:
                return None
        services = self.kubectl.json("get", "services", "--all-namespaces")
        table: dict[tuple[str, int], int] = {}
        with self._lock:
            for svc in services.get("items", []):
                meta, spec = svc["metadata"], svc.get("spec", {})
                for svc_port in spec.get("ports", []):
                    local = self.by_service.get((meta["namespace"], meta["name"], svc_port["port"]))
                    if local is not None and spec.get("clusterIP"):
                        table[(spec["clusterIP"], svc_port["port"])] = local
            self._by_ip = table
            return table.get((host, port))


class LocalCluster:
    def __init__(self, directory: Path) -> None:
        self.directory = directory.resolve()
        self.processes: list[Process] = []
        self.routes = Routes()
        self.egress: EgressProxy | None = None
        self.apiserver: Process | None = None
        self.api_port = 0
        self.pki: ClusterPki | None = None
        self.kubeconfig = self.directory / "kubeconfig"
        self.started_seconds: dict[str, float] = {}

    # ---- lifecycle -------------------------------------------------------------------------------------------
    def start(self, with_nodes: bool = True) -> None:
        if self.directory.exists():
            shutil.rmtree(self.directory)
        (self.directory / "logs").mkdir(parents=True)
        service_ip = str(next(ipaddress.ip_network(SERVICE_CIDR).hosts()))
        self.pki = make_pki(self.directory / "pki", service_ip)
        self._start_etcd()
        self._start_apiserver()
        self._start_controller_manager()
        self._start_scheduler()
        self._start_kwok()
        self.routes.kubectl = self.kubectl()
        if with_nodes:
            self.create_nodes()

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.stop()
        self.processes.clear()
        if self.egress is not None:
            self.egress.stop()
            self.egress = None

    # ---- clients ---------------------------------------------------------------------------------------------
    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.api_port}"

    def kubectl(self) -> Kubectl:
        return Kubectl(toolchain.binary("kubectl"), self.kubeconfig)

    def kubeconfig_for(self, name: str, token: str) -> Path:
        assert self.pki is not None
        return _kubeconfig(self.directory / f"{name}.kubeconfig", self.server, self.pki.ca.cert, token=token)

    # ---- components ------------------------------------------------------------------------------------------
    def _launch(self, name: str, argv: list[str]) -> Process:
        process = Process(name, argv, self.directory / "logs")
        started = time.monotonic()
        process.start()
        self.processes.append(process)
        self.started_seconds[name] = started
        return process

    def _ready(self, name: str) -> None:
        self.started_seconds[name] = round(time.monotonic() - self.started_seconds[name], 2)

    def _start_etcd(self) -> None:
        client, peer = free_port(), free_port()
        self.etcd_port = client
        process = self._launch(
            "etcd",
            [
                str(toolchain.binary("etcd")),
                "--name=e2e",
                f"--data-dir={self.directory / 'etcd'}",
                f"--listen-client-urls=http://127.0.0.1:{client}",
                f"--advertise-client-urls=http://127.0.0.1:{client}",
                f"--listen-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-cluster=e2e=http://127.0.0.1:{peer}",
                "--unsafe-no-fsync",  # a throw-away cluster: durability buys nothing, fsync costs seconds per test
                "--log-level=warn",
            ],
        )
        wait_for("etcd to serve", lambda: http_ok(client, "/health"), 60, process)
        self._ready("etcd")

    def _start_apiserver(self) -> None:
        pki = self.pki
        assert pki is not None
        self.api_port = free_port()
        egress_socket = self.directory / "egress.sock"
        self.egress = EgressProxy(egress_socket, self.routes.resolve)
        self.egress.start()
        egress_config = self.directory / "egress-selector.yaml"
        egress_config.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "apiserver.k8s.io/v1beta1",
                    "kind": "EgressSelectorConfiguration",
                    "egressSelections": [
                        {
                            "name": "cluster",
                            "connection": {
                                "proxyProtocol": "HTTPConnect",
                                "transport": {"uds": {"udsName": str(egress_socket)}},
                            },
                        }
                    ],
                }
            )
        )
        process = self._launch(
            "kube-apiserver",
            [
                str(toolchain.binary("kube-apiserver")),
                f"--etcd-servers=http://127.0.0.1:{self.etcd_port}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={self.api_port}",
                # The kubernetes Service's endpoints may not be loopback; nothing in the suite dials it.
                "--endpoint-reconciler-type=none",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                f"--tls-cert-file={pki.apiserver.cert}",
                f"--tls-private-key-file={pki.apiserver.key}",
                f"--client-ca-file={pki.ca.cert}",
                f"--kubelet-client-certificate={pki.kubelet_client.cert}",
                f"--kubelet-client-key={pki.kubelet_client.key}",
                f"--service-account-key-file={pki.service_account_pub}",
                f"--service-account-signing-key-file={pki.service_account_key}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                "--authorization-mode=Node,RBAC",
                f"--enable-admission-plugins={ADMISSION_PLUGINS}",
                "--allow-privileged=true",
                f"--requestheader-client-ca-file={pki.front_proxy_ca.cert}",
                "--requestheader-allowed-names=front-proxy-client",
                "--requestheader-extra-headers-prefix=X-Remote-Extra-",
                "--requestheader-group-headers=X-Remote-Group",
                "--requestheader-username-headers=X-Remote-User",
                f"--proxy-client-cert-file={pki.front_proxy_client.cert}",
                f"--proxy-client-key-file={pki.front_proxy_client.key}",
                f"--egress-selector-config-file={egress_config}",
                "--profiling=false",
                "--v=1",
            ],
        )
        self.apiserver = process
        _kubeconfig(self.kubeconfig, self.server, pki.ca.cert, user=pki.admin)
        wait_for(
            "kube-apiserver /readyz", lambda: https_ok(self.api_port, "/readyz", pki.ca.cert, pki.admin), 120, process
        )
        self._ready("kube-apiserver")

    def restart_apiserver(self) -> float:
        """Stop the API server and start it again on the same port and storage; seconds until ready again."""
        assert self.apiserver is not None and self.pki is not None
        pki = self.pki
        self.apiserver.stop()
        started = time.monotonic()
        self.apiserver.start()
        wait_for(
            "kube-apiserver /readyz after restart",
            lambda: https_ok(self.api_port, "/readyz", pki.ca.cert, pki.admin),
            120,
            self.apiserver,
        )
        return time.monotonic() - started

    def _start_secure_component(self, name: str, user: KeyPair, flags: list[str]) -> None:
        """kube-controller-manager or kube-scheduler: its own client certificate, serving /healthz on a free port."""
        assert self.pki is not None
        config = _kubeconfig(self.directory / f"{name}.kubeconfig", self.server, self.pki.ca.cert, user=user)
        port = free_port()
        process = self._launch(
            name,
            [
                str(toolchain.binary(name)),
                f"--kubeconfig={config}",
                f"--authentication-kubeconfig={config}",
                f"--authorization-kubeconfig={config}",
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
                "--leader-elect=false",
                "--v=1",
                *flags,
            ],
        )
        wait_for(f"{name} /healthz", lambda: https_ok(port, "/healthz", None, None), 120, process)
        self._ready(name)

    def _start_controller_manager(self) -> None:
        pki = self.pki
        assert pki is not None
        self._start_secure_component(
            "kube-controller-manager",
            pki.controller_manager,
            [
                "--use-service-account-credentials=true",
                f"--service-account-private-key-file={pki.service_account_key}",
                f"--root-ca-file={pki.ca.cert}",
                f"--controllers={KCM_CONTROLLERS}",
            ],
        )

    def _start_scheduler(self) -> None:
        assert self.pki is not None
        self._start_secure_component("kube-scheduler", self.pki.scheduler, [])

    def _start_kwok(self) -> None:
        stages = kwok_stage_files()
        process = self._launch(
            "kwok",
            [
                str(toolchain.binary("kwok")),
                f"--kubeconfig={self.kubeconfig}",
                "--manage-all-nodes=false",
                f"--manage-nodes-with-annotation-selector={KWOK_SELECTOR}",
                "--node-lease-duration-seconds=40",
                "--node-ip=127.0.0.1",
                "--cidr=10.244.0.1/16",
                f"--server-address=127.0.0.1:{free_port()}",
                *(f"--config={path}" for path in stages),
            ],
        )
        time.sleep(0.5)
        if not process.running:
            raise RuntimeError(f"kwok exited at start; its log ends:\n{process.tail()}")
        self._ready("kwok")

    def create_nodes(self) -> None:
        nodes = fleet_nodes()
        self.kubectl().run("create", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": nodes}))

        def all_ready() -> bool:
            listed = self.kubectl().json("get", "nodes")
            ready = [
                n
                for n in listed["items"]
                if any(
                    c["type"] == "Ready" and c["status"] == "True" for c in n.get("status", {}).get("conditions", [])
                )
            ]
            return len(ready) == len(nodes)

        wait_for(f"{len(nodes)} fake nodes to be Ready", all_ready, 120)


# The stages of kwok's own "fast" node and pod sets, less pod-complete: TPU training pods run until they are
# deleted or failed by a test, never finishing by themselves.
KWOK_STAGES = (
    "kustomize/stage/node/fast/node-initialize.yaml",
    "kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    "kustomize/stage/pod/fast/pod-ready.yaml",
    "kustomize/stage/pod/fast/pod-delete.yaml",
)


def kwok_stage_files() -> list[Path]:
    """kwok's stage definitions, read from the kwok module the toolchain pinned (never copied into this repo)."""
    module = toolchain.module_source("kwok", "sigs.k8s.io/kwok")
    return [module / stage for stage in KWOK_STAGES]


@contextlib.contextmanager
def running(directory: Path, with_nodes: bool = True) -> Iterator[LocalCluster]:
    cluster = LocalCluster(directory)
    try:
        cluster.start(with_nodes=with_nodes)
        yield cluster
    finally:
        cluster.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.cluster", description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=None, help="where the cluster's files go")
    parser.add_argument(
        "--stack",
        default=None,
        help="bring up this stack's platform (Kueue, JobSet, its objects, the hotswap reconciler) on fake TPU v6e "
        "nodes; without it, a bare control plane",
    )
    args = parser.parse_args(argv)
    if args.stack:
        return _playground(args.stack, args.dir)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    print("e2e: building or reusing the control plane binaries", file=sys.stderr, flush=True)
    toolchain.main(["build", "etcd", "kube", "kwok"])
    with running(args.dir or Path("build/e2e/cluster")) as cluster:
        print(f"e2e: cluster up at {cluster.server}; start-up seconds {cluster.started_seconds}")
        print(f"e2e: export KUBECONFIG={cluster.kubeconfig}")
        print("e2e: Ctrl-C stops every process this command started", flush=True)
        stop.wait()
    print("e2e: stopped", file=sys.stderr)
    return 0


def _playground(stack: str, directory: Path | None) -> int:
    # Imported here: the playground builds on this module (LocalCluster), and the bare cluster needs none of it.
    from e2e import playground, playground_run
    from testkit.mock_runtime import PROJECT_ROOT, load_stack_config

    configs = {name: load_stack_config(name) for name in playground.stack_names(PROJECT_ROOT)}
    try:
        platform = playground.choose_stack(stack, configs)
    except playground.PlaygroundError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return playground_run.run(stack, platform, directory or Path("build/playground") / stack)


if __name__ == "__main__":
    raise SystemExit(main())
