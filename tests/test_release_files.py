"""What a release needs, checked offline: the declared license's text, a changelog section for the version, one
version everywhere it is written, a build backend that can read the license expression, examples installing this
checkout, and provider majors the examples share with the package."""

from __future__ import annotations

import json
import re
import tomllib

from testkit.mock_runtime import PROJECT_ROOT

PYPROJECT = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())


def test_the_declared_license_has_its_text() -> None:
    assert PYPROJECT["project"]["license"] == "Apache-2.0"
    assert PYPROJECT["project"]["license-files"] == ["LICENSE"]
    text = (PROJECT_ROOT / "LICENSE").read_text()
    assert text.lstrip().startswith("Apache License") and "Version 2.0, January 2004" in text
    assert "Copyright [yyyy] [name of copyright owner]" in text  # the appendix template, not another project's


def test_the_build_backend_reads_an_spdx_license() -> None:
    (backend,) = [r for r in PYPROJECT["build-system"]["requires"] if r.startswith("setuptools")]
    floor = re.search(r">=(\d+)", backend)
    assert floor is not None and int(floor.group(1)) >= 77, backend


def test_the_changelog_names_the_current_version() -> None:
    text = (PROJECT_ROOT / "CHANGELOG.md").read_text()
    assert re.search(rf"^## {re.escape(PYPROJECT['project']['version'])}( |$)", text, re.M)


def test_the_version_is_the_same_everywhere_it_is_written() -> None:
    import yaml

    version = PYPROJECT["project"]["version"]
    pack = yaml.safe_load((PROJECT_ROOT / "policies/PulumiPolicy.yaml").read_text())
    schema = json.loads((PROJECT_ROOT / "components/schema.json").read_text())
    assert pack["version"] == version
    assert schema["version"] == version


def test_python_examples_install_this_checkout() -> None:
    for example in ("python", "existing-cluster", "fleet"):
        directory = PROJECT_ROOT / "examples" / example
        lines = [
            line.strip()
            for line in (directory / "requirements.txt").read_text().splitlines()
            if line.strip() and not line.lstrip().startswith("#")
        ]
        assert lines == ["-e ../.."], example
        assert (directory / "../..").resolve() == PROJECT_ROOT.resolve()
        assert "<" not in (directory / "requirements.txt").read_text()  # no placeholder, not even in a comment


def test_typescript_example_uses_no_provider_at_another_major_than_the_package() -> None:
    package = json.loads((PROJECT_ROOT / "examples/typescript/package.json").read_text())
    ours = {
        m.group(1): m.group(2)
        for d in PYPROJECT["project"]["dependencies"]
        if (m := re.match(r"(pulumi(?:-[a-z-]+)?)>=(\d+)", d)) is not None
    }
    deps = {**package["dependencies"], **package.get("devDependencies", {})}
    for name, wanted in deps.items():
        python_name = name.replace("@pulumi/", "pulumi-").removesuffix("-pulumi")  # @pulumi/pulumi -> pulumi
        if name.startswith("@pulumi/") and python_name in ours:
            assert wanted.lstrip("^~").split(".")[0] == ours[python_name], (name, wanted)
    assert deps["@pulumi/gke-tpu-priority"] == "file:sdks/gke-tpu-priority"  # where `pulumi package add` puts it


def test_typescript_example_locks_the_sdk_at_the_cli_release() -> None:
    from tools.toolchain import TOOLS

    package = json.loads((PROJECT_ROOT / "examples/typescript/package.json").read_text())
    lock = json.loads((PROJECT_ROOT / "examples/typescript/package-lock.json").read_text())
    root = lock["packages"][""]
    assert root["dependencies"] == package["dependencies"]  # what `npm ci` checks before installing
    assert root["devDependencies"] == package["devDependencies"]
    assert "v" + lock["packages"]["node_modules/@pulumi/pulumi"]["version"] == TOOLS["pulumi"].version
    assert lock["packages"]["node_modules/@pulumi/gke-tpu-priority"] == {
        "resolved": "sdks/gke-tpu-priority",
        "link": True,
    }


def test_the_image_build_is_documented_with_version_tag_digest_and_sbom() -> None:
    text = (PROJECT_ROOT / "docs/operations.md").read_text()
    section = text.split("## Building the reconciler image", 1)[1].split("\n## ", 1)[0]
    for fact in ("project.version", "--sbom=true", "hotswap.image", "@sha256:", "PYTHON_IMAGE", "65532", "pin-base"):
        assert fact in section, fact
    dockerfile = (PROJECT_ROOT / "hotswap/Dockerfile").read_text()
    assert "ARG PYTHON_IMAGE\n" in dockerfile and "USER 65532:65532" in dockerfile
