"""Settings of the in-cluster admission policy that holds TPU workloads to the platform's conventions."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from gke_tpu_priority.components.config.base import ConfigModel


class AdmissionPolicySettings(ConfigModel):
    enabled: bool = Field(
        default=True,
        description="Deploy the ValidatingAdmissionPolicies that check TPU JobSets, Jobs and Pods (queue, priority "
        "tier and entitlement, exclusive slices, v6e shape) and keep every other kind off TPU, in every namespace "
        "but `exemptNamespaces` and the platform's own.",
    )
    action: Literal["Deny", "Warn", "Audit"] = Field(
        default="Deny",
        description="What a violation does: `Deny` refuses the request; `Warn` admits it with a warning to the "
        "client; `Audit` only records it in the API server's audit log. Roll out with `Warn` or `Audit` first.",
    )
    exempt_namespaces: list[str] = Field(
        default_factory=list,
        description="Namespaces the policies never check, besides Kubernetes' and GKE's system namespaces (always "
        "exempt: GKE's DaemonSets there run on TPU nodes too and tolerate every taint) and the platform's own: "
        "add the namespace of a cluster-wide agent of yours that tolerates every taint (a monitoring DaemonSet). "
        "A namespace with a LocalQueue may not be exempt.",
    )
