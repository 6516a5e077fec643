"""Check a component's properties, as a YAML or TypeScript consumer writes them, against components/schema.json.

What a consumer in another language gets wrong first: an unknown or misspelt property, a missing required one, a
value outside an enum, a wrong primitive type, or another resource's output where the schema wants a plain value.
Values written `${resource.property}` (Pulumi YAML) or as a TypeScript expression stand for outputs.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

SCHEMA_FILE = Path(__file__).resolve().parent.parent / "components" / "schema.json"
_OUTPUT = re.compile(r"^\$\{[A-Za-z_][\w-]*\.[\w.\[\]\"-]+\}$")
_PRIMITIVES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
}


def load_schema(path: Path = SCHEMA_FILE) -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(path.read_text())
    return schema


def is_output(value: Any) -> bool:
    return isinstance(value, str) and bool(_OUTPUT.match(value))


def check_component(schema: dict[str, Any], token: str, properties: dict[str, Any]) -> list[str]:
    resource = schema["resources"].get(token)
    if resource is None:
        return [f"{token}: not a component of this package ({', '.join(sorted(schema['resources']))})"]
    return _check_object(schema, resource["inputProperties"], resource.get("requiredInputs", []), properties, token)


def _check_object(
    schema: dict[str, Any], props: dict[str, Any], required: list[str], value: Any, path: str
) -> list[str]:
    if not isinstance(value, dict):
        return [f"{path}: expected an object, got {value!r}"]
    problems = [f"{path}.{name}: required" for name in required if name not in value]
    for name, item in value.items():
        if name not in props:
            problems.append(f"{path}.{name}: unknown property (known: {', '.join(sorted(props))})")
        else:
            problems += _check_value(schema, props[name], item, f"{path}.{name}")
    return problems


def _check_value(schema: dict[str, Any], spec: dict[str, Any], value: Any, path: str) -> list[str]:
    if is_output(value):
        if spec.get("plain"):
            return [f"{path}: takes a plain value, not another resource's output {value}"]
        return []
    if "$ref" in spec:
        if not spec["$ref"].startswith("#/types/"):
            return []
        typ = schema["types"][spec["$ref"].removeprefix("#/types/")]
        if "enum" in typ:
            allowed = [m["value"] for m in typ["enum"]]
            return [] if value in allowed else [f"{path}: {value!r} is not one of {', '.join(map(str, allowed))}"]
        return _check_object(schema, typ.get("properties", {}), typ.get("required", []), value, path)
    kind = spec.get("type")
    if kind == "array":
        if not isinstance(value, list):
            return [f"{path}: expected a list, got {value!r}"]
        return [p for i, item in enumerate(value) for p in _check_value(schema, spec["items"], item, f"{path}[{i}]")]
    if kind == "object":
        if not isinstance(value, dict):
            return [f"{path}: expected a map, got {value!r}"]
        inner = spec.get("additionalProperties", {})
        return [p for k, item in value.items() for p in _check_value(schema, inner, item, f"{path}.{k}")]
    if kind in _PRIMITIVES:
        ok = isinstance(value, _PRIMITIVES[kind]) and not (kind != "boolean" and isinstance(value, bool))
        return [] if ok else [f"{path}: expected {kind}, got {value!r}"]
    return []  # pulumi.json#/Any
