"""Shared pydantic base for stack configuration: camelCase in YAML, snake_case in code, typos rejected."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class ConfigModel(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        extra="forbid",
        frozen=True,
        use_enum_values=False,
    )


def problems_error(problems: list[str]) -> ValueError:
    """One ValueError carrying several independent problems, one per line (split again by the formatter)."""
    return ValueError("\n".join(problems))
