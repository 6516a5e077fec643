"""The release path: two distributions from one checkout, each an sdist and a wheel (`python -m build`: the wheel
from the sdist). gke-tpu-priority (the components, the policy check and the reconciler) and the operator's
gke-tpu-priority-hotswap (hotswap/pyproject.toml: `kubectl hotswap` and the reconciler alone), which carries the
same `gke_tpu_priority.hotswap` package: one installs one of the two. Their only import package is
`gke_tpu_priority`, and installed into fresh virtualenvs:
- the operator's distribution installs without Pulumi or any provider, and `kubectl-hotswap` runs;
- with the `[hotswap]` extra, `kubectl-hotswap release-all --help` and `status --help` run; without it, a command
  that needs a cluster says what to install;
- beside a Pulumi program that has `components` and `policies` packages of its own, the program previews with this
  package's components and still imports its own packages.

The builds download the build backend and every dependency from the package index and take minutes (3 min
measured on a shared 2-core machine with a warm pip cache), so `make test` skips them; `.ci/run` runs them with
`GKE_TPU_WHEEL_CHECK=1`. By hand: `GKE_TPU_WHEEL_CHECK=1 .venv/bin/python -m pytest tests/test_wheel_install.py`.
"""

from __future__ import annotations

import json
import os
import re
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
from setuptools import find_packages

from testkit.mock_runtime import PROJECT_ROOT

needs_index = pytest.mark.skipif(
    os.environ.get("GKE_TPU_WHEEL_CHECK") != "1", reason="slow, needs the package index: GKE_TPU_WHEEL_CHECK=1"
)
MAIN = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["project"]
OPERATOR = tomllib.loads((PROJECT_ROOT / "hotswap" / "pyproject.toml").read_text())
VERSION = MAIN["version"]


def test_the_operator_distribution_matches_the_main_one() -> None:
    """Same version, the [hotswap] extra as its dependencies, the same command, every subpackage but the simulator."""
    project = OPERATOR["project"]
    assert project["version"] == VERSION
    assert project["dependencies"] == MAIN["optional-dependencies"]["hotswap"]
    assert not any(d.lower().startswith("pulumi") for d in project["dependencies"])
    assert project["scripts"] == {"kubectl-hotswap": MAIN["scripts"]["kubectl-hotswap"]}
    on_disk = find_packages(str(PROJECT_ROOT / "hotswap"), exclude=["sim", "sim.*"])
    listed = OPERATOR["tool"]["setuptools"]["packages"]
    assert sorted(listed) == sorted(["gke_tpu_priority.hotswap", *(f"gke_tpu_priority.hotswap.{p}" for p in on_disk)])


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
    operator_wheel: Path
    operator_sdist: Path

    def install(self, pip: Path, requirement: str, cwd: Path) -> None:
        """pip install a built file; its dependencies come from the package index."""
        done = _run([str(pip), "install", "--quiet", requirement], cwd)
        assert done.returncode == 0, done.stderr[-2000:]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    work = tmp_path_factory.mktemp("build")
    tools = _venv(work / "build-env")
    assert _run([str(tools / "pip"), "install", "--quiet", "build>=1.2,<2"], work).returncode == 0
    dist = work / "dist"
    for source in (PROJECT_ROOT / "hotswap", PROJECT_ROOT):
        result = _run([str(tools / "python"), "-m", "build", "--outdir", str(dist), str(source)], work)
        assert result.returncode == 0, result.stderr[-2000:]
    (wheel,) = dist.glob(f"gke_tpu_priority-{VERSION}-py3-none-any.whl")
    (sdist,) = dist.glob(f"gke_tpu_priority-{VERSION}.tar.gz")
    (operator_wheel,) = dist.glob(f"gke_tpu_priority_hotswap-{VERSION}-py3-none-any.whl")
    (operator_sdist,) = dist.glob(f"gke_tpu_priority_hotswap-{VERSION}.tar.gz")
    return Built(wheel, sdist, operator_wheel, operator_sdist)


def _tops(wheel: Path) -> tuple[list[str], set[str]]:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    return names, {n.split("/", 1)[0] for n in names}


def _members(sdist: Path) -> set[str]:
    with tarfile.open(sdist) as archive:
        return {m.name.split("/", 1)[1] for m in archive.getmembers() if "/" in m.name}


@needs_index
@pytest.mark.timeout(1800)
def test_each_wheel_installs_its_part_of_one_import_package(built: Built) -> None:
    names, tops = _tops(built.wheel)
    assert f"gke_tpu_priority-{VERSION}.dist-info/licenses/LICENSE" in names
    assert tops == {"gke_tpu_priority", f"gke_tpu_priority-{VERSION}.dist-info"}
    for package in ("components", "hotswap", "policies", "policies/rules", "hotswap/planner"):
        assert f"gke_tpu_priority/{package}/__init__.py" in names
    assert "gke_tpu_priority/components/py.typed" in names
    # The simulator and the test kit are the repository's, beside the package: never in the wheel.
    assert not [n for n in names if n.startswith(("gke_tpu_priority/hotswap/sim/", "sim/", "testkit/"))]
    operator_names, tops = _tops(built.operator_wheel)
    assert tops == {"gke_tpu_priority", f"gke_tpu_priority_hotswap-{VERSION}.dist-info"}
    package = {n for n in operator_names if n.startswith("gke_tpu_priority/")}
    assert {n.split("/")[1] for n in package} == {"hotswap"}
    assert "gke_tpu_priority/hotswap/py.typed" in package
    assert not any(n.startswith("gke_tpu_priority/hotswap/sim/") for n in package)  # the simulator stays here
    # The reconciler's modules are those of the main wheel: the two are alternatives, never two versions of one.
    assert package == {n for n in names if n.startswith("gke_tpu_priority/hotswap/") and "/sim/" not in n}
    main_sdist, operator_sdist = _members(built.sdist), _members(built.operator_sdist)
    assert {"LICENSE", "pyproject.toml", "setup.py", "README.md", "hotswap/__main__.py"} <= main_sdist
    assert {"pyproject.toml", "__main__.py", "kube/status.py"} <= operator_sdist


def _kubeconfig_home(tmp_path: Path) -> Path:
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
    return home


@needs_index
@pytest.mark.timeout(1800)
def test_an_operator_installs_kubectl_hotswap_without_the_infrastructure_stack(built: Built, tmp_path: Path) -> None:
    operator = _venv(tmp_path / "operator")
    built.install(operator / "pip", str(built.operator_wheel), tmp_path)
    listed = _run([str(operator / "pip"), "list", "--format", "json"], tmp_path)
    installed = {re.sub(r"[-_.]+", "-", p["name"]).lower() for p in json.loads(listed.stdout)}
    assert {"gke-tpu-priority-hotswap", "kubernetes-asyncio", "aiohttp"} <= installed
    assert not {n for n in installed if n.startswith("pulumi")} and "gke-tpu-priority" not in installed
    for command in ("release-all", "status"):
        shown = _run([str(operator / "kubectl-hotswap"), command, "--help"], tmp_path)
        assert shown.returncode == 0, shown.stderr
        assert shown.stdout.startswith(f"usage: kubectl hotswap {command}")
    version = _run([str(operator / "kubectl-hotswap"), "--version"], tmp_path)
    assert version.stdout.strip() == f"kubectl-hotswap {VERSION}"
    home = _kubeconfig_home(tmp_path)
    unreachable = _run([str(operator / "kubectl-hotswap"), "status", "-o", "yaml"], tmp_path, {"HOME": str(home)})
    assert unreachable.returncode == 1 and "Traceback" not in unreachable.stderr
    assert "cannot reach the Kubernetes API server" in unreachable.stderr, unreachable.stderr
    module = _run([str(operator / "python"), "-m", "gke_tpu_priority.hotswap", "release-all", "--help"], tmp_path)
    assert module.returncode == 0 and "usage: kubectl hotswap release-all" in module.stdout
    assert sys.executable not in str(operator)  # the fresh environment, not the test's


@needs_index
@pytest.mark.timeout(1800)
def test_the_built_wheel_with_the_hotswap_extra_runs_the_operator_commands(built: Built, tmp_path: Path) -> None:
    plain = _venv(tmp_path / "plain")
    built.install(plain / "pip", str(built.wheel), tmp_path)
    home = _kubeconfig_home(tmp_path)
    missing = _run([str(plain / "kubectl-hotswap"), "status"], tmp_path, {"HOME": str(home), "KUBECONFIG": ""})
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    assert "gke-tpu-priority[hotswap]" in missing.stderr, missing.stderr
    check = _run([str(plain / "gke-tpu-priority-check"), "--version"], tmp_path)
    assert check.stdout.strip() == f"gke-tpu-priority-check {VERSION}", check.stderr

    full = _venv(tmp_path / "full")
    built.install(full / "pip", f"{built.wheel}[hotswap]", tmp_path)
    for command in ("release-all", "status"):
        shown = _run([str(full / "kubectl-hotswap"), command, "--help"], tmp_path)
        assert shown.returncode == 0, shown.stderr
        assert shown.stdout.startswith(f"usage: kubectl hotswap {command}")
    module = _run([str(full / "python"), "-m", "gke_tpu_priority.hotswap", "release-all", "--help"], tmp_path)
    assert module.returncode == 0 and "usage: kubectl hotswap release-all" in module.stdout


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


@needs_index
@pytest.mark.timeout(1800)
def test_a_program_with_its_own_components_package_previews_with_ours(built: Built, tmp_path: Path) -> None:
    env = _venv(tmp_path / "env")
    built.install(env / "pip", str(built.wheel), tmp_path)
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
