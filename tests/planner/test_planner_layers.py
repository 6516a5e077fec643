"""The planner's layers (docs/planner.md, "Layout"): stages never import stages, decisions never import stages, the
claims ledger and the snapshot index import neither. Read from the source with `ast`, so a new import that breaks a
rule fails here before anyone has to untangle it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PLANNER = Path(__file__).resolve().parents[2] / "hotswap" / "planner"
PACKAGE = "gke_tpu_priority.hotswap.planner"

STAGES = frozenset({"quarantine", "ops", "rungs", "preempt", "inversion", "release", "fastfail"})
"""One module per step of the pass, in `plan()`'s order."""
DECISIONS = frozenset(
    {"victims", "fence", "disruption", "starvation", "priority_inversions", "queued_room", "waiting", "wakeup"}
)
"""One home per cross-stage question, which stages ask."""
LEDGER = frozenset({"claims"})
INDEX = frozenset({"world", "actions"})
"""The indexed snapshot and the vocabulary of a plan."""
BESIDE = frozenset({"backstop", "simulate"})
"""Not part of a pass: the controller's fallback plan, and applying a plan's writes to a snapshot (for tests)."""

ALLOWED: dict[frozenset[str], frozenset[str]] = {
    STAGES: DECISIONS | LEDGER | INDEX,
    DECISIONS: DECISIONS | LEDGER | INDEX,
    LEDGER: INDEX,
    INDEX: INDEX,
    BESIDE: INDEX,
}


def planner_imports(module: str, source: str | None = None) -> set[str]:
    """The planner modules `module` imports (absolute imports only, as the house writes them)."""
    tree = ast.parse((PLANNER / f"{module}.py").read_text() if source is None else source)
    found: set[str] = set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module is not None:
            names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        for name in names:
            if name.startswith(PACKAGE + "."):
                found.add(name.removeprefix(PACKAGE + ".").split(".")[0])
    found.discard(module)
    return found & {p.stem for p in PLANNER.glob("*.py")}


def modules() -> list[str]:
    return sorted(p.stem for p in PLANNER.glob("*.py") if p.stem != "__init__")


def test_every_planner_module_has_a_layer() -> None:
    layered = STAGES | DECISIONS | LEDGER | INDEX | BESIDE
    assert sorted(set(modules()) - layered) == []
    assert sorted(layered - set(modules())) == []


@pytest.mark.parametrize("module", modules())
def test_a_module_imports_only_what_its_layer_may(module: str) -> None:
    layer = next(group for group in ALLOWED if module in group)
    assert sorted(planner_imports(module) - ALLOWED[layer]) == []


def test_the_rule_catches_a_stage_importing_a_stage() -> None:
    """The check itself can fail: `release` reading `preempt` is an import this layout removed."""
    source = f"from {PACKAGE}.preempt import plan_preemptions\nfrom {PACKAGE} import claims\n"
    assert planner_imports("release", source) == {"preempt", "claims"}
    assert planner_imports("release", source) - ALLOWED[STAGES] == {"preempt"}


MUTATORS = frozenset({"add", "append", "extend", "update", "pop", "remove", "clear", "discard", "setdefault"})


def ledger_writes(source: str) -> list[str]:
    """Writes to a field of a `ledger` variable outside the ledger's own transitions, as `line: field`."""
    found: list[tuple[int, str]] = []

    def field_of(node: ast.expr) -> str | None:
        while isinstance(node, ast.Subscript):
            node = node.value
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "ledger":
            return node.attr
        return None

    for node in ast.walk(ast.parse(source)):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS:
            targets = [node.func.value]
        found += [(node.lineno, name) for target in targets if (name := field_of(target)) is not None]
    return [f"{line}: {name}" for line, name in sorted(found)]


@pytest.mark.parametrize("module", sorted(set(modules()) - LEDGER))
def test_only_the_ledger_writes_its_fields(module: str) -> None:
    """Stages change the ledger through its named transitions, so each write and its event live in one place."""
    assert ledger_writes((PLANNER / f"{module}.py").read_text()) == []


def test_the_ledger_rule_catches_a_direct_write() -> None:
    source = "ledger.waiting += 1\nledger.events.append(e)\nledger.taken_over[uid] = why\nledger.hold(w)\n"
    assert ledger_writes(source) == ["1: waiting", "2: events", "3: taken_over"]


ENTRY_POINTS = (
    "quarantine_actions",
    "advance_ops",
    "plan_rung_switches",
    "plan_preemptions",
    "resolve_inversions",
    "plan_releases",
    "plan_fast_fails",
)
"""Each stage's entry point, in the order of the pass."""


def test_plan_runs_the_stages_in_pass_order() -> None:
    """`plan()` reads as the pass: each stage's entry point is called once, in this order."""
    tree = ast.parse((PLANNER / "__init__.py").read_text())
    plan = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "plan")
    calls = sorted(
        (n.lineno, n.col_offset, n.func.id)
        for n in ast.walk(plan)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ENTRY_POINTS
    )
    assert tuple(name for _, _, name in calls) == ENTRY_POINTS


LONGEST_FUNCTION = 80


def function_lengths(source: str) -> dict[str, int]:
    """Lines of each function (methods and nested functions included), by name."""
    return {
        node.name: (node.end_lineno or node.lineno) - node.lineno + 1
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }


@pytest.mark.parametrize("module", ["__init__", *modules()])
def test_no_planner_function_is_longer_than_80_lines(module: str) -> None:
    lengths = function_lengths((PLANNER / f"{module}.py").read_text())
    assert {name: n for name, n in lengths.items() if n > LONGEST_FUNCTION} == {}


def test_function_lengths_count_every_line() -> None:
    assert function_lengths("def f():\n    x = 1\n\n    return x\n") == {"f": 4}
