"""The README is a door to the docs: short, with its parts; the docs it opens exist, cover what they promise, and
their links resolve."""

from __future__ import annotations

import re
import tomllib

import pytest

from gke_tpu_priority.components.provider import hosted_components
from testkit.mock_runtime import PROJECT_ROOT

DOCS = (
    "docs/architecture.md",
    "docs/components.md",
    "docs/configuration.md",
    "docs/e2e.md",
    "docs/hotswap.md",
    "docs/multi-tenancy.md",
    "docs/operations.md",
    "docs/platform.md",
    "docs/policy-pack.md",
    "docs/releasing.md",
    "docs/submitting-work.md",
    "docs/testing.md",
    "docs/upgrading.md",
    "docs/using-components.md",
)
README = (PROJECT_ROOT / "README.md").read_text()


def _section(text: str, heading: str) -> str:
    return text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]


def test_readme_is_at_most_200_lines() -> None:
    assert len(README.splitlines()) <= 200


def test_readme_links_every_doc() -> None:
    for doc in (*DOCS, "docs/benchmarks.md", "docs/playground.md", "examples/README.md"):
        assert f"]({doc})" in README, doc


def test_readme_has_the_parts_of_a_door() -> None:
    headings = re.findall(r"^## (.+)$", README, re.M)
    for part in ("Who it is for", "Install", "Quickstart, offline", "Try it locally", "Deploy", "Teardown"):
        assert part in headings, part
    for part in ("Compatibility", "Benchmark", "Documentation"):
        assert part in headings, part
    docs = _section(README, "Documentation")
    for reader in ("**Platform admins:**", "**ML teams:**", "**Contributors:**"):
        assert reader in docs, reader


def test_status_box_names_the_version_and_what_it_was_tested_on() -> None:
    version = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["project"]["version"]
    status = next(p for p in README.split("\n\n") if p.startswith("> **Status"))
    assert f"**Status: {version}" in status
    for fact in ("v1.35.4", "Kueue v0.19.2", "JobSet v0.12.0", "kwok", "simulator", "never run on real"):
        assert fact in " ".join(status.replace("> ", "").split()), fact


def test_what_is_never_lost_is_said_exactly() -> None:
    intro = README.split("\n\n", 2)[1]
    assert "nothing is lost" not in README
    assert "requeued, never deleted" in intro and "progress since" in intro


def test_deploy_steps_pin_the_image_base_before_the_first_up() -> None:
    steps = re.findall(r"^(\d+)\. ", _section(README, "Deploy"), re.M)
    assert steps == [str(n) for n in range(1, len(steps) + 1)]
    deploy = _section(README, "Deploy")
    assert deploy.index("pin-base") < deploy.index("pulumi up")
    lock = (PROJECT_ROOT / "hotswap/base-image.lock").read_text()
    pinned = [line for line in lock.splitlines() if line and not line.startswith("#")]
    assert pinned and ("@sha256:" in pinned[0] or "no digest" in deploy), "the steps must say the base is unpinned"


def test_benchmark_summary_sits_between_its_markers() -> None:
    block = README.split("<!-- bench:summary:begin -->", 1)[1].split("<!-- bench:summary:end -->", 1)[0]
    rows = [line for line in block.strip().splitlines() if line.startswith("|")]
    assert 3 <= len(rows) <= 12  # header, rule, a few scenarios: small


def test_install_paths_are_ones_that_work() -> None:
    for doc in ("README.md", *DOCS):
        text = (PROJECT_ROOT / doc).read_text()
        # No package index serves this package: an install names a checkout or a git URL at a tag.
        for line in re.findall(r"pip install [^\n]*gke-tpu-priority[^\n]*", text):
            assert "git+" in line or re.search(r"pip install (-e )?\S*\./", line), (doc, line)
        assert "<your-git-host>" not in text, doc


def test_the_checkpoint_signal_is_worth_the_same_everywhere() -> None:
    for doc in ("README.md", *DOCS):
        text = " ".join((PROJECT_ROOT / doc).read_text().split())
        assert "tenfold" not in text, doc
    assert "about half" in README


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


def test_releasing_says_how_to_cut_the_next_release() -> None:
    text = (PROJECT_ROOT / "docs/releasing.md").read_text()
    for step in ("project.version", "python -m tools.component_types", "CHANGELOG.md", "git tag", "make test"):
        assert step in text, step


@pytest.mark.parametrize("doc", [*DOCS, "README.md", "examples/README.md"])
def test_relative_links_resolve(doc: str) -> None:
    path = PROJECT_ROOT / doc
    for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", path.read_text()):
        assert (path.parent / target).exists(), f"{doc}: broken link {target}"


@pytest.mark.parametrize("doc", [*DOCS, "README.md"])
def test_links_to_headings_of_other_docs_resolve(doc: str) -> None:
    path = PROJECT_ROOT / doc
    for target, anchor in re.findall(r"\]\(([^)#:]+\.md)#([^)]+)\)", path.read_text()):
        other = path.parent / target
        if not other.exists():
            continue
        anchors = {_anchor(h) for h in re.findall(r"^#+ (.+)$", other.read_text(), re.M)}
        assert anchor in anchors, f"{doc}: {target}#{anchor} names no heading"


def _anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
