"""The reconciler image's build inputs, checked without Docker: a base image taken only by digest
from hotswap/base-image.lock, dependencies installed only from a hash-pinned lock of the `[hotswap]` extra, a
non-root user, and one version for the package, the image tag, the component schema, the CHANGELOG and the docs."""

from __future__ import annotations

import importlib.metadata
import json
import re
import tomllib
from collections.abc import Sequence
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from gke_tpu_priority.components.reconciler import image as stack_image
from testkit.mock_runtime import PROJECT_ROOT, run_program
from tools import reconciler_image as tool

VERSION = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["project"]["version"]
DOCKERFILE = (PROJECT_ROOT / "hotswap" / "Dockerfile").read_text()
DIGEST = "sha256:" + "ab" * 32


def _instructions(text: str) -> list[str]:
    joined = re.sub(r"\\\n", " ", text)
    return [line.strip() for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def test_the_dockerfile_takes_its_base_only_from_the_build_arg_and_refuses_one_without_a_digest() -> None:
    lines = _instructions(DOCKERFILE)
    assert "ARG PYTHON_IMAGE" in lines  # declared without a default: no tag to fall back on
    assert not any(line.startswith("ARG PYTHON_IMAGE=") for line in lines)
    froms = [line for line in lines if line.startswith("FROM ")]
    assert froms == ["FROM ${PYTHON_IMAGE} AS build", "FROM ${PYTHON_IMAGE}"]
    (guard,) = [line for line in lines if line.startswith("RUN case")]
    assert "*@sha256:" + "?" * 64 + ")" in guard and "exit 1" in guard and "pin-base" in guard


def test_dependencies_come_only_from_the_hash_pinned_lock() -> None:
    installs = [line for line in _instructions(DOCKERFILE) if "pip install" in line]
    assert installs == ["RUN pip install --require-hashes --only-binary=:all: --no-deps -r requirements.lock"]
    assert "COPY hotswap/requirements.lock ./requirements.lock" in DOCKERFILE
    dockerignore = (PROJECT_ROOT / ".dockerignore").read_text().splitlines()
    assert "!hotswap/" in dockerignore and not any(
        line.startswith("!") and line != "!hotswap/" for line in dockerignore
    )


def test_the_image_runs_as_a_fixed_non_root_user() -> None:
    lines = _instructions(DOCKERFILE)
    final = lines[max(i for i, line in enumerate(lines) if line.startswith("FROM ")) :]
    users = [line for line in final if line.startswith("USER ")]
    assert users == ["USER 65532:65532"]
    assert final[-2:] == ['ENTRYPOINT ["python", "-m", "gke_tpu_priority.hotswap"]', 'CMD ["run"]']


def test_the_lock_pins_every_requirement_of_the_hotswap_extra_with_hashes() -> None:
    locked = tool.locked_requirements()
    for spec in tool.hotswap_requirements():
        req = Requirement(spec)
        version, hashes = locked[tool.canonical(req.name)]
        assert req.specifier.contains(version), (spec, version)
        assert hashes, spec
    assert all(hashes for _, hashes in locked.values())  # transitive ones too: --require-hashes needs every one
    assert "pyproject.toml [hotswap]" in tool.REQUIREMENTS_LOCK.read_text()


def test_an_unpinned_base_stops_the_build_before_docker_runs(capsys: pytest.CaptureFixture[str]) -> None:
    assert "@sha256:" not in tool.read_base()  # no digest was resolved on a machine with Docker yet

    def docker(argv: Sequence[str]) -> str:
        raise AssertionError(f"Docker must not run: {argv}")

    code = tool.main(["build", "--repository", "us-east5-docker.pkg.dev/p/hotswap", "--push"], docker, docker)
    assert code == 2
    err = capsys.readouterr().err
    assert "base-image.lock names 'python:3.11-slim-bookworm' without a digest" in err
    assert "python -m tools.reconciler_image pin-base" in err


def _checkout(tmp_path: Path, base: str) -> Path:
    (tmp_path / "hotswap").mkdir()
    (tmp_path / "hotswap" / "base-image.lock").write_text(f"# pinned by pin-base\n{base}\n")
    (tmp_path / "pyproject.toml").write_text(f'[project]\nname = "x"\nversion = "{VERSION}"\n')
    return tmp_path


def test_a_pinned_base_builds_with_the_version_tag_and_pushes_with_attestations(tmp_path: Path) -> None:
    root = _checkout(tmp_path, f"python:3.11-slim-bookworm@{DIGEST}")
    command = tool.build_command("us-east5-docker.pkg.dev/p/hotswap/", push=True, root=root)
    assert command[:3] == ["docker", "buildx", "build"]
    assert command[command.index("--build-arg") + 1] == f"PYTHON_IMAGE=python:3.11-slim-bookworm@{DIGEST}"
    assert command[command.index("--tag") + 1] == f"us-east5-docker.pkg.dev/p/hotswap/hotswap-reconciler:{VERSION}"
    assert command[command.index("--platform") + 1] == "linux/amd64"
    assert {"--sbom=true", "--provenance=true", "--push"} <= set(command)
    local = tool.build_command("r", push=False, root=root)
    assert "--load" in local and "--sbom=true" not in local


def test_pin_base_records_the_digest_the_registry_reports(tmp_path: Path) -> None:
    root = _checkout(tmp_path, "python:3.11-slim-bookworm")
    lock = root / "hotswap" / "base-image.lock"
    calls: list[list[str]] = []

    def docker(argv: Sequence[str]) -> str:
        calls.append(list(argv))
        return json.dumps({"mediaType": "application/vnd.oci.image.index.v1+json", "digest": DIGEST})

    assert tool.pin_base(runner=docker, path=lock) == f"python:3.11-slim-bookworm@{DIGEST}"
    assert calls == [
        ["docker", "buildx", "imagetools", "inspect", "python:3.11-slim-bookworm", "--format", "{{json .Manifest}}"]
    ]
    assert lock.read_text() == f"# pinned by pin-base\npython:3.11-slim-bookworm@{DIGEST}\n"
    assert tool.pinned_base(lock) == f"python:3.11-slim-bookworm@{DIGEST}"
    # Re-pinning asks for the tag again, not the old digest.
    tool.pin_base(runner=docker, path=lock)
    assert calls[-1][4] == "python:3.11-slim-bookworm"


def test_pin_base_refuses_an_answer_without_a_digest(tmp_path: Path) -> None:
    lock = _checkout(tmp_path, "python:3.11-slim-bookworm") / "hotswap" / "base-image.lock"
    with pytest.raises(tool.ImageError, match="reported no sha256 digest"):
        tool.pin_base(runner=lambda argv: "{}", path=lock)
    assert "@" not in lock.read_text()


def test_one_version_for_package_image_schema_changelog_and_docs() -> None:
    assert importlib.metadata.version("gke-tpu-priority") == VERSION
    assert stack_image.image_tag() == VERSION
    assert json.loads((PROJECT_ROOT / "components" / "schema.json").read_text())["version"] == VERSION
    assert f"\n## {VERSION}\n" in (PROJECT_ROOT / "CHANGELOG.md").read_text()
    for where in ("stacks/Pulumi.existing.yaml", "examples/yaml/Pulumi.yaml"):
        (ref,) = re.findall(r"hotswap-reconciler:(\S+)", (PROJECT_ROOT / where).read_text())
        assert ref == VERSION, where  # tag only: a digest is what a real push reports, never typed in
    ops = (PROJECT_ROOT / "docs" / "operations.md").read_text()
    assert "python -m tools.reconciler_image build" in ops and "hotswap-reconciler:<project.version>" in ops


def test_the_stack_builds_the_image_from_the_pinned_inputs_with_the_version_tag() -> None:
    run = run_program("dev")
    (built,) = [r for r in run.resources if r.type == "docker-build:index:Image"]
    assert built.inputs["tags"][0].endswith(f"/hotswap/hotswap-reconciler:{VERSION}")
    assert built.inputs["buildArgs"] == {"PYTHON_IMAGE": tool.read_base()}
    assert built.inputs["dockerfile"]["location"].endswith("hotswap/Dockerfile")
