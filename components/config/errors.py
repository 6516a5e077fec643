"""Turn pydantic validation errors into one readable message: config path, bad value, what is allowed."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError
from pydantic.alias_generators import to_camel

_VALUE_ERROR_PREFIX = "Value error, "


class ConfigError(Exception):
    """Stack configuration is invalid; `problems` lists every problem found, each with its config path."""

    def __init__(self, root: str, problems: Sequence[str], what: str = "stack configuration") -> None:
        self.root = root
        self.problems = list(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"invalid {what} {root!r} ({len(self.problems)} problem(s)):\n{lines}")


def _path(root: str, loc: Sequence[int | str]) -> str:
    out = root
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f".{to_camel(part)}"
    return out


def _show(value: Any) -> str:
    try:
        text = json.dumps(value, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def format_validation_error(root: str, err: ValidationError, what: str = "stack configuration") -> ConfigError:
    problems: list[str] = []
    for item in err.errors(include_url=False):
        loc = [p for p in item["loc"] if not (isinstance(p, str) and p.startswith("function-"))]
        path = _path(root, loc)
        msg = item["msg"]
        kind = item["type"]
        if kind == "value_error":
            # Cross-field validators report several lines, each already naming its own sub-path.
            for line in msg.removeprefix(_VALUE_ERROR_PREFIX).splitlines():
                sub, sep, rest = line.partition(": ")
                if sep and (sub.startswith(".") or sub.startswith("[")):
                    problems.append(f"{path}{sub}: {rest}")
                else:
                    problems.append(f"{path}: {line}")
        elif kind == "extra_forbidden":
            problems.append(f"{path}: unknown setting (check the spelling; settings are camelCase)")
        elif kind == "missing":
            problems.append(f"{path}: required setting is missing")
        else:
            problems.append(f"{path}: {msg} (got {_show(item.get('input'))})")
    return ConfigError(root, problems, what)
