"""What the examples' own files say: the offline-preview command of an example's README and the platform settings
of the TypeScript example, read the way a user reads them."""

from __future__ import annotations

import re
import shlex
from typing import Any

import yaml

from testkit.mock_runtime import PROJECT_ROOT

EXAMPLES = PROJECT_ROOT / "examples"


def typescript_settings(source: str) -> dict[str, Any]:
    """The object literal passed to `new tpu.TpuPlatform(...)`, with TypeScript expressions marked as outputs."""
    block = source.split("// BEGIN platform settings")[1].split("// END platform settings")[0]
    literal = block[block.index("{", block.index("new tpu.TpuPlatform(")) : block.rindex("}") + 1]
    literal = re.sub(r"(:\s*)(?!true\b|false\b|null\b)([A-Za-z_$][\w$.]*)(\s*[,}\]\n])", r'\1"${ts.\2}"\3', literal)
    literal = re.sub(r",(\s*[}\]])", r"\1", literal)
    parsed: dict[str, Any] = yaml.safe_load(literal)
    return parsed


def readme_command(example: str) -> list[str]:
    """The offline-preview command of the example's README: `<python> ../preview.py …`, comment stripped."""
    lines = [ln for ln in (EXAMPLES / example / "README.md").read_text().splitlines() if "../preview.py" in ln]
    commands = [ln.split("  #")[0].strip() for ln in lines if ln.lstrip().startswith(("venv/", "../../.venv/"))]
    if len(commands) != 1:
        raise ValueError(f"examples/{example}/README.md: expected one offline-preview command, found {commands}")
    argv = shlex.split(commands[0])
    if argv[1] != "../preview.py":
        raise ValueError(f"examples/{example}/README.md: the command does not run ../preview.py: {argv}")
    return argv
