"""Declare any Kubernetes object, whole, as its own Pulumi resource.

pulumi_kubernetes' Python `CustomResource` sends only `spec` and `metadata`, so kinds with other top-level fields
(Kueue's WorkloadPriorityClass has `value` and `description`) cannot be expressed with it
(pulumi/pulumi-kubernetes#2363). The provider itself accepts any object under the type token
`kubernetes:<apiVersion>:<Kind>`, which is what this resource registers: policy packs and previews see every object.
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from gke_tpu_priority.components.kube.immutable import replacement_options


def _provider_version() -> str:
    from pulumi_kubernetes import _utilities

    return str(_utilities.get_version())  # type: ignore[no-untyped-call]


class KubernetesObject(pulumi.CustomResource):
    """A complete Kubernetes object (apiVersion, kind, metadata and every other top-level field)."""

    def __init__(self, resource_name: str, obj: dict[str, Any], opts: pulumi.ResourceOptions | None = None) -> None:
        api_version = obj["apiVersion"]
        kind = obj["kind"]
        if "name" not in obj.get("metadata", {}):
            raise ValueError(f"{kind} {resource_name!r}: set metadata.name; other objects refer to it by name")
        # Fields the API server refuses to change in place become replacements (components/kube/immutable.py).
        opts = pulumi.ResourceOptions.merge(opts, replacement_options(obj))
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(version=_provider_version()))
        props = {key: value for key, value in obj.items() if key != "status"}
        # The provider names the core group `core/v1` in type tokens (`kubernetes:core/v1:ConfigMap`).
        group_version = api_version if "/" in api_version else f"core/{api_version}"
        super().__init__(f"kubernetes:{group_version}:{kind}", resource_name, props, opts)


def namespace(
    resource_name: str,
    name: str,
    labels: dict[str, str] | None = None,
    opts: pulumi.ResourceOptions | None = None,
) -> k8s.core.v1.Namespace:
    return k8s.core.v1.Namespace(
        resource_name,
        metadata={"name": name, "labels": {"app.kubernetes.io/managed-by": "gke-tpu-priority", **(labels or {})}},
        opts=opts,
    )


def inherited_depends_on(opts: pulumi.ResourceOptions | None) -> list[pulumi.Resource]:
    """A component's `depends_on` does not reach its children; components pass it on explicitly."""
    if opts is None or opts.depends_on is None:
        return []
    deps = opts.depends_on
    if isinstance(deps, pulumi.Resource):
        return [deps]
    if isinstance(deps, list):
        return [d for d in deps if isinstance(d, pulumi.Resource)]
    return []
