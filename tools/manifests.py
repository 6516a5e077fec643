"""Extract the Kubernetes objects a program declares from its registered resources, in dependency order."""

from __future__ import annotations

import copy
from typing import Any

from testkit.resources import SECRET_SIG, RegisteredResource, dependency_order

CONFIG_GROUP = "kubernetes:yaml/v2:ConfigGroup"
NOT_OBJECTS = ("pulumi:providers:", "kubernetes:helm.sh/", "kubernetes:yaml/", "kubernetes:kustomize/")


def unwrap_secrets(value: Any) -> Any:
    if isinstance(value, dict):
        if SECRET_SIG in value:
            return unwrap_secrets(value.get("value"))
        return {k: unwrap_secrets(v) for k, v in value.items()}
    if isinstance(value, list):
        return [unwrap_secrets(v) for v in value]
    return value


def _integral(value: Any) -> Any:
    """Pulumi sends numbers as floats; Kubernetes objects want integers where the value is whole."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _integral(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_integral(v) for v in value]
    return value


def is_kubernetes_object(res: RegisteredResource) -> bool:
    return res.custom and res.type.startswith("kubernetes:") and not res.type.startswith(NOT_OBJECTS)


def object_from_resource(res: RegisteredResource) -> dict[str, Any]:
    _, api_version, kind = res.type.split(":", 2)
    api_version = api_version.removeprefix("core/")
    body = {k: v for k, v in unwrap_secrets(res.inputs).items() if not k.startswith("__")}
    obj: dict[str, Any] = {"apiVersion": api_version, "kind": kind}
    if "metadata" in body:
        obj["metadata"] = body["metadata"]
    obj.update({k: v for k, v in body.items() if k not in ("apiVersion", "kind", "metadata")})
    integral: dict[str, Any] = _integral(obj)
    return integral


def kubernetes_objects(resources: list[RegisteredResource]) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = []
    for res in dependency_order(resources):
        if res.type == CONFIG_GROUP:
            # ConfigGroup is expanded by the provider at deploy time; its objects are what it declares.
            objs = unwrap_secrets(res.inputs.get("objs") or [])
            objects.extend(_integral(copy.deepcopy(o)) for o in objs)
        elif is_kubernetes_object(res):
            objects.append(object_from_resource(res))
    return objects


def helm_charts(resources: list[RegisteredResource]) -> list[dict[str, Any]]:
    return [
        {"name": r.name, **{k: r.inputs.get(k) for k in ("chart", "version", "namespace")}}
        for r in resources
        if r.type.startswith("kubernetes:helm.sh/")
    ]
