"""TPU workload templates: `tpu_jobset()` for YAML/kubectl users and the `TpuJobSet` component for Pulumi."""

from typing import TypedDict

import pulumi

from gke_tpu_priority.components.kube.objects import KubernetesObject, inherited_depends_on
from gke_tpu_priority.components.schema_types import TpuJobSetSpec as TpuJobSetSettings
from gke_tpu_priority.components.workloads.jobset import TpuJobSetSpec, tpu_jobset

TYPE_TOKEN = "gke-tpu-priority:index:TpuJobSet"

__all__ = ["TpuJobSet", "TpuJobSetArgs", "TpuJobSetSpec", "tpu_jobset"]


class TpuJobSetArgs(TypedDict):
    jobset: TpuJobSetSettings
    """The workload: name, namespace, queue, priority, topology, slices, image, command, … (see TpuJobSetSpec)."""


class TpuJobSet(pulumi.ComponentResource):
    """A TPU v6e JobSet submitted through Kueue. Pass the JobSet/Kueue install in `opts.depends_on`."""

    jobset_name: pulumi.Output[str]
    """Name of the JobSet."""

    def __init__(self, name: str, args: TpuJobSetArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(TYPE_TOKEN, name, {}, opts)
        spec = TpuJobSetSpec.model_validate(args["jobset"])
        self.jobset = KubernetesObject(
            f"{name}-jobset",
            tpu_jobset(spec),
            pulumi.ResourceOptions(parent=self, depends_on=inherited_depends_on(opts)),
        )
        self.jobset_name = pulumi.Output.from_input(spec.name)
        self.register_outputs({"jobset_name": self.jobset_name})
