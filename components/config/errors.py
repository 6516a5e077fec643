"""Turn pydantic validation errors into one readable message: config path, bad value, what is allowed."""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic.alias_generators import to_camel

from gke_tpu_priority.components.config.spelling import models_in

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


def show_value(value: Any) -> str:
    try:
        text = json.dumps(value, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def value_error_lines(path: str, message: str) -> list[str]:
    """A validator's message, one problem per line: cross-field validators report several lines, each already
    naming its own sub-path (`.zone: ...`), which is appended to the path of the model that raised it."""
    problems: list[str] = []
    for line in message.removeprefix(_VALUE_ERROR_PREFIX).splitlines():
        sub, sep, rest = line.partition(": ")
        if sep and (sub.startswith(".") or sub.startswith("[")):
            problems.append(f"{path}{sub}: {rest}")
        else:
            problems.append(f"{path}: {line}")
    return problems


def _model_at(model: type[BaseModel], loc: Sequence[int | str]) -> type[BaseModel] | None:
    """The model nested at `loc` (list items included); None when the place is ambiguous."""
    for part in loc:
        if isinstance(part, int):
            continue  # an item of a list of models
        field = next((f for n, f in model.model_fields.items() if part in (n, f.alias)), None)
        nested = models_in(field.annotation) if field is not None else []
        if len(nested) != 1:
            return None
        model = nested[0]
    return model


def _settings_at(model: type[BaseModel], loc: Sequence[int | str]) -> list[str]:
    """The setting names (camelCase) a model nested at `loc` accepts; none when the place is ambiguous."""
    at = _model_at(model, loc)
    return [f.alias or n for n, f in at.model_fields.items()] if at is not None else []


def _what_it_is(model: type[BaseModel] | None, loc: Sequence[int | str]) -> str:
    """` — <the field's description>` for a missing setting, so the message says what to give."""
    at = _model_at(model, loc[:-1]) if model is not None and loc and isinstance(loc[-1], str) else None
    field = next((f for n, f in at.model_fields.items() if loc[-1] in (n, f.alias)), None) if at else None
    return f" — {field.description.rstrip('.')}" if field is not None and field.description else ""


def _closest_setting(model: type[BaseModel] | None, loc: Sequence[int | str]) -> str:
    """`; did you mean `x`?` for a misspelt key, else the settings allowed there (when few enough to list)."""
    if model is None or not loc or not isinstance(loc[-1], str):
        return ""
    names = _settings_at(model, loc[:-1])
    if not names:
        return ""
    by_lower = {n.lower(): n for n in names}
    close = difflib.get_close_matches(loc[-1].lower(), list(by_lower), n=1, cutoff=0.75)
    if close:
        return f"; did you mean `{by_lower[close[0]]}`?"
    if len(names) <= 12:
        return f"; settings here: {', '.join(names)}"
    return ""


def format_validation_error(
    root: str, err: ValidationError, what: str = "stack configuration", model: type[BaseModel] | None = None
) -> ConfigError:
    problems: list[str] = []
    for item in err.errors(include_url=False):
        loc = [p for p in item["loc"] if not (isinstance(p, str) and p.startswith("function-"))]
        path = _path(root, loc)
        msg = item["msg"]
        kind = item["type"]
        if kind == "value_error":
            problems += value_error_lines(path, msg)
        elif kind == "extra_forbidden":
            # The key as the user wrote it: camel-casing `Region` would show `region`, the spelling that works.
            shown = _path(root, loc[:-1]) + (f".{loc[-1]}" if loc and isinstance(loc[-1], str) else "")
            problems.append(
                f"{shown}: unknown setting (check the spelling; settings are camelCase)" + _closest_setting(model, loc)
            )
        elif kind == "missing":
            problems.append(f"{path}: required setting is missing{_what_it_is(model, loc)}")
        else:
            problems.append(f"{path}: {describe(item)} (got {show_value(item.get('input'))})")
    return ConfigError(root, problems, what)


# Patterns of the config models, said the way a user would (a raw regex is not an answer a newcomer can use).
_PATTERN_WORDS = {
    r"^[a-z]([-a-z0-9]*[a-z0-9])?$": "a name of lowercase letters, digits and `-`, starting with a letter and "
    "ending with a letter or digit, e.g. `tpu-dev`",
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$": "a name of lowercase letters, digits and `-`, starting and ending with a "
    "letter or digit, e.g. `training-high`",
    r"^[a-z][-a-z0-9]{4,28}[a-z0-9]$": "a GCP project id: 6 to 30 lowercase letters, digits and `-`, starting with a "
    "letter, e.g. `my-tpu-project`",
    r"^[a-z]+-[a-z]+[0-9]+$": "a GCP region, e.g. `us-east5`",
    r"^[a-z]+-[a-z]+[0-9]+(-[a-z])?$": "a GCP region or zone, e.g. `us-east5` or `us-east5-b`",
    r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$": "a duration such as `90s`, `15m` or `1h30m`",
    r"^\d+s$": "a whole number of seconds such as `3600s`",
    r"^[0-9]+(\.[0-9]+)?m?$": "a CPU amount such as `250m` or `1`",
    r"^[0-9]+(Mi|Gi)$": "a memory amount such as `512Mi` or `1Gi`",
    r"^[0-9]+(\.[0-9]+)?$": "a decimal number such as `1` or `1.5`",
}

_TYPE_WORDS = {
    "dict_type": "expected a group of settings (`key: value` lines indented under it)",
    "model_type": "expected a group of settings (`key: value` lines indented under it)",
    "model_attributes_type": "expected a group of settings (`key: value` lines indented under it)",
    "list_type": "expected a list (`- ` items)",
    "time_delta_parsing": "expected a duration such as `90s`, `15m` or `1h30m`",
    "time_delta_type": "expected a duration such as `90s`, `15m` or `1h30m`",
    "int_parsing": "expected a whole number",
    "int_type": "expected a whole number",
    "int_from_float": "expected a whole number",
    "bool_parsing": "expected `true` or `false`",
    "bool_type": "expected `true` or `false`",
    "string_type": "expected text",
}

_LENGTH_WORDS = {
    "too_short": "expected at least {n} item{s}",
    "too_long": "expected at most {n} item{s}",
    "string_too_short": "expected at least {n} character{s}",
    "string_too_long": "expected at most {n} character{s}",
}

_BOUND_WORDS = {"ge": "at least", "gt": "more than", "le": "at most", "lt": "less than"}


def _duration_words(value: timedelta) -> str:
    seconds = value.total_seconds()
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def describe(item: Mapping[str, Any]) -> str:
    """One pydantic error in the user's words: no regexes, class names or `datetime.timedelta(...)`."""
    kind = str(item.get("type", ""))
    ctx = item.get("ctx") or {}
    if kind == "string_pattern_mismatch":
        pattern = str(ctx.get("pattern", ""))
        return f"expected {_PATTERN_WORDS.get(pattern, f'text of the form {pattern}')}"
    if kind in ("enum", "literal_error") and "expected" in ctx:
        return f"expected one of {ctx['expected']}"
    if kind in _TYPE_WORDS:
        return _TYPE_WORDS[kind]
    if kind in _LENGTH_WORDS:
        bound = ctx.get("min_length", ctx.get("max_length"))
        return _LENGTH_WORDS[kind].format(n=bound, s="" if bound == 1 else "s")
    for key, words in _BOUND_WORDS.items():
        if key in ctx:
            bound = ctx[key]
            shown = _duration_words(bound) if isinstance(bound, timedelta) else str(bound)
            return f"must be {words} {shown}"
    if kind == "value_error":
        return str(item.get("msg", "")).removeprefix(_VALUE_ERROR_PREFIX)
    return str(item.get("msg", ""))
