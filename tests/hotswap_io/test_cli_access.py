"""The CLI in an operator's worst hour: credentials found the way kubectl finds them, and every failure told in
one sentence with an exit code, never a traceback."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from gke_tpu_priority.hotswap.annotations import AnnotationKeys
from gke_tpu_priority.hotswap.kube.access import ClusterAccessError, choose_access
from testkit.apiserver import FakeApiServer, Fault

from .cluster import NS, WORKLOADS
from .conftest import write_kubeconfig

pytestmark = pytest.mark.timeout(60)

KEYS = AnnotationKeys("hotswap.gke-tpu-priority.io")
HELD = {KEYS.held_by: "ml/high/u/0", KEYS.op_id: "op-1", KEYS.held_since: "2026-12-01T10:00:00Z"}


@pytest.fixture
def token(tmp_path: Path) -> Path:
    path = tmp_path / "sa-token"
    path.write_text("t")
    return path


def test_explicit_kubeconfig_wins(tmp_path: Path, token: Path) -> None:
    kc = write_kubeconfig(tmp_path / "kc", "https://x", "a")
    env = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBECONFIG": "/elsewhere"}
    access = choose_access(str(kc), "ctx", env, token, tmp_path)
    assert (access.kubeconfig, access.context) == (str(kc), "ctx")


def test_in_a_pod_the_service_account_is_used(tmp_path: Path, token: Path) -> None:
    access = choose_access(None, None, {"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, token, tmp_path)
    assert access.in_cluster and access.describe() == "the pod's service account"


def test_context_in_a_pod_means_the_kubeconfig(tmp_path: Path, token: Path) -> None:
    (tmp_path / ".kube").mkdir()
    write_kubeconfig(tmp_path / ".kube" / "config", "https://x", "a")
    access = choose_access(None, "other", {"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, token, tmp_path)
    assert (access.kubeconfig, access.context) == (str(tmp_path / ".kube" / "config"), "other")


def test_outside_a_pod_kubeconfig_env_then_home(tmp_path: Path) -> None:
    no_token = tmp_path / "absent"
    a = write_kubeconfig(tmp_path / "a", "https://x", "a")
    listed = f"{tmp_path / 'missing'}{os.pathsep}{a}"
    assert choose_access(None, None, {"KUBECONFIG": listed}, no_token, tmp_path).kubeconfig == str(a)
    (tmp_path / ".kube").mkdir()
    write_kubeconfig(tmp_path / ".kube" / "config", "https://x", "a")
    assert choose_access(None, None, {}, no_token, tmp_path).kubeconfig == str(tmp_path / ".kube" / "config")


def test_no_credentials_says_how_to_get_them(tmp_path: Path) -> None:
    with pytest.raises(ClusterAccessError, match=r"get-credentials CLUSTER --location REGION"):
        choose_access(None, None, {}, tmp_path / "absent", tmp_path)
    with pytest.raises(ClusterAccessError, match=r"\$KUBECONFIG is '/nope', but no such file exists"):
        choose_access(None, None, {"KUBECONFIG": "/nope"}, tmp_path / "absent", tmp_path)
    with pytest.raises(ClusterAccessError, match=r"--kubeconfig /nope: no such file"):
        choose_access("/nope", None, {}, tmp_path / "absent", tmp_path)


async def cli(*args: str, home: Path, extra_env: dict[str, str] | None = None, code: str = "") -> tuple[int, str, str]:
    """Run the CLI as an operator would: a fresh process, outside a pod, HOME at ``home``."""
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
    env |= {"HOME": str(home), **(extra_env or {})}
    argv = ["-c", code, *args] if code else ["-m", "gke_tpu_priority.hotswap", *args]
    process = await asyncio.create_subprocess_exec(
        sys.executable, *argv, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def home_with_kubeconfig(tmp_path: Path, url: str) -> Path:
    home = tmp_path / "home"
    (home / ".kube").mkdir(parents=True)
    write_kubeconfig(home / ".kube" / "config", url, "operator")
    return home


async def test_release_all_outside_a_cluster_uses_the_home_kubeconfig(api: FakeApiServer, tmp_path: Path) -> None:
    api.put(WORKLOADS, {"metadata": {"name": "a", "namespace": NS, "annotations": HELD}, "spec": {"active": False}})
    code, out, err = await cli("release-all", home=home_with_kubeconfig(tmp_path, api.url))
    assert code == 0, err
    assert "released 1 held Workload(s)" in out
    assert api.get(WORKLOADS, "a", NS)["spec"]["active"] is True  # type: ignore[index]
    assert [w.identity for w in api.writes()] == ["operator"]


@pytest.mark.parametrize("command", ["release-all", "run"])
async def test_without_credentials_is_one_sentence(tmp_path: Path, command: str) -> None:
    code, _, err = await cli(command, home=tmp_path)
    assert code == 2
    assert "Traceback" not in err
    assert err.strip().splitlines() == [
        f"kubectl hotswap {command}: no cluster credentials: not running in a pod, $KUBECONFIG is unset and "
        f"{tmp_path / '.kube' / 'config'} does not exist; run `gcloud container clusters get-credentials CLUSTER "
        "--location REGION` (or pass --kubeconfig FILE)"
    ]


async def test_unknown_context_and_unreachable_server_are_sentences(tmp_path: Path) -> None:
    home = home_with_kubeconfig(tmp_path, "https://127.0.0.1:9")
    code, _, err = await cli("release-all", "--context", "nope", home=home)
    assert code == 2 and "Traceback" not in err
    assert err.startswith("kubectl hotswap release-all: the kubeconfig cannot be used:") and "nope" in err
    code, _, err = await cli("release-all", home=home)
    assert code == 1 and "Traceback" not in err
    assert err.startswith("kubectl hotswap release-all: cannot reach the Kubernetes API server")


async def test_rbac_refusal_names_what_the_account_needs(api: FakeApiServer, tmp_path: Path) -> None:
    api.inject(Fault(verb="list", resource=WORKLOADS, status=403, times=None))
    code, _, err = await cli("release-all", home=home_with_kubeconfig(tmp_path, api.url))
    assert code == 1 and "Traceback" not in err
    assert "403 Forbidden" in err and "list on workloads.kueue.x-k8s.io" in err


# Makes the `hotswap` extra's modules unimportable, as on `pip install gke-tpu-priority` without extras.
WITHOUT_EXTRA = """
import sys
for name in ("kubernetes_asyncio", "aiohttp", "prometheus_client"):
    sys.modules[name] = None
from gke_tpu_priority.hotswap.cli import main
sys.exit(main(sys.argv[1:]))
"""


async def test_without_the_extra_help_works_and_commands_say_what_to_install(tmp_path: Path) -> None:
    for command in ("release-all", "run", "mark-checkpoint", "status"):
        code, out, err = await cli(command, "--help", home=tmp_path, code=WITHOUT_EXTRA)
        assert code == 0 and f"usage: kubectl hotswap {command}" in out, err
    home = home_with_kubeconfig(tmp_path, "https://127.0.0.1:9")
    code, _, err = await cli("release-all", home=home, code=WITHOUT_EXTRA)
    assert code == 2
    assert err.strip() == (
        "kubectl hotswap release-all: `kubectl hotswap release-all` needs the reconciler's Kubernetes client, which "
        "this install lacks (no module 'kubernetes_asyncio'): pip install 'gke-tpu-priority[hotswap]'"
    )


async def test_mark_checkpoint_dry_run_sends_nothing(api: FakeApiServer, tmp_path: Path) -> None:
    home = home_with_kubeconfig(tmp_path, api.url)
    code, out, err = await cli(
        "mark-checkpoint", "--dry-run", "--jobset", "train", "-n", NS, "--at", "2026-12-03T10:15:00Z", home=home
    )
    assert code == 0, err
    assert out.strip() == (
        f"would set hotswap.gke-tpu-priority.io/last-checkpoint=2026-12-03T10:15:00Z on JobSet {NS}/train "
        "(dry run: nothing sent)"
    )
    assert api.writes() == []
