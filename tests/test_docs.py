"""The newcomer docs exist, are linked from the README, cover every component, and their links resolve."""

from __future__ import annotations

import re

import pytest

from gke_tpu_priority.components.provider import hosted_components
from tools.mock_runtime import PROJECT_ROOT

DOCS = ("docs/architecture.md", "docs/components.md", "docs/operations.md", "docs/upgrading.md")


def test_readme_links_the_docs() -> None:
    readme = (PROJECT_ROOT / "README.md").read_text()
    for doc in (*DOCS, "examples/README.md"):
        assert f"]({doc})" in readme, doc


def test_architecture_has_a_mermaid_diagram_of_the_flow() -> None:
    text = (PROJECT_ROOT / "docs/architecture.md").read_text()
    (diagram,) = re.findall(r"```mermaid\n(.*?)```", text, re.S)
    for step in ("Stack config", "Validation", "TpuPlatform", "GCP resources", "In-cluster objects", "reconciler"):
        assert step in diagram, step


def test_component_reference_covers_every_component() -> None:
    text = (PROJECT_ROOT / "docs/components.md").read_text()
    sections = re.findall(r"^## (\w+)$", text, re.M)
    assert sorted(sections) == sorted(c.__name__ for c in hosted_components())


def test_operations_guide_covers_the_essentials() -> None:
    text = (PROJECT_ROOT / "docs/operations.md").read_text()
    for topic in ("## Events", "## Metrics", "## Dry run", "release-all", "## When the reconciler is down"):
        assert topic in text, topic


@pytest.mark.parametrize("doc", [*DOCS, "README.md", "examples/README.md"])
def test_relative_links_resolve(doc: str) -> None:
    path = PROJECT_ROOT / doc
    for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", path.read_text()):
        assert (path.parent / target).exists(), f"{doc}: broken link {target}"
