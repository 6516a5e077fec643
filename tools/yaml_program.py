"""A Pulumi YAML program that uses this package's components, evaluated under the mock runtime (offline preview).

Pulumi YAML itself needs the Pulumi CLI and its YAML language host; this evaluates the subset a consumer of the
component package writes, the way that host would: `config:` values, `resources:` of this package's component
types (constructed with their `properties`, as the component provider does) and `pulumi:pulumi:StackReference`,
`${…}` references to config, to another resource's property or to a stack reference's output, and `outputs:`.
A stack reference cannot be read offline: its outputs come from the command line (`--stack-output name=value`),
as values the other stack would hold. Anything else in the program (other resource types, functions such as
`fn::invoke`, interpolation inside a longer string) is refused with the line of the program it is on, rather
than previewed wrongly.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pulumi
import yaml
from pulumi.resource import ComponentResource

from gke_tpu_priority.components.provider import PACKAGE_NAME, hosted_components

STACK_REFERENCE = "pulumi:pulumi:StackReference"
_WHOLE = re.compile(r"^\$\{([^}]+)\}$")
_OUTPUT = re.compile(r'^(?P<res>[A-Za-z_][\w-]*)\.outputs(?:\["(?P<key>[^"]+)"\]|\.(?P<dot>\w+))$')
_PROPERTY = re.compile(r"^(?P<res>[A-Za-z_][\w-]*)\.(?P<prop>\w+)$")


class YamlProgramError(ValueError):
    """A program this evaluator cannot preview faithfully; the message names the part of the program."""


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _components() -> dict[str, type[ComponentResource]]:
    return {f"{PACKAGE_NAME}:index:{cls.__name__}": cls for cls in hosted_components()}


def program_body(
    program: Mapping[str, Any], config: Mapping[str, Any], stack_outputs: Mapping[str, Any]
) -> Callable[[], None]:
    """The YAML program as a function the mock runtime runs (`testkit.mock_runtime.run_program(body=...)`)."""
    components = _components()
    declared = set((program.get("config") or {}).keys())

    def body() -> None:
        made: dict[str, Any] = {}

        def resolve(value: Any, where: str) -> Any:
            if isinstance(value, dict):
                if any(k.startswith("fn::") for k in value):
                    raise YamlProgramError(f"{where}: functions ({', '.join(value)}) are not previewed offline")
                return {k: resolve(v, f"{where}.{k}") for k, v in value.items()}
            if isinstance(value, list):
                return [resolve(v, f"{where}[{i}]") for i, v in enumerate(value)]
            if not isinstance(value, str) or "${" not in value:
                return value
            match = _WHOLE.match(value)
            if match is None:
                raise YamlProgramError(f"{where}: {value!r} interpolates inside a string; not previewed offline")
            return reference(match.group(1).strip(), where)

        def reference(expr: str, where: str) -> Any:
            if expr in declared or expr in config:
                if expr not in config:
                    raise YamlProgramError(f"{where}: config {expr!r} has no value; pass --config {expr}=<value>")
                return config[expr]
            if (out := _OUTPUT.match(expr)) is not None:
                key = out.group("key") or out.group("dot")
                if out.group("res") not in made:
                    raise YamlProgramError(f"{where}: {out.group('res')!r} is not a resource declared above")
                if key not in stack_outputs:
                    raise YamlProgramError(
                        f"{where}: the stack reference's output {key!r} is not known offline; "
                        f"pass --stack-output {key}=<the value that stack exports>"
                    )
                return pulumi.Output.from_input(stack_outputs[key])
            if (prop := _PROPERTY.match(expr)) is not None and prop.group("res") in made:
                return getattr(made[prop.group("res")], _snake(prop.group("prop")))
            raise YamlProgramError(f"{where}: ${{{expr}}} refers to nothing this program declares")

        for name, spec in (program.get("resources") or {}).items():
            typ = spec.get("type")
            where = f"resources.{name}"
            if typ == STACK_REFERENCE:
                made[name] = resolve(spec.get("properties", {}), f"{where}.properties")  # read from --stack-output
            elif typ in components:
                props = resolve(spec.get("properties", {}), f"{where}.properties")
                made[name] = components[typ](name, props)
            else:
                raise YamlProgramError(
                    f"{where}: type {typ!r} is not previewed offline (only {PACKAGE_NAME} components and "
                    f"{STACK_REFERENCE}); run `pulumi preview` for it"
                )
        for key, value in (program.get("outputs") or {}).items():
            pulumi.export(key, resolve(value, f"outputs.{key}"))

    return body


def load_program(directory: Path) -> dict[str, Any]:
    data = yaml.safe_load((directory / "Pulumi.yaml").read_text())
    if not isinstance(data, dict):
        raise YamlProgramError(f"{directory / 'Pulumi.yaml'}: not a Pulumi project file")
    return data
