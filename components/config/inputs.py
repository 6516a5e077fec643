"""Settings another resource's output may supply: a project id, an existing cluster's name, an existing subnet.

Only values the package passes through to resources accept an output; every value that drives a decision (which
resources exist, how many, with which names) stays plain so the whole plan is validated up front. An output is
checked by the very same pydantic validator (pattern, length) once its value is known, so the message is the same;
while it is unknown (a preview before the producing resource exists) nothing depends on it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import pulumi
from pydantic import ValidationError, ValidationInfo, ValidatorFunctionWrapHandler, WrapValidator

from gke_tpu_priority.components.config.errors import describe


class AcceptsOutput:
    """Marks a field whose value may be a `pulumi.Output` (the component schema types it `Input<string>`)."""


ACCEPTS_OUTPUT = AcceptsOutput()


def _validate_when_known(value: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo) -> Any:
    if not isinstance(value, pulumi.Output):
        return handler(value)
    field = info.field_name

    def check(resolved: Any) -> str:
        try:
            return str(handler(resolved))
        except ValidationError as err:
            raise ValueError(f"{field}: {describe(err.errors()[0])} (got {resolved!r})") from None

    return value.apply(check)


if TYPE_CHECKING:
    InputStr = pulumi.Input[str]
else:
    InputStr = Annotated[str, WrapValidator(_validate_when_known), ACCEPTS_OUTPUT]


def accepts_output(metadata: list[Any]) -> bool:
    return any(isinstance(m, AcceptsOutput) for m in metadata)
