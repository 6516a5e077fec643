"""The charts' CRDs outlive the charts: deleting a CRD deletes every object of its kind in the cluster.

The Kueue and JobSet charts bring their CRDs as ordinary children of a `helm.v4.Chart`. Without this, anything
that deletes or replaces a chart resource (a rename, a refactor, `kueue.version` moving to a chart that drops a
CRD, `pulumi destroy`) deletes the CRDs, and with them every JobSet and Workload in the cluster, running training
included. So every CRD a chart renders is `retain_on_delete` (Pulumi forgets it, the cluster keeps it; the next
chart adopts it through server-side apply) and, with `protect`, also protected like the cluster itself.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

CRD_TYPE = "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition"


@dataclass(frozen=True)
class KeepCrds:
    """A Chart transform: its CustomResourceDefinitions are retained on delete, and protected if `protect`."""

    protect: bool

    def __call__(self, args: pulumi.ResourceTransformArgs) -> pulumi.ResourceTransformResult | None:
        if args.type_ != CRD_TYPE:
            return None
        keep = pulumi.ResourceOptions(retain_on_delete=True, protect=True if self.protect else None)
        return pulumi.ResourceTransformResult(props=args.props, opts=pulumi.ResourceOptions.merge(args.opts, keep))
