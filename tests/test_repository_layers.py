"""The repository's top-level packages are layers, each importing only those below it, so none is caught in an
import circle: the product (what the wheel installs), the simulator, the shared test support, the developer tools,
the real-server suite, then the offline tests over all of them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = {"components", "hotswap", "policies"}
BELOW: dict[str, set[str]] = {
    "components": {"hotswap", "policies"},
    "hotswap": set(),
    "policies": set(),
    "sim": {"hotswap"},
    "testkit": PRODUCT,
    "tools": PRODUCT | {"sim", "testkit"},
    "e2e": PRODUCT | {"testkit", "tools"},
}
PACKAGES = set(BELOW) | {"tests"}


def _package(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] == "gke_tpu_priority" and len(parts) > 1:
        return parts[1] if parts[1] in PRODUCT else None
    return parts[0] if parts[0] in PACKAGES - PRODUCT else None


def imported_packages(package: str) -> dict[str, set[str]]:
    """For each repository package `package` imports: the files that do, function bodies included."""
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                modules = [node.module]
            else:
                continue
            for module in modules:
                target = _package(module)
                if target is not None and target != package:
                    found.setdefault(target, set()).add(str(path.relative_to(ROOT)))
    return found


@pytest.mark.parametrize("package", sorted(BELOW))
def test_a_package_imports_only_the_layers_below_it(package: str) -> None:
    above = {target: files for target, files in imported_packages(package).items() if target not in BELOW[package]}
    assert not above, f"{package} imports what may import it: {above}"


def test_the_layers_have_no_circle() -> None:
    def reaches(start: str, goal: str, seen: frozenset[str] = frozenset()) -> bool:
        return any(b == goal or (b not in seen and reaches(b, goal, seen | {b})) for b in BELOW.get(start, set()))

    assert not [p for p in BELOW if reaches(p, p)]
