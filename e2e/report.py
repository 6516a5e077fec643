"""build/e2e/report.json: what one `make e2e` ran on, and what the real servers said.

Sections are filled by the suite as it goes and written once at the end, so later scenarios (hotswap, `pulumi up`)
add a section of their own without touching the others.
"""

from __future__ import annotations

import datetime
import json
import subprocess
from pathlib import Path
from typing import Any

REPORT_PATH = Path("build/e2e/report.json")

_report: dict[str, Any] = {}


def section(name: str) -> dict[str, Any]:
    """The named section, created empty on first use."""
    value: dict[str, Any] = _report.setdefault(name, {})
    return value


def git_commit() -> str:
    done = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=False)
    dirty = subprocess.run(["git", "status", "--porcelain"], capture_output=True, text=True, check=False).stdout
    commit = done.stdout.strip() or "unknown"
    return f"{commit}+dirty" if dirty.strip() else commit


def write(path: Path = REPORT_PATH) -> Path:
    document = {
        "generated": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "commit": git_commit(),
        **_report,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2, sort_keys=False) + "\n")
    return path
