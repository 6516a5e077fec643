"""Validate custom resources offline against their CRDs, the way kube-apiserver does on create.

Why it stays beside `make e2e`: it gives server-side apply's verdict on the pinned CRDs in seconds, without Go,
and the policy and config tests run it on thousands of generated objects e2e never submits.

The API server, for a structural CRD schema, (1) drops fields the schema does not declare ("pruning"),
(2) drops nulls of non-nullable fields, (3) applies schema defaults, (4) validates the OpenAPI schema,
list-type invariants and ObjectMeta, and (5) evaluates every ``x-kubernetes-validations`` CEL rule on the
defaulted object, unless step 4 found a type error. This module does the same and reports what step 1
and 2 would silently drop as ``pruned`` so tests can demand that nothing is lost.

Public API: :class:`CrdCatalog`, :class:`ValidationResult`, :func:`default_catalog`, :func:`validate`,
:func:`assert_valid`. CLI: ``python -m tests.support.crd_validation --crds DIR ... FILE.yaml``.
"""

from __future__ import annotations

import argparse
import base64
import copy
import datetime as dt
import enum
import functools
import itertools
import math
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import celpy
import lark
import yaml
from celpy import celtypes
from celpy.adapter import json_to_cel
from celpy.evaluation import CELEvalError, base_functions

_YAML_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

PathPart = str | int
FieldPath = tuple[PathPart, ...]
Schema = Mapping[str, Any]


def render_path(path: FieldPath) -> str:
    """Render a path the way Kubernetes' field.Path does: ``spec.groups[0].labels[app]``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif out and _is_map_key(part):
            out += f"[{part[1:-1]}]"
        else:
            out += f".{part}" if out else part
    return out or "<root>"


def _is_map_key(part: str) -> bool:
    return part.startswith("[") and part.endswith("]")


def _map_key(key: str) -> str:
    """Mark a path element as a map key (rendered as ``[key]``) rather than a declared field."""
    return f"[{key}]"


# --------------------------------------------------------------------------------------------------------
# Result types


class ErrorType(enum.StrEnum):
    """Error categories, named after k8s.io/apimachinery field.ErrorType."""

    TYPE_INVALID = "Invalid type"
    REQUIRED = "Required value"
    NOT_SUPPORTED = "Unsupported value"
    INVALID = "Invalid value"
    DUPLICATE = "Duplicate value"
    TOO_LONG = "Too long"
    TOO_MANY = "Too many"
    FORBIDDEN = "Forbidden"


@dataclass(frozen=True)
class FieldError:
    """One validation failure at a field path."""

    path: str
    type: ErrorType
    detail: str

    def __str__(self) -> str:
        return f"{self.path}: {self.type.value}: {self.detail}" if self.detail else f"{self.path}: {self.type}"


@dataclass(frozen=True)
class PrunedField:
    """A field the API server would silently drop."""

    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: pruned ({self.reason})"


@dataclass(frozen=True)
class ValidationResult:
    """Outcome of validating one object; ``ok`` means no errors and nothing pruned."""

    api_version: str
    kind: str
    name: str
    errors: tuple[FieldError, ...]
    pruned: tuple[PrunedField, ...]

    @property
    def ok(self) -> bool:
        return not self.errors and not self.pruned

    @property
    def error_paths(self) -> list[str]:
        return [e.path for e in self.errors]

    @property
    def pruned_paths(self) -> list[str]:
        return [p.path for p in self.pruned]

    def describe(self) -> str:
        head = f"{self.kind}/{self.name} ({self.api_version})"
        if self.ok:
            return f"{head}: valid"
        lines = [f"{head}: {len(self.errors)} error(s), {len(self.pruned)} pruned field(s)"]
        lines += [f"  error  {e}" for e in self.errors]
        lines += [f"  pruned {p}" for p in self.pruned]
        return "\n".join(lines)


class UnknownKindError(LookupError):
    """The catalog has no served CRD version for an object's apiVersion and kind."""


class UnsupportedCelFunctionError(RuntimeError):
    """A CRD rule calls a CEL function this validator does not implement; never treated as a pass."""


# --------------------------------------------------------------------------------------------------------
# CRD catalog


@dataclass(frozen=True)
class CrdVersion:
    """One served version of a CRD."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    storage: bool
    deprecated: bool
    schema: Schema
    source: Path

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"


@functools.cache
def _load_crd_document(path: Path, mtime_ns: int) -> Mapping[str, Any]:
    del mtime_ns  # part of the cache key only, so an edited file is re-read
    with path.open(encoding="utf-8") as handle:
        return cast(Mapping[str, Any], yaml.load(handle, Loader=_YAML_LOADER))


@functools.cache
def _read_crd_header(path: Path, mtime_ns: int) -> tuple[str, str]:
    """(group, kind) from the part of the file before ``versions:``; avoids parsing 1.4 MB schemas."""
    del mtime_ns
    text = path.read_text(encoding="utf-8")
    cut = text.find("\n  versions:")
    header = yaml.load(text if cut < 0 else text[:cut], Loader=_YAML_LOADER)
    if not isinstance(header, dict) or header.get("kind") != "CustomResourceDefinition":
        return ("", "")
    spec = header["spec"]
    return (str(spec["group"]), str(spec["names"]["kind"]))


class CrdCatalog:
    """CRDs from one or more directories, indexed by (group, kind); schemas are parsed on first use."""

    def __init__(
        self, directories: Iterable[str | os.PathLike[str]] = (), files: Iterable[str | os.PathLike[str]] = ()
    ) -> None:
        """CRDs from every YAML file in ``directories`` plus the given ``files``."""
        self.directories = tuple(Path(d) for d in directories)
        self._files: dict[tuple[str, str], Path] = {}
        self._parsed: set[Path] = set()
        paths: list[Path] = []
        for directory in self.directories:
            if not directory.is_dir():
                raise FileNotFoundError(f"CRD directory {directory} does not exist")
            paths += sorted([*directory.glob("*.yaml"), *directory.glob("*.yml")])
        paths += [Path(f) for f in files]
        self._sources = self.directories or tuple(dict.fromkeys(p.parent for p in paths))
        for path in paths:
            key = _read_crd_header(path, path.stat().st_mtime_ns)
            if not key[0]:
                continue
            if key in self._files:
                raise ValueError(
                    f"{key[1]}.{key[0]} is defined twice ({self._files[key]} and {path}); "
                    "load one Kueue release directory at a time"
                )
            self._files[key] = path

    def group_kinds(self) -> list[tuple[str, str]]:
        return sorted(self._files)

    def versions(self, group: str, kind: str) -> list[CrdVersion]:
        """Every served version of a kind."""
        path = self._files.get((group, kind))
        if path is None:
            raise UnknownKindError(f"no CRD for kind {kind!r} in group {group!r} in {self._dirs_text()}")
        document = _load_crd_document(path, path.stat().st_mtime_ns)
        self._parsed.add(path)
        spec = document["spec"]
        return [
            CrdVersion(
                group=group,
                version=str(v["name"]),
                kind=kind,
                plural=str(spec["names"]["plural"]),
                namespaced=spec["scope"] == "Namespaced",
                storage=bool(v.get("storage")),
                deprecated=bool(v.get("deprecated")),
                schema=v["schema"]["openAPIV3Schema"],
                source=path,
            )
            for v in spec["versions"]
            if v.get("served")
        ]

    @property
    def parsed_files(self) -> list[Path]:
        """CRD files whose schemas this catalog has parsed so far (loading is lazy)."""
        return sorted(self._parsed)

    def lookup(self, api_version: str, kind: str) -> CrdVersion:
        """The served version matching ``apiVersion`` (``group/version``) and ``kind``."""
        group, _, version = api_version.rpartition("/")
        served = self.versions(group, kind)
        for candidate in served:
            if candidate.version == version:
                return candidate
        names = ", ".join(v.version for v in served)
        raise UnknownKindError(f"{kind} in {group} is not served at version {version!r}; served: {names}")

    def knows(self, api_version: str, kind: str) -> bool:
        group = api_version.rpartition("/")[0]
        return (group, kind) in self._files

    def validate(self, obj: Mapping[str, Any], old: Mapping[str, Any] | None = None) -> ValidationResult:
        """Validate ``obj`` as a create (or as an update of ``old``, which enables transition rules)."""
        api_version, kind = str(obj.get("apiVersion", "")), str(obj.get("kind", ""))
        crd = self.lookup(api_version, kind)
        return validate_against(crd, obj, old)

    def _dirs_text(self) -> str:
        return ", ".join(str(d) for d in self._sources)


def default_crd_files() -> list[Path]:
    """The locked Kueue v0.19.2 and JobSet v0.12.0 CRD files, digest-checked (see tools/upstream.py)."""
    from tests.support import upstream_data

    return [
        *upstream_data.reference_files(upstream_data.KUEUE_CRDS),
        *upstream_data.reference_files(upstream_data.JOBSET_CRDS),
    ]


@functools.cache
def default_catalog() -> CrdCatalog:
    """Kueue v0.19.2 and JobSet v0.12.0, cached for the process."""
    return CrdCatalog(files=default_crd_files())


def validate(obj: Mapping[str, Any], catalog: CrdCatalog | None = None) -> ValidationResult:
    """Validate one object against the default (or given) catalog."""
    return (catalog or default_catalog()).validate(obj)


def assert_valid(obj: Mapping[str, Any], catalog: CrdCatalog | None = None) -> ValidationResult:
    """Fail (AssertionError listing every error and pruned field) unless ``obj`` is fully valid."""
    result = validate(obj, catalog)
    assert result.ok, result.describe()
    return result


def validate_manifest(
    obj: Mapping[str, Any], catalog: CrdCatalog | None = None, kube_version: str | None = None
) -> ValidationResult:
    """CRD kinds against the catalog, anything else against kubernetes-validate's strict schemas."""
    catalog = catalog or default_catalog()
    if catalog.knows(str(obj.get("apiVersion", "")), str(obj.get("kind", ""))):
        return catalog.validate(obj)
    from tests.support import kube_schemas  # lazy: loads large schema files

    return kube_schemas.validate_builtin(obj, kube_version or kube_schemas.KUBERNETES_VERSION)


def assert_manifest_valid(obj: Mapping[str, Any], catalog: CrdCatalog | None = None) -> ValidationResult:
    """Like :func:`assert_valid`, but built-in kinds are accepted too (validated strictly)."""
    result = validate_manifest(obj, catalog)
    assert result.ok, result.describe()
    return result


# --------------------------------------------------------------------------------------------------------
# ObjectMeta


_OBJECT_META_FIELDS = frozenset(
    {
        "name",
        "generateName",
        "namespace",
        "selfLink",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "labels",
        "annotations",
        "ownerReferences",
        "finalizers",
        "managedFields",
    }
)
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUALIFIED_NAME_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_ANNOTATIONS_MAX_BYTES = 256 * 1024


def dns1123_subdomain_problem(value: str) -> str | None:
    if len(value) > 253:
        return "must be no more than 253 characters"
    if not _DNS1123_SUBDOMAIN.match(value):
        return (
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
            "and must start and end with an alphanumeric character"
        )
    return None


def dns1123_label_problem(value: str) -> str | None:
    if len(value) > 63:
        return "must be no more than 63 characters"
    if not _DNS1123_LABEL.match(value):
        return (
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
            "and must start and end with an alphanumeric character"
        )
    return None


def qualified_name_problem(value: str) -> str | None:
    prefix, slash, name = value.rpartition("/")
    if slash and (not prefix or dns1123_subdomain_problem(prefix)):
        return f"prefix part of {value!r} must be a DNS subdomain"
    if not name or len(name) > 63 or not _QUALIFIED_NAME_PART.match(name):
        return (
            f"name part of {value!r} must be at most 63 characters of alphanumerics, '-', '_' or '.', "
            "starting and ending with an alphanumeric character"
        )
    return None


def label_value_problem(value: str) -> str | None:
    if len(value) > 63 or not _LABEL_VALUE.match(value):
        return "must be at most 63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric"
    return None


@dataclass
class Findings:
    """Accumulates errors and pruned fields during one validation."""

    errors: list[FieldError] = field(default_factory=list)
    pruned: list[PrunedField] = field(default_factory=list)

    def error(self, path: FieldPath, kind: ErrorType, detail: str) -> None:
        self.errors.append(FieldError(render_path(path), kind, detail))

    def prune(self, path: FieldPath, reason: str) -> None:
        self.pruned.append(PrunedField(render_path(path), reason))


def check_object_meta(
    meta: Any, path: FieldPath, findings: Findings, *, namespaced: bool | None, name_required: bool
) -> None:
    """ObjectMeta checks the API server applies to every object (and to embedded resources)."""
    if not isinstance(meta, dict):
        findings.error(path, ErrorType.TYPE_INVALID, "metadata must be an object")
        return
    name, generate_name = meta.get("name"), meta.get("generateName")
    if name_required and not name and not generate_name:
        findings.error((*path, "name"), ErrorType.REQUIRED, "name or generateName is required")
    if name is not None:
        if not isinstance(name, str):
            findings.error((*path, "name"), ErrorType.TYPE_INVALID, "must be a string")
        elif problem := dns1123_subdomain_problem(name):
            findings.error((*path, "name"), ErrorType.INVALID, f"{name!r}: {problem}")
    namespace = meta.get("namespace")
    if namespaced is True and not namespace:
        findings.error((*path, "namespace"), ErrorType.REQUIRED, "a namespaced kind needs metadata.namespace")
    elif namespaced is False and namespace:
        findings.prune((*path, "namespace"), "the kind is cluster-scoped, so the API server clears it")
    elif isinstance(namespace, str) and namespace and (problem := dns1123_label_problem(namespace)):
        findings.error((*path, "namespace"), ErrorType.INVALID, f"{namespace!r}: {problem}")
    for map_field in ("labels", "annotations"):
        values = meta.get(map_field)
        if values is None:
            continue
        if not isinstance(values, dict):
            findings.error((*path, map_field), ErrorType.TYPE_INVALID, "must be a map of string to string")
            continue
        for key, value in values.items():
            key_path = (*path, map_field, _map_key(str(key)))
            if problem := qualified_name_problem(str(key)):
                findings.error(key_path, ErrorType.INVALID, problem)
            if not isinstance(value, str):
                findings.error(key_path, ErrorType.TYPE_INVALID, f"value {value!r} must be a string")
            elif map_field == "labels" and (problem := label_value_problem(value)):
                findings.error(key_path, ErrorType.INVALID, f"{value!r}: {problem}")
        if map_field == "annotations":
            size = sum(len(str(k)) + len(str(v)) for k, v in values.items())
            if size > _ANNOTATIONS_MAX_BYTES:
                findings.error((*path, map_field), ErrorType.TOO_LONG, f"total size {size} > 262144 bytes")
    for key in meta:
        if key not in _OBJECT_META_FIELDS:
            findings.prune((*path, key), "not an ObjectMeta field")


# --------------------------------------------------------------------------------------------------------
# Pruning and defaulting (steps 1-3)


_DROP = object()


def _schema_type(schema: Schema) -> str | None:
    value = schema.get("type")
    return str(value) if value is not None else None


def _prune(value: Any, schema: Schema, path: FieldPath, findings: Findings, *, root: bool = False) -> Any:
    """Copy of ``value`` without the fields the API server drops; records each of them."""
    if isinstance(value, dict):
        return _prune_object(value, schema, path, findings, root=root)
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        return [_prune(item, schema["items"], (*path, i), findings) for i, item in enumerate(value)]
    return copy.deepcopy(value)


def _prune_object(
    value: dict[str, Any], schema: Schema, path: FieldPath, findings: Findings, *, root: bool
) -> dict[str, Any]:
    properties: Mapping[str, Schema] = schema.get("properties", {})
    additional = schema.get("additionalProperties")
    preserve = bool(schema.get("x-kubernetes-preserve-unknown-fields"))
    embedded = root or bool(schema.get("x-kubernetes-embedded-resource"))
    out: dict[str, Any] = {}
    for key, item in value.items():
        item_path = (
            *path,
            key if key in properties or not isinstance(additional, Mapping) else _map_key(key),
        )
        if embedded and key in ("apiVersion", "kind") and key not in properties:
            out[key] = item
        elif embedded and key == "metadata" and not schema.get("properties", {}).get("metadata", {}).get("properties"):
            out[key] = copy.deepcopy(item)  # checked as ObjectMeta later
        elif key in properties:
            sub = properties[key]
            if item is None and not sub.get("nullable"):
                findings.prune(item_path, "null for a non-nullable field is dropped before defaulting")
                continue
            out[key] = _prune(item, sub, item_path, findings)
        elif isinstance(additional, Mapping):
            if item is None and not additional.get("nullable"):
                findings.prune(item_path, "null for a non-nullable map value is dropped")
                continue
            out[key] = _prune(item, additional, item_path, findings)
        elif additional is True or preserve:
            out[key] = copy.deepcopy(item)
        else:
            findings.prune(item_path, "field not declared in the schema")
    return out


def _apply_defaults(value: Any, schema: Schema) -> None:
    """Fill absent fields that declare ``default`` (in place), top-down like structural defaulting."""
    if isinstance(value, dict):
        properties: Mapping[str, Schema] = schema.get("properties", {})
        for key, sub in properties.items():
            if key not in value and "default" in sub:
                value[key] = copy.deepcopy(sub["default"])
        for key, item in value.items():
            if key in properties:
                _apply_defaults(item, properties[key])
            elif isinstance(schema.get("additionalProperties"), Mapping):
                _apply_defaults(item, schema["additionalProperties"])
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for item in value:
            _apply_defaults(item, schema["items"])


# --------------------------------------------------------------------------------------------------------
# OpenAPI schema validation (step 4)


_INT_RANGES = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}
_UUID = re.compile(r"^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$")


def _date_time_ok(value: str) -> bool:
    try:
        dt.datetime.fromisoformat(value)
    except ValueError:
        return False
    return "T" in value.upper() or " " in value


def _byte_ok(value: str) -> bool:
    try:
        base64.b64decode(value, validate=True)
    except ValueError:
        return False
    return True


_STRING_FORMATS: dict[str, Callable[[str], bool]] = {
    "date-time": _date_time_ok,
    "date": lambda v: bool(re.fullmatch(r"\d{4}-\d{2}-\d{2}", v)) and _date_time_ok(v + "T00:00:00Z"),
    "byte": _byte_ok,
    "uuid": lambda v: bool(_UUID.match(v)),
}


@functools.cache
def _compiled_pattern(pattern: str) -> re.Pattern[str]:
    # Go RE2 and Python re agree on the constructs CRDs use; `\z` is RE2's end-of-text. RE2 also takes a flag group
    # such as `(?i)` mid-pattern (AdmissionCheck's `parameters.kind` is `^(?i)[a-z]...$`), applying it to the rest of
    # the enclosing group; Python wants global flags first, so a top-level one becomes a scoped group to the end.
    pattern = pattern.replace(r"\z", r"\Z")
    flags = re.search(r"\(\?([a-zA-Z]+)\)", pattern)
    if flags is not None and flags.start() > 0:
        pattern = f"{pattern[: flags.start()]}(?{flags.group(1)}:{pattern[flags.end() :]})"
    return re.compile(pattern)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _same_json_value(a: Any, b: Any) -> bool:
    """Equality without Python's ``True == 1`` and ``1 == 1.0`` conflations."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return bool(a == b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_json_value(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_json_value(a[k], b[k]) for k in a)
    return type(a) is type(b) and bool(a == b)


@dataclass
class _SchemaValidator:
    findings: Findings
    integral_floats_are_integers: bool

    def is_integer(self, value: Any) -> bool:
        if isinstance(value, bool):
            return False
        if isinstance(value, int):
            return True
        return self.integral_floats_are_integers and isinstance(value, float) and value.is_integer()

    def type_matches(self, value: Any, expected: str) -> bool:
        if expected == "integer":
            return self.is_integer(value)
        if expected == "number":
            return isinstance(value, int | float) and not isinstance(value, bool)
        return _json_type(value) == expected

    def check(self, value: Any, schema: Schema, path: FieldPath) -> None:
        err = self.findings.error
        if value is None:
            if not schema.get("nullable"):
                err(path, ErrorType.TYPE_INVALID, "must not be null")
            return
        if schema.get("x-kubernetes-int-or-string"):
            if not (self.is_integer(value) or isinstance(value, str)):
                err(path, ErrorType.TYPE_INVALID, f"{_json_type(value)}: must be an integer or a string")
                return
        elif (expected := _schema_type(schema)) and not self.type_matches(value, expected):
            err(path, ErrorType.TYPE_INVALID, f"{_json_type(value)} {value!r:.60}: must be of type {expected}")
            return
        self.check_value_constraints(value, schema, path)
        for keyword in ("allOf", "anyOf", "oneOf", "not"):
            if keyword in schema:
                self.check_combinator(keyword, schema[keyword], value, path)
        if isinstance(value, dict):
            self.check_object(value, schema, path)
        elif isinstance(value, list):
            self.check_array(value, schema, path)

    def check_value_constraints(self, value: Any, schema: Schema, path: FieldPath) -> None:
        err = self.findings.error
        if "enum" in schema and not any(_same_json_value(value, allowed) for allowed in schema["enum"]):
            supported = ", ".join(repr(v) for v in schema["enum"])
            err(path, ErrorType.NOT_SUPPORTED, f"{value!r}: supported values: {supported}")
        if isinstance(value, str):
            self.check_string(value, schema, path)
        elif isinstance(value, int | float) and not isinstance(value, bool):
            self.check_number(value, schema, path)

    def check_string(self, value: str, schema: Schema, path: FieldPath) -> None:
        err = self.findings.error
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            err(path, ErrorType.TOO_LONG, f"may not be longer than {schema['maxLength']}")
        if "minLength" in schema and len(value) < schema["minLength"]:
            err(path, ErrorType.INVALID, f"{value!r}: should be at least {schema['minLength']} chars long")
        if "pattern" in schema and not _compiled_pattern(schema["pattern"]).search(value):
            err(path, ErrorType.INVALID, f"{value!r}: should match {schema['pattern']!r}")
        checker = _STRING_FORMATS.get(str(schema.get("format", "")))
        if checker and not checker(value):
            err(path, ErrorType.INVALID, f"{value!r}: must be in {schema['format']} format")

    def check_number(self, value: float, schema: Schema, path: FieldPath) -> None:
        err = self.findings.error
        bounds = _INT_RANGES.get(str(schema.get("format", "")))
        if bounds and not bounds[0] <= value <= bounds[1]:
            err(path, ErrorType.INVALID, f"{value}: out of range for format {schema['format']}")
        if "minimum" in schema:
            low, exclusive = schema["minimum"], bool(schema.get("exclusiveMinimum"))
            if value < low or (exclusive and value == low):
                err(path, ErrorType.INVALID, f"{value}: should be {'>' if exclusive else '>='} {low}")
        if "maximum" in schema:
            high, exclusive = schema["maximum"], bool(schema.get("exclusiveMaximum"))
            if value > high or (exclusive and value == high):
                err(path, ErrorType.INVALID, f"{value}: should be {'<' if exclusive else '<='} {high}")
        if "multipleOf" in schema and not math.isclose(math.remainder(value, schema["multipleOf"]), 0.0):
            err(path, ErrorType.INVALID, f"{value}: should be a multiple of {schema['multipleOf']}")

    def check_combinator(self, keyword: str, subs: Any, value: Any, path: FieldPath) -> None:
        def passes(sub: Schema) -> bool:
            probe = _SchemaValidator(Findings(), self.integral_floats_are_integers)
            probe.check(value, sub, path)
            return not probe.findings.errors

        err = self.findings.error
        if keyword == "not":
            if passes(subs):
                err(path, ErrorType.INVALID, "must not validate the schema (not)")
            return
        results = [passes(sub) for sub in subs]
        if keyword == "allOf" and not all(results):
            err(path, ErrorType.INVALID, "must validate all the schemas (allOf)")
        elif keyword == "anyOf" and not any(results):
            err(path, ErrorType.INVALID, "must validate at least one schema (anyOf)")
        elif keyword == "oneOf" and sum(results) != 1:
            err(path, ErrorType.INVALID, "must validate one and only one schema (oneOf)")

    def check_object(self, value: dict[str, Any], schema: Schema, path: FieldPath) -> None:
        err = self.findings.error
        for required in schema.get("required", []):
            if required not in value:
                err((*path, required), ErrorType.REQUIRED, "")
        if "maxProperties" in schema and len(value) > schema["maxProperties"]:
            err(path, ErrorType.TOO_MANY, f"{len(value)}: must have at most {schema['maxProperties']} items")
        if "minProperties" in schema and len(value) < schema["minProperties"]:
            err(path, ErrorType.INVALID, f"must have at least {schema['minProperties']} properties")
        properties: Mapping[str, Schema] = schema.get("properties", {})
        additional = schema.get("additionalProperties")
        if schema.get("x-kubernetes-embedded-resource"):
            self.check_embedded(value, path)
        for key, item in value.items():
            if key in properties:
                self.check(item, properties[key], (*path, key))
            elif isinstance(additional, Mapping):
                self.check(item, additional, (*path, _map_key(key)))

    def check_embedded(self, value: dict[str, Any], path: FieldPath) -> None:
        for key in ("apiVersion", "kind"):
            if not isinstance(value.get(key), str) or not value[key]:
                self.findings.error((*path, key), ErrorType.REQUIRED, "an embedded resource needs it")
        if "metadata" in value:
            check_object_meta(
                value["metadata"], (*path, "metadata"), self.findings, namespaced=None, name_required=False
            )

    def check_array(self, value: list[Any], schema: Schema, path: FieldPath) -> None:
        err = self.findings.error
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            err(path, ErrorType.TOO_MANY, f"{len(value)}: must have at most {schema['maxItems']} items")
        if "minItems" in schema and len(value) < schema["minItems"]:
            err(path, ErrorType.INVALID, f"should have at least {schema['minItems']} items")
        items = schema.get("items")
        if isinstance(items, Mapping):
            for index, item in enumerate(value):
                self.check(item, items, (*path, index))
        list_type = schema.get("x-kubernetes-list-type")
        if list_type == "map":
            self.check_list_map(value, list(schema.get("x-kubernetes-list-map-keys", [])), path)
        elif list_type == "set" or schema.get("uniqueItems"):
            for index, item in enumerate(value):
                if any(_same_json_value(item, earlier) for earlier in value[:index]):
                    err((*path, index), ErrorType.DUPLICATE, repr(item))

    def check_list_map(self, value: list[Any], keys: list[str], path: FieldPath) -> None:
        seen: list[tuple[Any, ...]] = []
        for index, item in enumerate(value):
            if not isinstance(item, dict):
                continue
            for key in keys:
                if key not in item:
                    self.findings.error((*path, index, key), ErrorType.REQUIRED, "list-map key")
            key_value = tuple(item.get(k) for k in keys)
            if any(all(_same_json_value(a, b) for a, b in zip(key_value, s, strict=True)) for s in seen):
                shown = ", ".join(f"{k}={v!r}" for k, v in zip(keys, key_value, strict=True))
                self.findings.error((*path, index), ErrorType.DUPLICATE, f"map key {{{shown}}}")
            seen.append(key_value)


# --------------------------------------------------------------------------------------------------------
# CEL (step 5)


_CEL_MACROS = frozenset({"has", "all", "exists", "exists_one", "filter", "map"})


def _cel_is_sorted(values: Sequence[Any]) -> celtypes.BoolType:
    return celtypes.BoolType(all(a <= b for a, b in itertools.pairwise(values)))


def _cel_sum(values: Sequence[Any]) -> Any:
    total: Any = celtypes.IntType(0)
    for item in values:
        total = item if total == 0 and not isinstance(item, celtypes.IntType) else total + item
    return total


def _cel_index_of(target: Any, needle: Any) -> celtypes.IntType:
    if isinstance(target, str):
        return celtypes.IntType(target.find(needle))
    return celtypes.IntType(next((i for i, v in enumerate(target) if v == needle), -1))


def _cel_last_index_of(target: Any, needle: Any) -> celtypes.IntType:
    if isinstance(target, str):
        return celtypes.IntType(target.rfind(needle))
    return celtypes.IntType(next((i for i in range(len(target) - 1, -1, -1) if target[i] == needle), -1))


# Kubernetes CEL library functions (k8s.io/apiserver/pkg/cel/library) that celpy lacks. Only those are
# implemented whose semantics are simple and exact; anything else named in a rule is an explicit error.
_KUBERNETES_CEL_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "isSorted": _cel_is_sorted,
    "sum": _cel_sum,
    "min": lambda values: min(values),
    "max": lambda values: max(values),
    "indexOf": _cel_index_of,
    "lastIndexOf": _cel_last_index_of,
    "lowerAscii": lambda s: celtypes.StringType(s.lower()),
    "upperAscii": lambda s: celtypes.StringType(s.upper()),
    "trim": lambda s: celtypes.StringType(s.strip()),
    "join": lambda values, sep="": celtypes.StringType(str(sep).join(values)),
    "split": lambda s, sep: celtypes.ListType([celtypes.StringType(p) for p in s.split(sep)]),
    # Standard CEL, missing from celpy's function table: a type-checker hint, the identity at run time.
    "dyn": lambda value: value,
}
_SUPPORTED_CEL_FUNCTIONS = frozenset(base_functions) | _CEL_MACROS | frozenset(_KUBERNETES_CEL_FUNCTIONS)


@dataclass(frozen=True)
class _CompiledRule:
    rule: str
    program: celpy.Runner
    uses_old_self: bool
    message_program: celpy.Runner | None


def _called_functions(tree: lark.Tree[Any]) -> Iterator[str]:
    for node in tree.iter_subtrees():
        if node.data == "ident_arg" and node.children:
            yield str(node.children[0])
        elif node.data == "member_dot_arg" and len(node.children) > 1:
            yield str(node.children[1])


def _references_old_self(tree: lark.Tree[Any]) -> bool:
    return any(node.data == "ident" and str(node.children[0]) == "oldSelf" for node in tree.iter_subtrees())


@functools.cache
def _cel_environment() -> celpy.Environment:
    return celpy.Environment()


@functools.cache
def compile_rule(rule: str, message_expression: str | None = None) -> _CompiledRule:
    """Compile a rule once; unsupported functions raise UnsupportedCelFunctionError here, not at runtime."""
    env = _cel_environment()
    tree = env.compile(rule)
    message_tree = env.compile(message_expression) if message_expression else None
    for expression, parsed in ((rule, tree), (message_expression, message_tree)):
        if parsed is None:
            continue
        unsupported = sorted(set(_called_functions(parsed)) - _SUPPORTED_CEL_FUNCTIONS)
        if unsupported:
            raise UnsupportedCelFunctionError(
                f"CEL expression {expression!r} calls {', '.join(unsupported)}, which this validator "
                "does not implement; add it to _KUBERNETES_CEL_FUNCTIONS in tests/support/crd_validation.py"
            )
    return _CompiledRule(
        rule=rule,
        program=env.program(tree, functions=_KUBERNETES_CEL_FUNCTIONS),
        uses_old_self=_references_old_self(tree),
        message_program=env.program(message_tree, functions=_KUBERNETES_CEL_FUNCTIONS) if message_tree else None,
    )


def to_cel(value: Any, schema: Schema) -> Any:
    """Convert JSON to CEL values following the schema (integers stay ints, date-time becomes timestamp)."""
    if value is None:
        return None
    if isinstance(value, dict):
        properties: Mapping[str, Schema] = schema.get("properties", {})
        additional = schema.get("additionalProperties")
        return celtypes.MapType(
            {
                celtypes.StringType(k): to_cel(
                    v, properties.get(k) or (additional if isinstance(additional, Mapping) else {})
                )
                for k, v in value.items()
            }
        )
    if isinstance(value, list):
        items = schema.get("items")
        return celtypes.ListType([to_cel(v, items if isinstance(items, Mapping) else {}) for v in value])
    if isinstance(value, float) and value.is_integer() and _schema_type(schema) == "integer":
        return celtypes.IntType(int(value))
    if isinstance(value, str) and schema.get("format") == "date-time" and _date_time_ok(value):
        return celtypes.TimestampType(value)
    return json_to_cel(value)


_RULE_REASONS = {
    "FieldValueInvalid": ErrorType.INVALID,
    "FieldValueForbidden": ErrorType.FORBIDDEN,
    "FieldValueRequired": ErrorType.REQUIRED,
    "FieldValueDuplicate": ErrorType.DUPLICATE,
}


@dataclass
class _CelValidator:
    findings: Findings

    def walk(self, value: Any, old: Any, schema: Schema, path: FieldPath) -> None:
        if value is None:
            return
        if isinstance(value, dict):
            properties: Mapping[str, Schema] = schema.get("properties", {})
            additional = schema.get("additionalProperties")
            old_map = old if isinstance(old, dict) else {}
            for key, item in value.items():
                if key in properties:
                    self.walk(item, old_map.get(key), properties[key], (*path, key))
                elif isinstance(additional, Mapping):
                    self.walk(item, old_map.get(key), additional, (*path, _map_key(key)))
        elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
            for index, item in enumerate(value):
                self.walk(item, _correlated_item(item, old, schema), schema["items"], (*path, index))
        for rule in schema.get("x-kubernetes-validations", []):
            self.evaluate(rule, value, old, schema, path)

    def evaluate(self, rule: Mapping[str, Any], value: Any, old: Any, schema: Schema, path: FieldPath) -> None:
        compiled = compile_rule(str(rule["rule"]), rule.get("messageExpression"))
        optional_old = bool(rule.get("optionalOldSelf"))
        if compiled.uses_old_self and old is None and not optional_old:
            return  # a transition rule: the API server only runs it on update
        activation: dict[str, Any] = {"self": to_cel(value, schema)}
        if compiled.uses_old_self:
            activation["oldSelf"] = to_cel(old, schema)
        target = (*path, *_field_path_parts(rule.get("fieldPath")))
        try:
            outcome = compiled.program.evaluate(activation)
        except CELEvalError as error:
            self.findings.error(target, ErrorType.INVALID, f"rule {compiled.rule!r} failed to evaluate: {error}")
            return
        if not isinstance(outcome, celtypes.BoolType):
            detail = f"rule {compiled.rule!r} failed to evaluate to a bool: {outcome!r:.200}"
            self.findings.error(target, ErrorType.INVALID, detail)
        elif not outcome:
            kind = _RULE_REASONS.get(str(rule.get("reason", "")), ErrorType.INVALID)
            self.findings.error(target, kind, self.message(rule, compiled, activation))

    @staticmethod
    def message(rule: Mapping[str, Any], compiled: _CompiledRule, activation: dict[str, Any]) -> str:
        if compiled.message_program is not None:
            try:
                text = compiled.message_program.evaluate(activation)
                if isinstance(text, str) and text:
                    return str(text)
            except CELEvalError:
                pass  # the API server falls back to `message` too
        return str(rule.get("message") or f"failed rule: {compiled.rule}")


def _field_path_parts(field_path: Any) -> FieldPath:
    if not field_path:
        return ()
    parts: list[PathPart] = []
    for token in re.findall(r"\.([A-Za-z0-9_]+)|\[['\"]?([^\]'\"]+)['\"]?\]", str(field_path)):
        if token[0]:
            parts.append(token[0])
        else:
            parts.append(int(token[1]) if token[1].isdigit() else _map_key(token[1]))
    return tuple(parts)


def _correlated_item(item: Any, old: Any, schema: Schema) -> Any:
    """The old list element an item corresponds to; only list-maps correlate, like the API server."""
    if not isinstance(old, list) or schema.get("x-kubernetes-list-type") != "map" or not isinstance(item, dict):
        return None
    keys = schema.get("x-kubernetes-list-map-keys", [])
    for candidate in old:
        if isinstance(candidate, dict) and all(candidate.get(k) == item.get(k) for k in keys):
            return candidate
    return None


# --------------------------------------------------------------------------------------------------------
# Orchestration


# apiextensions-apiserver's hasBlockingErr: these schema errors mean the object lacks the shape the CEL
# rules were written for, so the rules are skipped with one summary error.
_CEL_BLOCKING_ERRORS = frozenset(
    {
        ErrorType.NOT_SUPPORTED,
        ErrorType.REQUIRED,
        ErrorType.TOO_LONG,
        ErrorType.TOO_MANY,
        ErrorType.TYPE_INVALID,
    }
)


def validate_against(
    crd: CrdVersion,
    obj: Mapping[str, Any],
    old: Mapping[str, Any] | None = None,
    *,
    integral_floats_are_integers: bool = True,
) -> ValidationResult:
    """Validate ``obj`` against one CRD version.

    ``integral_floats_are_integers`` accepts ``1000.0`` for integer fields: Pulumi hands numbers to
    policies and mocks as floats, and pulumi-kubernetes encodes an integral float as ``1000`` on the wire.
    """
    findings = Findings()
    schema = crd.schema
    pruned = _prune(dict(obj), schema, (), findings, root=True)
    _apply_defaults(pruned, schema)
    check_object_meta(pruned.get("metadata"), ("metadata",), findings, namespaced=crd.namespaced, name_required=True)
    meta_schema = schema.get("properties", {}).get("metadata", {})
    if meta_schema.get("properties") and isinstance(pruned.get("metadata"), dict):
        # Only name/generateName constraints are allowed on root metadata; the rest is ObjectMeta's.
        _SchemaValidator(findings, integral_floats_are_integers).check(
            {k: v for k, v in pruned["metadata"].items() if k in ("name", "generateName")},
            {**meta_schema, "required": []},
            ("metadata",),
        )
    # metadata was checked as ObjectMeta above; the root schema only says `type: object` for it.
    body = {k: v for k, v in pruned.items() if k != "metadata"}
    body_schema = {
        **schema,
        "properties": {k: v for k, v in schema.get("properties", {}).items() if k != "metadata"},
    }
    schema_errors_start = len(findings.errors)
    _SchemaValidator(findings, integral_floats_are_integers).check(body, body_schema, ())
    if any(e.type in _CEL_BLOCKING_ERRORS for e in findings.errors[schema_errors_start:]):
        findings.error(
            (),
            ErrorType.INVALID,
            "some validation rules were not checked because the object was invalid; "
            "correct the existing errors to complete validation",
        )
    else:
        old_pruned = None if old is None else _prune(dict(old), schema, (), Findings(), root=True)
        if old_pruned is not None:
            _apply_defaults(old_pruned, schema)
        _CelValidator(findings).walk(pruned, old_pruned, schema, ())
    meta = obj.get("metadata")
    name = str(meta.get("name") or meta.get("generateName") or "") if isinstance(meta, dict) else ""
    return ValidationResult(
        api_version=crd.api_version,
        kind=crd.kind,
        name=name,
        errors=tuple(findings.errors),
        pruned=tuple(findings.pruned),
    )


def load_documents(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every non-empty document of a (multi-document) YAML file; ``-`` reads stdin."""
    text = sys.stdin.read() if str(path) == "-" else Path(path).read_text(encoding="utf-8")
    documents = [doc for doc in yaml.load_all(text, Loader=_YAML_LOADER) if doc]
    for index, doc in enumerate(documents):
        if not isinstance(doc, dict):
            raise ValueError(f"{path}: document {index} is a {type(doc).__name__}, not a Kubernetes object")
    return documents


def _cli_validate_one(
    doc: dict[str, Any], catalog: CrdCatalog, kube_version: str | None, allow_unknown: bool
) -> tuple[bool, str]:
    api_version, kind = str(doc.get("apiVersion", "")), str(doc.get("kind", ""))
    if catalog.knows(api_version, kind):
        try:
            result = catalog.validate(doc)
        except UnknownKindError as error:
            return False, f"{kind}: {error}"
        return result.ok, result.describe()
    if kube_version:
        builtin = validate_manifest(doc, catalog, kube_version)
        return builtin.ok, builtin.describe()
    name = doc.get("metadata", {}).get("name", "?") if isinstance(doc.get("metadata"), dict) else "?"
    return (
        allow_unknown,
        f"{kind}/{name} ({api_version}): {'skipped' if allow_unknown else 'no CRD for this kind'}",
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.support.crd_validation",
        description="Validate Kubernetes objects in YAML files against CRD schemas, offline.",
    )
    parser.add_argument("files", nargs="+", help="YAML files (multi-document allowed; '-' for stdin)")
    parser.add_argument(
        "--crds",
        action="append",
        metavar="DIR",
        help="directory of CRD YAML files (repeatable; default: Kueue and JobSet)",
    )
    parser.add_argument(
        "--kube-version",
        metavar="X.Y",
        help="also validate built-in kinds with kubernetes-validate (strict) at this version",
    )
    parser.add_argument(
        "--allow-unknown-kinds",
        action="store_true",
        help="skip objects whose kind has no CRD instead of failing",
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="print failures only")
    args = parser.parse_args(argv)
    catalog = CrdCatalog(args.crds) if args.crds else default_catalog()
    failures = 0
    for file_name in args.files:
        for doc in load_documents(file_name):
            ok, text = _cli_validate_one(doc, catalog, args.kube_version, args.allow_unknown_kinds)
            failures += not ok
            if not ok or not args.quiet:
                print(f"{'OK  ' if ok else 'FAIL'} {file_name}: {text}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
