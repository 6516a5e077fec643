"""The hotswap reconciler against the real API server, as the ServiceAccount the package deploys for it.

The dev stack's objects (the reconciler's namespace, ServiceAccount, RBAC and ConfigMap among them) are applied;
each replica runs `hotswap run` as a local process with a TokenRequest token of that ServiceAccount and the
ConfigMap's own configuration (its ops endpoints moved to free loopback ports). Checked: the RBAC covers what the
reconciler does (the real authorizer answers), a replica syncs and takes the Lease, a second replica takes over
when the leader is killed, and leadership is back after an API-server restart (a leader that cannot renew in
time exits for its Deployment to restart it; the test restarts it as the kubelet would).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e import report
from e2e.apply import apply_all, delete_all
from e2e.conftest import Controllers, Target, served_locally
from e2e.processes import Process, free_port, http_ok, wait_for
from testkit.stacks import stack_run
from tools.manifests import kubernetes_objects

JsonObj = dict[str, Any]
STACK = "dev"


def _find(objects: list[JsonObj], kind: str, name: str) -> JsonObj:
    (found,) = [o for o in objects if o["kind"] == kind and o["metadata"].get("name") == name]
    return found


def _deployment(objects: list[JsonObj]) -> JsonObj:
    return _find(objects, "Deployment", "hotswap-reconciler")


def _config(objects: list[JsonObj]) -> dict[str, Any]:
    """The reconciler's configuration: the ConfigMap its Deployment mounts."""
    volumes = _deployment(objects)["spec"]["template"]["spec"]["volumes"]
    (name,) = [v["configMap"]["name"] for v in volumes if "configMap" in v]
    config: dict[str, Any] = yaml.safe_load(_find(objects, "ConfigMap", name)["data"]["config.yaml"])
    return config


@pytest.fixture(scope="module")
def stack(target: Target, controllers: Controllers) -> Iterator[list[JsonObj]]:
    objects = [o for o in kubernetes_objects(stack_run(STACK).resources) if served_locally(target, o)]
    outcomes = apply_all(target.rest, objects)
    assert [o.as_json() for o in outcomes if not o.accepted] == []
    yield objects
    delete_all(target.rest, [o for o in objects if not controllers.owns(o)])


class Replica:
    def __init__(self, target: Target, objects: list[JsonObj], name: str) -> None:
        cluster = target.need_local()
        deployment = _deployment(objects)
        namespace = deployment["metadata"]["namespace"]
        account = deployment["spec"]["template"]["spec"]["serviceAccountName"]
        config = _config(objects)
        self.health_port, metrics_port = free_port(), free_port()
        config.update(healthPort=self.health_port, metricsPort=metrics_port)
        self.lease = (config["leaderElection"]["leaseNamespace"], config["leaderElection"]["leaseName"])
        config_path = cluster.directory / f"hotswap-{name}.yaml"
        config_path.write_text(yaml.safe_dump(config))
        token = target.kubectl.run("create", "token", account, "-n", namespace, "--duration=1h").stdout.strip()
        kubeconfig = cluster.kubeconfig_for(f"hotswap-{name}", token)
        self.name = name
        self.process = Process(
            f"hotswap-{name}",
            [
                sys.executable, "-m", "gke_tpu_priority.hotswap", "run", f"--config={config_path}",
                f"--kubeconfig={kubeconfig}", f"--identity={name}", "--bind-address=127.0.0.1",
            ],
            cluster.directory / "logs",
        )  # fmt: skip

    def start(self) -> None:
        self.process.start()
        wait_for(f"hotswap {self.name} /healthz", lambda: http_ok(self.health_port, "/healthz"), 60, self.process)


def _holder(target: Target, lease: tuple[str, str]) -> str | None:
    done = target.kubectl.run("get", "lease", "-n", lease[0], lease[1], "-o", "json", check=False)
    if done.returncode != 0:
        return None
    holder = json.loads(done.stdout).get("spec", {}).get("holderIdentity")
    return str(holder) if holder else None


def test_the_reconcilers_rbac_allows_what_it_does(target: Target, stack: list[JsonObj]) -> None:
    deployment = _deployment(stack)
    who = f"system:serviceaccount:{deployment['metadata']['namespace']}:hotswap-reconciler"
    lease_ns = deployment["metadata"]["namespace"]
    needed = [
        ("patch", "workloads.kueue.x-k8s.io", None),
        ("list", "jobsets.jobset.x-k8s.io", None),
        ("watch", "pods", None),
        ("list", "nodes", None),
        ("patch", "nodes", None),
        ("create", "events.events.k8s.io", "default"),
        ("update", "leases.coordination.k8s.io/hotswap-reconciler", lease_ns),
    ]
    answers = {}
    for verb, resource, namespace in needed:
        args = ["auth", "can-i", verb, resource, f"--as={who}"]
        args += [f"--namespace={namespace}"] if namespace else ["--all-namespaces"]
        answers[f"{verb} {resource}"] = target.kubectl.run(*args, check=False).stdout.strip()
    report.section("reconciler")["rbac"] = answers
    assert all(answer == "yes" for answer in answers.values()), answers
    forbidden = target.kubectl.run(
        "auth", "can-i", "delete", "jobsets.jobset.x-k8s.io", f"--as={who}", "-A", check=False
    )
    assert forbidden.stdout.strip() == "no"


def test_the_node_scope_policy_lets_the_reconciler_change_only_its_taint(target: Target, stack: list[JsonObj]) -> None:
    """RBAC grants the reconciler `patch nodes`; the stack's ValidatingAdmissionPolicy narrows it to its quarantine
    taint. The real API server judges, with the reconciler's identity (impersonated)."""
    who = f"--as=system:serviceaccount:{_deployment(stack)['metadata']['namespace']}:hotswap-reconciler"
    nodes = json.loads(target.kubectl.run("get", "nodes", "-o", "json").stdout)["items"]
    node = sorted(n["metadata"]["name"] for n in nodes)[0]
    taint = "hotswap.gke-tpu-priority.io/unhealthy-slice"
    verdicts = {}
    attempts = {
        "add its taint": ("taint", "nodes", node, f"{taint}:NoSchedule"),
        "label the node": ("label", "node", node, "e2e.gke-tpu-priority.dev/forged=yes"),
        "add another taint": ("taint", "nodes", node, "e2e.gke-tpu-priority.dev/other=x:NoSchedule"),
        "its taint as NoExecute": ("taint", "nodes", node, f"{taint}:NoExecute"),
        "cordon": ("cordon", node),
        "remove its taint": ("taint", "nodes", node, f"{taint}:NoSchedule-"),
    }
    for what, args in attempts.items():
        done = target.kubectl.run(*args, who, check=False)
        # `kubectl cordon` exits 0 even when its patch is refused: the server's message decides, not the exit code.
        refused = done.returncode != 0 or "denied request" in done.stderr
        verdicts[what] = done.stderr.strip()[-300:] if refused else "allowed"
    report.section("reconciler")["nodeScope"] = verdicts
    assert verdicts["add its taint"] == "allowed" and verdicts["remove its taint"] == "allowed", verdicts
    for what in ("label the node", "add another taint", "its taint as NoExecute", "cordon"):
        assert "may change only its own" in verdicts[what], verdicts
    after = json.loads(target.kubectl.run("get", "node", node, "-o", "json").stdout)
    assert not any(t["key"].startswith(("hotswap.", "e2e.")) for t in after["spec"].get("taints", [])), after["spec"]
    assert "e2e.gke-tpu-priority.dev/forged" not in after["metadata"].get("labels", {})
    assert not after["spec"].get("unschedulable")


def test_replicas_take_over_the_lease_and_survive_an_apiserver_restart(
    target: Target, controllers: Controllers, stack: list[JsonObj]
) -> None:
    cluster = target.need_local()
    first, second = Replica(target, stack, "replica-a"), Replica(target, stack, "replica-b")
    section = report.section("reconciler")
    try:
        started = time.monotonic()
        first.start()
        wait_for("replica-a to hold the Lease", lambda: _holder(target, first.lease) == "replica-a", 60, first.process)
        section["leaseAcquiredSeconds"] = round(time.monotonic() - started, 1)
        second.start()
        time.sleep(2)
        assert _holder(target, first.lease) == "replica-a"  # the standby does not steal a live lease
        killed = time.monotonic()
        first.process.kill()
        wait_for("replica-b to take over", lambda: _holder(target, first.lease) == "replica-b", 120, second.process)
        section["takeoverAfterKillSeconds"] = round(time.monotonic() - killed, 1)
        section["apiserverRestartSeconds"] = round(cluster.restart_apiserver(), 1)
        time.sleep(5)
        if not second.process.running:
            # A leader that cannot renew within renewDeadline exits (code 3) for its Deployment to restart it, as
            # client-go's leader election does; play the kubelet's part.
            assert second.process.popen is not None and second.process.popen.returncode == 3, second.process.tail()
            section["leaderExitedDuringRestart"] = True
            second.start()
        wait_for(
            "replica-b to hold the Lease after the restart", lambda: _holder(target, first.lease) == "replica-b", 60
        )
        assert http_ok(second.health_port, "/healthz")
        # Kueue and JobSet lose their leases too and exit; their supervisor restarts them, as a Deployment would.
        # Kueue and JobSet lose their leases in the outage and exit; one restarted while the API server was still
        # down can hang in start-up, so restart both once it is back, as failing liveness probes would.
        for manager in (controllers.jobset, controllers.kueue):
            manager.restart()
        section["controllerRestarts"] = {m.spec.name: m.restarts for m in (controllers.jobset, controllers.kueue)}
    finally:
        for replica in (first, second):
            replica.process.stop()
    logs = Path(second.process.log).read_text(errors="replace")
    assert "Traceback" not in logs, logs[-3000:]
