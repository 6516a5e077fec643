"""What a release needs, checked offline (issue 38, items 4 and 5): the declared license's text, a changelog, a
build backend that can read the license expression, examples installing this checkout, and provider majors the
examples share with the package."""

from __future__ import annotations

import json
import re
import tomllib

from tools.mock_runtime import PROJECT_ROOT

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
    assert f"## {PYPROJECT['project']['version']}" in text


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


def test_typescript_example_uses_the_packages_provider_major() -> None:
    package = json.loads((PROJECT_ROOT / "examples/typescript/package.json").read_text())
    (ours,) = [d for d in PYPROJECT["project"]["dependencies"] if d.startswith("pulumi-gcp")]
    major = re.search(r">=(\d+)", ours)
    assert major is not None
    assert package["dependencies"]["@pulumi/gcp"].lstrip("^~").split(".")[0] == major.group(1)


def test_the_image_build_is_documented_with_version_tag_digest_and_sbom() -> None:
    text = (PROJECT_ROOT / "docs/operations.md").read_text()
    section = text.split("## Building the reconciler image", 1)[1].split("\n## ", 1)[0]
    for fact in ("project.version", "--sbom=true", "hotswap.image", "@sha256:", "PYTHON_IMAGE", "65532", "pin-base"):
        assert fact in section, fact
    dockerfile = (PROJECT_ROOT / "hotswap/Dockerfile").read_text()
    assert "ARG PYTHON_IMAGE\n" in dockerfile and "USER 65532:65532" in dockerfile
