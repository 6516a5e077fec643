"""The release path: the sdist and the wheel build (`python -m build`: the wheel from the sdist), the wheel's only
import package is `gke_tpu_priority`, and installed into fresh virtualenvs:
- with the `[hotswap]` extra, `kubectl-hotswap release-all --help` and `status --help` run; without it, a command
  that needs a cluster says what to install;
- beside a Pulumi program that has `components` and `policies` packages of its own, the program previews with this
  package's components and still imports its own packages.

It downloads the build backend and every dependency from the package index and takes minutes (2-3 min measured
on a shared 2-core machine with a warm pip cache), so `make test` skips it; `.ci/run` runs it with
`GKE_TPU_WHEEL_CHECK=1`. By hand: `GKE_TPU_WHEEL_CHECK=1 .venv/bin/python -m pytest tests/test_wheel_install.py`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import tomllib
import venv
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tools.mock_runtime import PROJECT_ROOT

pytestmark = pytest.mark.skipif(
    os.environ.get("GKE_TPU_WHEEL_CHECK") != "1", reason="slow, needs the package index: GKE_TPU_WHEEL_CHECK=1"
)
VERSION = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["project"]["version"]


def _venv(path: Path) -> Path:
    venv.EnvBuilder(with_pip=True, clear=True).create(path)
    return path / "bin"


def _run(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, cwd=cwd, capture_output=True, text=True, timeout=900, check=False, env={**os.environ, **(env or {})}
    )


@dataclass(frozen=True)
class Built:
    wheel: Path
    sdist: Path


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    work = tmp_path_factory.mktemp("build")
    tools = _venv(work / "build-env")
    assert _run([str(tools / "pip"), "install", "--quiet", "build>=1.2,<2"], work).returncode == 0
    dist = work / "dist"
    result = _run([str(tools / "python"), "-m", "build", "--outdir", str(dist), str(PROJECT_ROOT)], work)
    assert result.returncode == 0, result.stderr[-2000:]
    (wheel,) = dist.glob(f"gke_tpu_priority-{VERSION}-py3-none-any.whl")
    (sdist,) = dist.glob(f"gke_tpu_priority-{VERSION}.tar.gz")
    return Built(wheel, sdist)


@pytest.mark.timeout(1800)
def test_the_wheel_installs_one_import_package(built: Built) -> None:
    with zipfile.ZipFile(built.wheel) as archive:
        names = archive.namelist()
    assert f"gke_tpu_priority-{VERSION}.dist-info/licenses/LICENSE" in names
    assert {n.split("/", 1)[0] for n in names} == {"gke_tpu_priority", f"gke_tpu_priority-{VERSION}.dist-info"}
    for package in ("components", "hotswap", "policies", "policies/rules", "hotswap/planner"):
        assert f"gke_tpu_priority/{package}/__init__.py" in names
    assert "gke_tpu_priority/components/py.typed" in names
    with tarfile.open(built.sdist) as archive:
        members = {m.name.split("/", 1)[1] for m in archive.getmembers() if "/" in m.name}
    assert {"LICENSE", "pyproject.toml", "setup.py", "README.md", "hotswap/__main__.py"} <= members


@pytest.mark.timeout(1800)
def test_the_built_wheel_with_the_hotswap_extra_runs_the_operator_commands(built: Built, tmp_path: Path) -> None:
    plain = _venv(tmp_path / "plain")
    assert _run([str(plain / "pip"), "install", "--quiet", str(built.wheel)], tmp_path).returncode == 0
    home = tmp_path / "home"
    (home / ".kube").mkdir(parents=True)
    (home / ".kube" / "config").write_text(  # an operator's kubeconfig; nothing listens there
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:9"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    missing = _run([str(plain / "kubectl-hotswap"), "status"], tmp_path, {"HOME": str(home), "KUBECONFIG": ""})
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    assert "gke-tpu-priority[hotswap]" in missing.stderr, missing.stderr

    full = _venv(tmp_path / "full")
    installed = _run([str(full / "pip"), "install", "--quiet", f"{built.wheel}[hotswap]"], tmp_path)
    assert installed.returncode == 0, installed.stderr[-2000:]
    for command in ("release-all", "status"):
        shown = _run([str(full / "kubectl-hotswap"), command, "--help"], tmp_path)
        assert shown.returncode == 0, shown.stderr
        assert shown.stdout.startswith(f"usage: kubectl hotswap {command}")
    module = _run([str(full / "python"), "-m", "gke_tpu_priority.hotswap", "release-all", "--help"], tmp_path)
    assert module.returncode == 0 and "usage: kubectl hotswap release-all" in module.stdout
    assert sys.executable not in str(full)  # the fresh environment, not the test's


# A user's Pulumi program with packages named like this package's: Pulumi puts the program's folder first on sys.path.
USER_PROGRAM = """
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import pulumi

import components
import policies

registered = []


class Mocks(pulumi.runtime.Mocks):
    def new_resource(self, args):
        registered.append(args.typ)
        return [f"{args.name}-id", dict(args.inputs)]

    def call(self, args):
        return {}


pulumi.runtime.set_mocks(Mocks(), project="user-program", stack="dev", preview=True)

from gke_tpu_priority.components.platform import TpuPlatform, TpuPlatformArgs
from gke_tpu_priority.policies import check


def program():
    TpuPlatform("dev", TpuPlatformArgs(platform=json.loads(Path(sys.argv[1]).read_text())))


pulumi.runtime.test(program)()
seen = {"own": [components.OWN, policies.OWN], "check": callable(check.main), "types": sorted(set(registered))}
print(json.dumps(seen))
"""


@pytest.mark.timeout(1800)
def test_a_program_with_its_own_components_package_previews_with_ours(built: Built, tmp_path: Path) -> None:
    env = _venv(tmp_path / "env")
    assert _run([str(env / "pip"), "install", "--quiet", str(built.wheel)], tmp_path).returncode == 0
    program = tmp_path / "program"
    for package in ("components", "policies"):
        (program / package).mkdir(parents=True)
        (program / package / "__init__.py").write_text(f"OWN = 'own {package}'\n")
    (program / "main.py").write_text(USER_PROGRAM)
    stack = yaml.safe_load((PROJECT_ROOT / "stacks" / "Pulumi.dev.yaml").read_text())
    platform = stack["config"]["gke-tpu-priority:platform"]
    # An installed wheel has no Dockerfile to build the reconciler image from: the stack names a pushed one.
    platform.setdefault("hotswap", {})["image"] = (
        f"us-docker.pkg.dev/p/r/hotswap-reconciler:{VERSION}@sha256:{'0' * 64}"
    )
    (program / "platform.json").write_text(json.dumps(platform))
    result = _run([str(env / "python"), "main.py", "platform.json"], program)
    assert result.returncode == 0, result.stderr[-3000:]
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen["own"] == ["own components", "own policies"]
    assert seen["check"] is True
    assert "gke-tpu-priority:index:TpuPlatform" in seen["types"]
    assert {"kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue", "gcp:container/cluster:Cluster"} <= set(seen["types"])
