"""The policy interface does not import the simulator that drives it (issue 19 item 5)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import gke_tpu_priority.hotswap.sim

SIM = Path(gke_tpu_priority.hotswap.sim.__file__).parent
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
    offenders = {p.name for p in POLICY_SIDE if any(m.startswith("hotswap.sim.simulator") for m in _imports(p))}
    assert not offenders, f"these import hotswap.sim.simulator: {sorted(offenders)}"


def test_fresh_interpreter_imports_every_policy_without_the_simulator() -> None:
    modules = ["hotswap.sim.policies.base"] + [f"hotswap.sim.policies.{p.stem}" for p in POLICY_SIDE[1:]]
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}:\n"
        "    importlib.import_module(m)\n"
        "print('hotswap.sim.simulator' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"
