"""Settings are camelCase, as in every Pulumi stack file; a snake_case key is a mistake to name, not to accept.

The models also accept field names (snake_case) because the package builds some of them in Python. So a user's
`machine_type` used to pass silently, and with both `machine_type` and `machineType` the right one was the key
reported unknown. This pre-pass walks the raw input along the models' fields, names every snake_case key with the
camelCase it should be, and hands validation the input with those keys renamed (a duplicate dropped), so every other
problem is still found in the same run.
"""

from __future__ import annotations

import types
import typing
from typing import Any, Union

from pydantic import BaseModel


def models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models a field's value (or its list/dict items) may be."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    origin = typing.get_origin(annotation)
    if origin is None:
        return []
    if origin in (Union, types.UnionType, list, tuple, dict, typing.Annotated):
        args = typing.get_args(annotation)
        if origin is dict:
            args = args[1:]
        elif origin is typing.Annotated:
            args = args[:1]
        return [m for arg in args for m in models_in(arg)]
    return []


def pick_model(models: list[type[BaseModel]], data: dict[str, Any]) -> type[BaseModel] | None:
    """Of a union's models, the one whose fields (either spelling) cover most keys."""
    if not models:
        return None

    def score(model: type[BaseModel]) -> int:
        names = set(model.model_fields) | {f.alias for f in model.model_fields.values() if f.alias}
        return sum(1 for key in data if key in names)

    return max(models, key=score)


def _walk(value: Any, models: list[type[BaseModel]], path: str, problems: list[str]) -> Any:
    if isinstance(value, list):
        return [_walk(item, models, f"{path}[{i}]", problems) for i, item in enumerate(value)]
    if not isinstance(value, dict):
        return value
    model = pick_model(models, value)
    if model is None:
        return value
    fields = model.model_fields
    out: dict[str, Any] = {}
    for key, item in value.items():
        field = fields.get(key) if isinstance(key, str) else None
        alias = field.alias if field is not None else None
        name = key
        if field is not None and alias and alias != key:
            if alias in value:
                problems.append(
                    f"{path}.{key}: snake_case spelling of `{alias}`, which is set too; remove `{key}` "
                    "(settings are camelCase)"
                )
                continue
            problems.append(f"{path}.{key}: settings are camelCase; write `{alias}`")
            name = alias
        target = fields.get(key) if field is not None else next((f for f in fields.values() if f.alias == key), None)
        out[name] = _walk(item, models_in(target.annotation) if target is not None else [], f"{path}.{name}", problems)
    return out


def camel_case_keys(model: type[BaseModel], raw: dict[str, Any], root: str) -> tuple[dict[str, Any], list[str]]:
    """(``raw`` with snake_case keys renamed to camelCase, one problem per such key, paths from ``root``)."""
    problems: list[str] = []
    cleaned = _walk(raw, [model], root, problems)
    assert isinstance(cleaned, dict)
    return cleaned, problems
