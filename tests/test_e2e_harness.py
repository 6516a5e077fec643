"""The e2e harness's own parts, offline: pins, the build cache key, certificates, fake nodes, the egress proxy and
the comparison of what was sent with what the server holds."""

from __future__ import annotations

import asyncio
import ipaddress
import json
import re
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from cryptography import x509

from e2e import private_mount, pulumi_engine
from e2e.apply import differences
from e2e.controllers import DirectoryLock, manager_spec
from e2e.egress import EgressProxy
from e2e.nodes import KWOK_ANNOTATION, default_fleet, fleet_nodes, shape
from e2e.pki import make_pki
from gke_tpu_priority.components.tpu_shapes import ACCELERATOR_LABEL, NODEPOOL_LABEL, TPU_RESOURCE
from tools import toolchain

UPSTREAM_MODULE = {
    "etcd": "go.etcd.io/etcd/server/v3",
    "kube": "k8s.io/kubernetes",
    "kwok": "sigs.k8s.io/kwok",
    "helm": "helm.sh/helm/v4",
    "jobset": "sigs.k8s.io/jobset",
    "kueue": "sigs.k8s.io/kueue",
    "pulumi": "github.com/pulumi/pulumi/pkg/v3",
    "pulumi-kubernetes": "github.com/pulumi/pulumi-kubernetes/provider/v4",
    "gen-sdk": "github.com/pulumi/pulumi/pkg/v3",
}
MODULE_VERSION = {"pulumi-kubernetes": toolchain.PULUMI_KUBERNETES_MODULE_VERSION}


@pytest.mark.parametrize("name", list(toolchain.TOOLS))
def test_each_tool_pins_the_version_it_reports(name: str) -> None:
    tool = toolchain.TOOLS[name]
    go_mod = (tool.module_dir / "go.mod").read_text()
    pinned = re.search(rf"^(?:require )?\s*{re.escape(UPSTREAM_MODULE[name])} (v\S+)(?: // indirect)?$", go_mod, re.M)
    assert pinned and pinned.group(1) == MODULE_VERSION.get(name, tool.version)
    assert (tool.module_dir / "go.sum").stat().st_size > 0
    # "." is a main package of this repository's module (the provider's upstream main cannot be built from its module).
    tools = [package for package in tool.binaries.values() if package != "."]
    assert all(f"\t{package}\n" in go_mod or f"tool {package}\n" in go_mod for package in tools)


def test_every_kubernetes_staging_module_is_replaced_by_the_same_release() -> None:
    go_mod = (toolchain.TOOLS["kube"].module_dir / "go.mod").read_text()
    release = toolchain.TOOLS["kube"].version.replace("v1.", "v0.")
    replaces = re.findall(r"^\t(k8s\.io/[a-z-]+) => (k8s\.io/[a-z-]+) (v\S+)(?: // indirect)?$", go_mod, re.M)
    assert len(replaces) >= 30
    assert all(old == new and version == release for old, new, version in replaces)


def test_kubernetes_binaries_are_stamped_with_their_release() -> None:
    flags = " ".join(toolchain.TOOLS["kube"].ldflags)
    assert "-X k8s.io/component-base/version.gitVersion=v1.35.4" in flags
    assert "-X k8s.io/client-go/pkg/version.gitMinor=35" in flags


def test_the_cache_key_follows_the_pins_and_the_go_version(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "etcd").mkdir()
    (tmp_path / "etcd" / "go.mod").write_text("module x\n")
    (tmp_path / "etcd" / "go.sum").write_text("a\n")
    monkeypatch.setattr(toolchain, "GO_DIR", tmp_path)
    tool = toolchain.TOOLS["etcd"]
    first = tool.cache_key("go1.26.8")
    assert tool.cache_key("go1.26.8") == first
    assert tool.cache_key("go1.26.9") != first
    (tmp_path / "etcd" / "go.sum").write_text("b\n")
    assert tool.cache_key("go1.26.8") != first


def test_the_cache_key_follows_a_main_package_of_ours(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "gen-sdk").mkdir()
    for name, text in (("go.mod", "module x\n"), ("go.sum", "a\n"), ("main.go", "package main\n")):
        (tmp_path / "gen-sdk" / name).write_text(text)
    monkeypatch.setattr(toolchain, "GO_DIR", tmp_path)
    tool = toolchain.TOOLS["gen-sdk"]
    assert tool.binaries == {"gen-sdk": "."}
    first = tool.cache_key("go1.26.8")
    (tmp_path / "gen-sdk" / "main.go").write_text("package main // changed\n")
    assert tool.cache_key("go1.26.8") != first


def test_the_cache_is_outside_the_repository(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("GKE_TPU_E2E_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert toolchain.cache_root() == tmp_path / "gke-tpu-priority" / "e2e"
    monkeypatch.setenv("GKE_TPU_E2E_CACHE", str(tmp_path / "elsewhere"))
    assert toolchain.cache_root() == tmp_path / "elsewhere"


def test_a_tool_that_is_not_built_is_named_with_the_command_that_builds_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("GKE_TPU_E2E_CACHE", str(tmp_path))
    monkeypatch.setattr(toolchain, "go_version", lambda: "go1.26.8")
    with pytest.raises(SystemExit, match=r"python -m tools.toolchain build kube"):
        toolchain.binary("kube-apiserver")


def test_the_serving_certificate_is_for_loopback_and_the_service_ip(tmp_path: Path) -> None:
    pki = make_pki(tmp_path, "10.96.0.1")
    cert = x509.load_pem_x509_certificate(pki.apiserver.cert.read_bytes())
    ca = x509.load_pem_x509_certificate(pki.ca.cert.read_bytes())
    cert.verify_directly_issued_by(ca)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert ipaddress.ip_address("127.0.0.1") in names.get_values_for_type(x509.IPAddress)
    assert ipaddress.ip_address("10.96.0.1") in names.get_values_for_type(x509.IPAddress)
    admin = x509.load_pem_x509_certificate(pki.admin.cert.read_bytes())
    assert "O=system:masters" in admin.subject.rfc4514_string()
    assert pki.service_account_key.stat().st_mode & 0o777 == 0o600


def test_fake_slices_have_one_node_per_host_with_gke_labels() -> None:
    nodes = fleet_nodes()
    tpu = [n for n in nodes if ACCELERATOR_LABEL in n["metadata"]["labels"]]
    assert len(tpu) == sum(spec.shape.vms for spec in default_fleet()) == 4 * 4 + 2 + 2
    assert all(n["metadata"]["annotations"][KWOK_ANNOTATION] == "fake" for n in nodes)
    pools = {n["metadata"]["labels"][NODEPOOL_LABEL] for n in tpu}
    assert pools == {spec.pool for spec in default_fleet()}
    two_host_2x4 = [n for n in tpu if n["metadata"]["labels"][NODEPOOL_LABEL] == "tpu-2x4-0"]
    assert [n["status"]["allocatable"][TPU_RESOURCE] for n in two_host_2x4] == ["4", "4"]


def test_an_ambiguous_shape_must_name_its_machine_type() -> None:
    with pytest.raises(ValueError, match="2x4"):
        shape("2x4")
    assert shape("2x4", "ct6e-standard-8t").vms == 1


def test_differences_report_dropped_and_changed_fields_but_not_defaults_or_equal_quantities() -> None:
    sent = {"spec": {"a": 1, "q": "1000m", "gone": "x", "empty": {}, "list": [{"b": 2}]}}
    stored = {"spec": {"a": 1, "q": "1", "added": True, "list": [{"b": 3, "c": 1}]}}
    assert differences(sent, stored) == [
        ".spec.gone: dropped by the server",
        ".spec.list[0].b: sent 2, the server holds 3",
    ]
    assert differences({"l": [1, 2]}, {"l": [1]}) == [".l: sent 2 items, the server holds [1]"]
    assert differences({"m": "1Gi"}, {"m": "1024Mi"}) == []


def _echo_server() -> tuple[socket.socket, int]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            conn.sendall(conn.recv(1024).upper())

    threading.Thread(target=serve, daemon=True).start()
    return server, server.getsockname()[1]


def test_the_egress_proxy_tunnels_a_known_service_to_its_local_port_and_refuses_the_rest(tmp_path: Path) -> None:
    server, port = _echo_server()
    proxy = EgressProxy(tmp_path / "egress.sock", lambda host, p: port if (host, p) == ("10.96.0.10", 443) else None)
    proxy.start()
    try:

        async def connect(target: str) -> bytes:
            reader, writer = await asyncio.open_unix_connection(str(tmp_path / "egress.sock"))
            writer.write(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
            head = await reader.readuntil(b"\r\n\r\n")
            if b" 200 " in head:
                writer.write(b"hello")
                head += await reader.read(5)
            writer.close()
            return head

        assert asyncio.run(connect("10.96.0.10:443")).endswith(b"\r\n\r\nHELLO")
        assert b" 503 " in asyncio.run(connect("10.96.0.11:443"))
        assert proxy.refused == ["10.96.0.11:443"]
    finally:
        proxy.stop()
        server.close()
    assert not (tmp_path / "egress.sock").exists()


def test_a_manager_spec_comes_from_the_charts_deployment_configmap_and_apiservice() -> None:
    config = "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nwebhook:\n  port: 9443\n"
    chart = [
        {
            "kind": "Deployment",
            "metadata": {"name": "kueue-controller-manager"},
            "spec": {
                "template": {
                    "spec": {
                        "serviceAccountName": "kueue-controller-manager",
                        "volumes": [{"name": "manager-config", "configMap": {"name": "kueue-manager-config"}}],
                    }
                }
            },
        },
        {"kind": "ConfigMap", "metadata": {"name": "other"}, "data": {"x": "y"}},
        {
            "kind": "ConfigMap",
            "metadata": {"name": "kueue-manager-config"},
            "data": {"controller_manager_config.yaml": config},
        },
        {"kind": "APIService", "metadata": {"name": "v1beta2.visibility"}, "spec": {"service": {"name": "kueue-vis"}}},
    ]
    spec = manager_spec("kueue", "kueue-manager", "kueue-system", chart)
    assert spec.service_account == "kueue-controller-manager"
    assert spec.config_map == "kueue-manager-config"
    assert spec.config["webhook"] == {"port": 9443}
    assert spec.api_services == ("kueue-vis",)
    with pytest.raises(RuntimeError, match="one Deployment"):
        manager_spec("kueue", "kueue-manager", "kueue-system", chart[1:])


def test_a_second_manager_waits_for_the_certificate_directory_and_gets_it_once_released(tmp_path: Path) -> None:
    first, second = DirectoryLock(tmp_path / "serving-certs"), DirectoryLock(tmp_path / "serving-certs")
    first.acquire(timeout=1)
    with pytest.raises(TimeoutError, match="another local cluster"):
        second.acquire(timeout=0)
    first.release()
    second.acquire(timeout=0)
    second.release()


@pytest.mark.skipif(not private_mount.available(), reason="this machine allows no private mount namespace")
def test_two_managers_each_see_their_own_directory_at_the_shared_path_and_the_host_sees_neither(
    tmp_path: Path,
) -> None:
    shared = tmp_path / "shared" / "serving-certs"
    seen = []
    for cluster in ("one", "two"):
        own = tmp_path / cluster
        own.mkdir()
        (own / "tls.crt").write_text(cluster)
        argv = private_mount.wrap(["cat", str(shared / "tls.crt")], own, shared)
        seen.append(subprocess.run(argv, capture_output=True, text=True, check=True).stdout)
    assert seen == ["one", "two"]
    assert list(shared.iterdir()) == []


def test_the_pulumi_cli_and_provider_are_stamped_and_the_providers_schema_carries_its_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert "-X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=v3.276.0" in toolchain.TOOLS["pulumi"].ldflags
    provider = toolchain.TOOLS["pulumi-kubernetes"]
    assert "-X github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version.Version=4.25.0" in provider.ldflags
    upstream = tmp_path / "module" / "cmd" / "pulumi-resource-kubernetes"
    upstream.mkdir(parents=True)
    (upstream / "schema.json").write_text('{"name": "kubernetes", "resources": {}}')
    (upstream / "terraform-mapping.json").write_text('{"a": [1, 2]}')
    monkeypatch.setattr(toolchain, "module_source", lambda tool, module: tmp_path / "module")
    build = tmp_path / "build"
    build.mkdir()
    assert provider.prepare is not None
    provider.prepare(build)
    assert json.loads((build / "schema-embed.json").read_text()) == {
        "name": "kubernetes",
        "resources": {},
        "version": "4.25.0",
    }
    assert (build / "terraform-mapping-embed.json").read_text() == '{"a":[1,2]}'


def test_the_policy_pack_shim_serves_the_repositorys_pack_with_the_running_interpreter(tmp_path: Path) -> None:
    from e2e.pulumi_run import ROOT, policy_pack_shim

    shim = policy_pack_shim(tmp_path)
    text = shim.read_text()
    assert text.startswith(f"#!{sys.executable}\n")
    assert repr(str(ROOT / "policies" / "__main__.py")) in text
    assert shim.stat().st_mode & 0o111


def _fake_driver(tmp_path: Path, crashes: int) -> Path:
    """A stand-in for the e2e virtualenv's python: dies of SIGSEGV `crashes` times, then prints a result line."""
    counter = tmp_path / "runs"
    script = tmp_path / "python"
    script.write_text(
        "#!/bin/sh\n"
        f'echo run >> "{counter}"\n'
        f'if [ "$(wc -l < "{counter}")" -le {crashes} ]; then echo "Fatal Python error" >&2; kill -SEGV $$; fi\n'
        'echo \'{"ok": false, "changes": {}, "policyViolations": [{"policy": "p"}]}\'\n'
    )
    script.chmod(0o755)
    return script


def _engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, crashes: int) -> pulumi_engine.Engine:
    monkeypatch.setattr(pulumi_engine, "venv_python", lambda: _fake_driver(tmp_path, crashes))
    monkeypatch.setattr(toolchain, "binary", lambda name: tmp_path / "bin" / name)
    return pulumi_engine.Engine(tmp_path / "engine", tmp_path / "kubeconfig")


def test_a_preview_whose_driver_crashed_runs_once_more_and_the_crash_is_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = _engine(tmp_path, monkeypatch, crashes=1)
    outcome = engine.run("preview", {}, label="rogue")
    assert outcome.violations == [{"policy": "p"}]
    assert [(c["operation"], c["signal"]) for c in engine.crashes] == [("01-preview-rogue", 11)]
    assert "Fatal Python error" in Path(engine.crashes[0]["log"]).read_text()
    assert engine.env["PYTHONFAULTHANDLER"] == "1"


def test_a_driver_that_crashes_twice_or_during_an_up_fails_the_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(RuntimeError, match=r"exit -11"):
        _engine(tmp_path / "a", monkeypatch, crashes=2).run("preview", {})
    up = _engine(tmp_path / "b", monkeypatch, crashes=1)
    with pytest.raises(RuntimeError, match=r"exit -11"):
        up.run("up", {})
    assert up.crashes == []
