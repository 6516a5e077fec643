"""The policy interface does not import the simulator that drives it, so a peer can be
loaded, and read, without the whole simulator."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import sim

SIM = Path(sim.__file__).parent
POLICY_SIDE = [SIM / "host.py", *sorted((SIM / "policies").glob("*.py"))]


def _imports(path: Path) -> set[str]:
    """Every module a file imports, TYPE_CHECKING blocks and function bodies included."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            out.update(f"{node.module}.{alias.name}" for alias in node.names)
    return out


def test_no_policy_module_imports_the_simulator() -> None:
    offenders = {p.name for p in POLICY_SIDE if any(m.startswith("sim.simulator") for m in _imports(p))}
    assert not offenders, f"these import sim.simulator: {sorted(offenders)}"


def test_fresh_interpreter_imports_every_policy_without_the_simulator() -> None:
    modules = ["sim.policies.base"] + [f"sim.policies.{p.stem}" for p in POLICY_SIDE[1:]]
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}:\n"
        "    importlib.import_module(m)\n"
        "print('sim.simulator' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


def test_the_reconciler_never_imports_the_simulator() -> None:
    import gke_tpu_priority.hotswap

    hotswap = Path(gke_tpu_priority.hotswap.__file__).parent
    offenders = [
        str(p.relative_to(hotswap))
        for p in sorted(hotswap.rglob("*.py"))
        if any(m == "sim" or m.startswith("sim.") for m in _imports(p))
    ]
    assert not offenders, f"these reconciler modules import the simulator: {offenders}"


def test_the_simulator_reaches_the_reconciler_through_the_installed_package() -> None:
    offenders = [
        str(p.relative_to(SIM))
        for p in sorted(SIM.rglob("*.py"))
        if any(m.split(".")[0] in {"hotswap", "components", "policies"} for m in _imports(p))
    ]
    assert not offenders, f"these import a repository folder instead of gke_tpu_priority: {offenders}"
