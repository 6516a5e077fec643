"""The cross-field checks a failed validation skipped, run on the fields that are valid, in the same run.

Pydantic runs a model's `model_validator(mode="after")` only when every field of that model validated. So one bad
type anywhere in a stack hid every cross-field check above it (the pool zone table, starvationGrace against
Kueue's ready timeout, quotas against capacity) until the user had fixed it and run again: five mistakes took
three runs. After a failed validation, `skipped_checks` builds each model again from the fields that did validate
(a field that failed is absent, not defaulted: a default the user did not ask for would make a check report a
mistake that is not there) and runs the validators pydantic skipped on it. A check that needs an absent field
cannot be evaluated and is left out: it reads the field, gets AttributeError, and `independent` skips it while
`PARTIAL` is set (outside this pass an AttributeError is a bug and propagates).
"""

from __future__ import annotations

import contextlib
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from functools import cache
from typing import Annotated, Any

from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic.alias_generators import to_camel

from gke_tpu_priority.components.config.errors import value_error_lines
from gke_tpu_priority.components.config.spelling import models_in

Loc = tuple[int | str, ...]
# Where pydantic reported an error, and the message of a validator's own error (empty for a field's type, pattern
# or bound error). A model validator's message names the fields it judged (`.timeout: ...`): those are as bad as a
# field that failed, and later checks must not build on them.
Error = tuple[Loc, str]

# Set while validators run on a partly valid config (see the module docstring).
PARTIAL: ContextVar[bool] = ContextVar("partial_config", default=False)


class _Absent:
    """A field whose value failed validation: left out of the rebuilt model."""


_ABSENT = _Absent()


def independent(*checks: Callable[[], list[str]]) -> list[str]:
    """Run independent checks one after another; on a partly valid config, one that needs a field that failed its
    own validation is skipped (it cannot be judged) and the others still run."""
    problems: list[str] = []
    for check in checks:
        try:
            problems += check()
        except AttributeError:
            if not PARTIAL.get():
                raise
    return problems


def skipped_checks(model: type[BaseModel], raw: Mapping[str, Any], errors: Sequence[Error], root: str) -> list[str]:
    """Problems the validators that pydantic skipped find on the valid fields of `raw` (whose validation failed
    with errors at `errors`), each with its config path from `root`."""
    token = PARTIAL.set(True)
    try:
        problems: list[str] = []
        # Best effort: this pass must never hide the field mistakes found already behind a traceback.
        with contextlib.suppress(Exception):
            _rebuild(model, raw, list(errors), root, problems)
        return problems
    finally:
        PARTIAL.reset(token)


@cache
def _adapter(model: type[BaseModel], name: str) -> TypeAdapter[Any]:
    field = model.model_fields[name]
    annotation: Any = field.annotation
    if field.metadata:
        annotation = Annotated[(annotation, *field.metadata)]
    return TypeAdapter(annotation)


def _judged_fields(message: str) -> set[str] | None:
    """The fields a model validator's message names (`.timeout: ...` lines); None when a line names none."""
    names: set[str] = set()
    for line in message.removeprefix("Value error, ").splitlines():
        head, sep, _ = line.partition(": ")
        field = head[1:].split(".", 1)[0].split("[", 1)[0] if sep and head.startswith(".") else ""
        if not field:
            return None
        names.add(field)
    return names


def _rebuild(
    model: type[BaseModel], raw: Mapping[str, Any], errors: list[Error], path: str, problems: list[str]
) -> BaseModel | _Absent:
    judged: set[str] = set()
    for loc, message in errors:
        if not loc and message:
            fields = _judged_fields(message)
            if fields is None:
                return _ABSENT  # the model's own check failed without naming a field: none of it can be trusted
            judged |= fields
    values: dict[str, Any] = {}
    absent: list[str] = []
    for name, field in model.model_fields.items():
        under = [(loc[1:], msg) for loc, msg in errors if loc and loc[0] in (name, field.alias)]
        key = next((k for k in (field.alias, name) if k is not None and k in raw), None)
        if key is None:
            if under:  # a required field is missing, or a default failed a check against another field
                absent.append(name)
            continue  # not set: the default stands
        value = (
            _ABSENT
            if judged & {name, to_camel(name)}
            else _value(model, name, raw[key], under, f"{path}.{to_camel(name)}", problems)
        )
        if value is _ABSENT:
            absent.append(name)
        else:
            values[name] = value
    # The fields the user set, those that failed included: a check may ask whether a setting was given.
    given = {n for n, f in model.model_fields.items() if f.alias in raw or n in raw}
    rebuilt = model.model_construct(given & (set(values) | set(absent)), **values)
    for name in absent:
        rebuilt.__dict__.pop(name, None)  # read as AttributeError, never as a default
    if any(loc for loc, _ in errors):  # an error below this model: pydantic skipped its own validators
        for decorator in model.__pydantic_decorators__.model_validators.values():
            if decorator.info.mode != "after":
                continue
            try:
                decorator.func(rebuilt)
            except ValueError as err:
                problems += value_error_lines(path, str(err))
            except Exception:  # a check that cannot be judged on the valid fields reports nothing
                continue
    return rebuilt


def _value(model: type[BaseModel], name: str, value: Any, under: list[Error], path: str, problems: list[str]) -> Any:
    if not under:
        return _adapter(model, name).validate_python(value)
    annotation = model.model_fields[name].annotation
    nested = models_in(annotation)
    if len(nested) != 1:
        return _ABSENT  # a scalar that failed, or a union whose member pydantic chose is not known here
    listed = _is_list(annotation)
    if isinstance(value, dict) and not listed:
        return _rebuild(nested[0], value, under, path, problems)
    if isinstance(value, list) and listed and all(loc and isinstance(loc[0], int) for loc, _ in under):
        items: list[Any] = []
        for i, item in enumerate(value):
            item_errors = [(loc[1:], msg) for loc, msg in under if loc[0] == i]
            rebuilt = (
                nested[0].model_validate(item)
                if not item_errors
                else _rebuild(nested[0], item, item_errors, f"{path}[{i}]", problems)
                if isinstance(item, dict)
                else _ABSENT
            )
            if rebuilt is _ABSENT:
                return _ABSENT
            items.append(rebuilt)
        return items
    return _ABSENT


def _is_list(annotation: Any) -> bool:
    """Whether a field holds a list (of models), optional or not, rather than one model."""
    if typing.get_origin(annotation) is list:
        return True
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return any(_is_list(arg) for arg in typing.get_args(annotation) if arg is not type(None))
    return False


def error_places(err: ValidationError) -> list[Error]:
    """Each error's place, with a validator's own message (the fields it judged) where it raised one."""
    return [
        (tuple(item["loc"]), str(item["msg"]) if item["type"] == "value_error" else "")
        for item in err.errors(include_url=False)
    ]
