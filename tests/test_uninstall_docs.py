"""One uninstall procedure everywhere: the README, the operations guide and the CLI's own help say the same thing,
in the same order, none tells an operator to run release-all inside the live reconciler, and what `pulumi destroy`
does to the charts' CRDs is what the code does."""

from __future__ import annotations

import re

from gke_tpu_priority.hotswap.cli import build_parser
from testkit.mock_runtime import PROJECT_ROOT

DOCS = (
    "README.md",
    "docs/operations.md",
    "docs/hotswap.md",
    "docs/platform.md",
    "docs/components.md",
    "docs/architecture.md",
    "examples/README.md",
)


def _release_all_help() -> str:
    parser = build_parser()
    (sub,) = (a for a in parser._actions if a.dest == "command")
    return str(sub.choices["release-all"].format_help())  # type: ignore[attr-defined]


def test_no_doc_runs_release_all_inside_the_reconciler() -> None:
    for doc in DOCS:
        text = (PROJECT_ROOT / doc).read_text()
        assert not re.search(r"exec\s+\S*hotswap-reconciler[^\n`]*release-all", text), doc


def test_runbook_orders_removal_release_drain_protect_destroy() -> None:
    text = (PROJECT_ROOT / "docs/operations.md").read_text()
    runbook = text.split("## Uninstall", 1)[1].split("\n## ", 1)[0]
    steps = re.findall(r"^\d\. \*\*([^*]+)\*\*", runbook, re.M)
    assert steps == [
        "Remove the reconciler.",
        "Release what it held.",
        "Drain.",
        "Lift protection",
        "Destroy.",
    ]
    runbook = " ".join(runbook.split())
    facts = ("hotswap.enabled", "stopPolicy", "CRDs stay", "retainOnDelete", "every remaining Workload and JobSet")
    for fact in (*facts, "admission policy"):
        assert fact in runbook, fact


def test_docs_say_destroy_keeps_the_charts_crds_as_the_code_does() -> None:
    from gke_tpu_priority.components.kueue.crds import CRD_TYPE, KeepCrds

    class Args:
        type_ = CRD_TYPE
        props: dict[str, object] = {}
        opts = None

    kept = KeepCrds(protect=False)(Args())  # type: ignore[arg-type]
    assert kept is not None and kept.opts is not None and kept.opts.retain_on_delete is True
    for doc in DOCS:
        text = " ".join((PROJECT_ROOT / doc).read_text().split())
        assert "with their CRDs" not in text, doc  # the sentence that said destroy deletes them
    readme = " ".join((PROJECT_ROOT / "README.md").read_text().split())
    assert "`pulumi destroy`. It keeps the Kueue and JobSet CRDs" in readme


def test_readme_and_cli_help_point_at_the_same_procedure() -> None:
    readme = (PROJECT_ROOT / "README.md").read_text()
    assert "(docs/operations.md#uninstall)" in readme
    assert '"gke-tpu-priority[hotswap] @ git+https://<repository-url>@v' in readme
    text = " ".join(_release_all_help().split())
    assert "after the reconciler's pods are gone" in text and "docs/operations.md, 'Uninstall'" in text


def test_operations_guide_shows_status_dashboards_and_one_incident() -> None:
    text = (PROJECT_ROOT / "docs/operations.md").read_text()
    for topic in (
        "## What is held right now (`kubectl hotswap status`)",
        "## Dashboards and alerts",
        "## Following one incident",
    ):
        assert topic in text, topic
    from gke_tpu_priority.components.reconciler.monitoring import ALERTS

    guide = text.split("## Dashboards and alerts", 1)[1].split("\n## ", 1)[0]
    for name, *_ in ALERTS:
        assert f"`{name}`" in guide, name
