"""The release path (issue 38, Done when): the sdist and the wheel build (`python -m build`: the wheel from the
sdist), and `pip install '<wheel>[hotswap]'` into a fresh virtualenv runs `hotswap release-all --help` and
`hotswap status --help`; without the extra, a command that needs a cluster says what to install.

It downloads the build backend and every dependency from the package index and takes minutes (2-3 min measured
on a shared 2-core machine with a warm pip cache), so `make test` skips it; `.ci/run` runs it with
`GKE_TPU_WHEEL_CHECK=1`. By hand: `GKE_TPU_WHEEL_CHECK=1 .venv/bin/python -m pytest tests/test_wheel_install.py`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import tomllib
import venv
import zipfile
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


@pytest.mark.timeout(1800)
def test_the_built_wheel_with_the_hotswap_extra_runs_the_operator_commands(tmp_path: Path) -> None:
    tools = _venv(tmp_path / "build-env")
    assert _run([str(tools / "pip"), "install", "--quiet", "build>=1.2,<2"], tmp_path).returncode == 0
    dist = tmp_path / "dist"
    built = _run([str(tools / "python"), "-m", "build", "--outdir", str(dist), str(PROJECT_ROOT)], tmp_path)
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = dist.glob(f"gke_tpu_priority-{VERSION}-py3-none-any.whl")
    (sdist,) = dist.glob(f"gke_tpu_priority-{VERSION}.tar.gz")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    assert f"gke_tpu_priority-{VERSION}.dist-info/licenses/LICENSE" in names
    assert not [n for n in names if n.startswith(("tests/", "tools/", "e2e/"))]
    with tarfile.open(sdist) as archive:
        members = {m.name.split("/", 1)[1] for m in archive.getmembers() if "/" in m.name}
    assert {"LICENSE", "pyproject.toml", "README.md", "hotswap/__main__.py"} <= members

    plain = _venv(tmp_path / "plain")
    assert _run([str(plain / "pip"), "install", "--quiet", str(wheel)], tmp_path).returncode == 0
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
    missing = _run([str(plain / "hotswap"), "status"], tmp_path, {"HOME": str(home), "KUBECONFIG": ""})
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    assert "gke-tpu-priority[hotswap]" in missing.stderr, missing.stderr

    full = _venv(tmp_path / "full")
    installed = _run([str(full / "pip"), "install", "--quiet", f"{wheel}[hotswap]"], tmp_path)
    assert installed.returncode == 0, installed.stderr[-2000:]
    for command in ("release-all", "status"):
        shown = _run([str(full / "hotswap"), command, "--help"], tmp_path)
        assert shown.returncode == 0, shown.stderr
        assert shown.stdout.startswith(f"usage: hotswap {command}")
    module = _run([str(full / "python"), "-m", "hotswap", "release-all", "--help"], tmp_path)
    assert module.returncode == 0 and "usage: hotswap release-all" in module.stdout
    assert sys.executable not in str(full)  # the fresh environment, not the test's
