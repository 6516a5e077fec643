"""The TypeScript example runs as its README says, from its own directory.

Here rather than in `make test`: it needs the npm registry (`npm ci`) and Go (the SDK generator, `e2e/go/gen-sdk`,
which `make e2e-tools` builds into the e2e tool cache). No cluster.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gke_tpu_priority.components.config import parse_platform_config
from testkit.examples import readme_command, typescript_settings
from testkit.mock_runtime import PROJECT_ROOT
from tools.schema_check import check_component, load_schema

EXAMPLE = PROJECT_ROOT / "examples" / "typescript"
PLATFORM = "gke-tpu-priority:index:TpuPlatform"

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or shutil.which("npm") is None, reason="needs Node.js and npm"
)


def run(argv: list[str], timeout: float = 900) -> subprocess.CompletedProcess[str]:
    # The README's interpreter is the checkout's virtualenv; this suite's is the same one.
    if argv[0] == "../../.venv/bin/python":
        argv = [sys.executable, *argv[1:]]
    return subprocess.run(argv, cwd=EXAMPLE, capture_output=True, text=True, timeout=timeout, env=dict(os.environ))


@pytest.fixture(scope="module")
def preview() -> subprocess.CompletedProcess[str]:
    """The README's offline preview, once: generates sdks/, `npm ci`, runs index.ts under the mocks."""
    return run(readme_command("typescript"))


def test_the_readme_preview_runs_the_program_and_its_component(preview: subprocess.CompletedProcess[str]) -> None:
    assert preview.returncode == 0, preview.stderr
    out = preview.stdout
    assert out.startswith(
        "Program 'tpu-platform-typescript' (nodejs), stack 'dev', offline under Pulumi's mock runtime"
    )
    assert "gcp:container/nodePool:NodePool                                              4" in out  # system + 3
    assert "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue" in out
    # The exports are the component's own values, and the kubeconfig stays hidden.
    assert '  clusterName: "tpu-ts"\n' in out
    assert '  clusterQueues: ["tpu-training"]\n' in out
    assert "  kubeconfig: [secret]" in out


def test_the_sdk_is_where_pulumi_package_add_puts_it(preview: subprocess.CompletedProcess[str]) -> None:
    assert preview.returncode == 0, preview.stderr
    sdk = EXAMPLE / "sdks" / "gke-tpu-priority"
    meta = json.loads((sdk / "package.json").read_text())
    assert meta["name"] == "@pulumi/gke-tpu-priority"
    assert meta["version"] == load_schema()["version"]
    assert meta["pulumi"] == {"resource": True, "name": "gke-tpu-priority", "version": load_schema()["version"]}
    assert (sdk / "bin" / "tpuPlatform.js").is_file()  # compiled by its postinstall, as npm installed it
    linked = EXAMPLE / "node_modules" / "@pulumi" / "gke-tpu-priority"
    assert linked.is_symlink() and linked.resolve() == sdk.resolve()


def test_index_ts_type_checks_against_the_generated_sdk(preview: subprocess.CompletedProcess[str]) -> None:
    assert preview.returncode == 0, preview.stderr
    done = run(shlex.split("npx tsc --noEmit"))
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_program_gives_the_component_the_settings_it_shows(
    preview: subprocess.CompletedProcess[str], tmp_path: Path
) -> None:
    assert preview.returncode == 0, preview.stderr
    report = tmp_path / "run.json"
    argv = ["npm", "run", "--silent", "preview", "--", "--stack-output", "projectId=my-tpu-project"]
    done = run([*argv, "--report", str(report)])
    assert done.returncode == 0, done.stderr
    recorded: dict[str, Any] = json.loads(report.read_text())
    (platform,) = [r for r in recorded["resources"] if r["type"] == PLATFORM]
    assert platform["name"] == "training" and platform["custom"] is False
    written = typescript_settings((EXAMPLE / "index.ts").read_text())
    # What index.ts writes reaches the component as written; the stack reference's output in place of the Output.
    assert platform["inputs"] == {"platform": {**written["platform"], "project": "my-tpu-project"}}
    assert check_component(load_schema(), PLATFORM, platform["inputs"]) == []
    assert [g.chips for g in parse_platform_config(platform["inputs"]["platform"]).tpu_pools] == [32, 64]
    assert recorded["outputs"] == {
        "clusterName": "${training.clusterName}",
        "kubeconfig": "${training.kubeconfig}",
        "clusterQueues": "${training.clusterQueues}",
    }


def test_without_the_stack_output_the_preview_says_which_to_pass(preview: subprocess.CompletedProcess[str]) -> None:
    assert preview.returncode == 0, preview.stderr
    done = run(readme_command("typescript")[:2])
    assert done.returncode == 2
    assert done.stderr.startswith(
        "error: index.ts: stack reference \"my-org/gcp-projects/prod\": its output 'projectId' is not known offline; "
        "pass --stack-output projectId=<the value that stack exports>"
    )
    assert "Traceback" not in done.stderr
