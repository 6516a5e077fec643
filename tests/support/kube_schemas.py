"""Validate built-in Kubernetes kinds offline with kubernetes-validate's strict schemas.

Strict schemas set ``additionalProperties: false``, so a misspelt field (which the API server would drop or,
with strict field validation, reject) is an error here. Every error is reported, not only the first, and
ObjectMeta is checked the way the API server does (names, namespace for the kind's scope, labels).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

import jsonschema
import kubernetes_validate
import referencing
from kubernetes_validate import utils as kv_utils

from tests.support.crd_validation import (
    ErrorType,
    FieldError,
    Findings,
    PathPart,
    ValidationResult,
    check_object_meta,
)

KUBERNETES_VERSION = "1.33"
"""Pinned Kubernetes minor the schemas come from (GKE regular channel at the time of writing)."""

# Built-in kinds that are cluster-scoped; everything else the package emits is namespaced.
CLUSTER_SCOPED_KINDS = frozenset(
    {
        "Namespace",
        "Node",
        "PersistentVolume",
        "PriorityClass",
        "ClusterRole",
        "ClusterRoleBinding",
        "CustomResourceDefinition",
        "StorageClass",
        "CSIDriver",
        "CSINode",
        "VolumeAttachment",
        "IngressClass",
        "RuntimeClass",
        "APIService",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "FlowSchema",
        "PriorityLevelConfiguration",
        "CertificateSigningRequest",
    }
)


class SchemaNotFoundError(LookupError):
    """kubernetes-validate ships no schema for this apiVersion/kind (for example a CRD kind)."""


def _schema_api_version(api_version: str) -> str:
    # kubernetes-validate names files like `clusterrole-rbac-v1.json`: group's first label + version.
    return re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)


@functools.cache
def _validator(kind: str, api_version: str, version: str) -> jsonschema.protocols.Validator:
    schema_dir = f"v{_resolved_version(version)}-local-strict"
    try:
        schema = kv_utils.schema_contents(
            f"kubernetes-json-schema/{schema_dir}/{kind.lower()}-{_schema_api_version(api_version)}.json",
            version,
        )
    except FileNotFoundError as error:
        raise SchemaNotFoundError(f"no built-in schema for {kind} {api_version} in Kubernetes {version}") from error
    definitions = _definitions(schema_dir, version)
    registry: referencing.Registry[Any] = referencing.Resource.from_contents(schema) @ referencing.Registry()
    registry = definitions @ registry
    validator_class = jsonschema.validators.Draft202012Validator
    return validator_class(schema, registry=registry)


@functools.cache
def _definitions(schema_dir: str, version: str) -> referencing.Resource[Any]:
    return referencing.Resource.from_contents(
        kv_utils.schema_contents(f"kubernetes-json-schema/{schema_dir}/_definitions.json", version)
    )


@functools.cache
def _resolved_version(version: str) -> str:
    """The newest shipped schema version not newer than ``version`` (compared numerically)."""
    wanted = tuple(int(p) for p in version.lstrip("v").split(".")[:2])
    shipped = [v for v in kv_utils.all_versions() if tuple(int(p) for p in v.split(".")[:2]) <= wanted]
    if not shipped:
        raise SchemaNotFoundError(f"kubernetes-validate {kubernetes_validate.__name__} has no schemas <= {version}")
    return str(shipped[-1])


def _render(path: list[PathPart] | Any) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<root>"


def validate_builtin(obj: Mapping[str, Any], version: str = KUBERNETES_VERSION) -> ValidationResult:
    """Validate a built-in object; every schema violation and ObjectMeta problem becomes a FieldError."""
    api_version, kind = str(obj.get("apiVersion", "")), str(obj.get("kind", ""))
    validator = _validator(kind, api_version, version)
    findings = Findings()
    for error in sorted(validator.iter_errors(dict(obj)), key=lambda e: list(map(str, e.absolute_path))):
        error_type = ErrorType.REQUIRED if error.validator == "required" else ErrorType.INVALID
        if error.validator == "type":
            error_type = ErrorType.TYPE_INVALID
        findings.errors.append(FieldError(_render(list(error.absolute_path)), error_type, error.message))
    check_object_meta(
        obj.get("metadata"),
        ("metadata",),
        findings,
        namespaced=kind not in CLUSTER_SCOPED_KINDS,
        name_required=True,
    )
    meta = obj.get("metadata")
    return ValidationResult(
        api_version=api_version,
        kind=kind,
        name=str(meta.get("name", "")) if isinstance(meta, dict) else "",
        errors=tuple(findings.errors),
        pruned=tuple(findings.pruned),
    )


def assert_valid_builtin(obj: Mapping[str, Any], version: str = KUBERNETES_VERSION) -> ValidationResult:
    """Fail with every problem listed unless the built-in object is valid."""
    result = validate_builtin(obj, version)
    assert result.ok, result.describe()
    return result
