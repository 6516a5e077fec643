"""Settings of the in-cluster admission policy that holds TPU workloads to the platform's conventions."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from components.config.base import ConfigModel
from policies.admission import SYSTEM_NAMESPACES


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
        default_factory=lambda: list(SYSTEM_NAMESPACES),
        description="Namespaces the policies never check: Kubernetes' and GKE's system namespaces, whose "
        "DaemonSets run on TPU nodes too and tolerate every taint (the platform's controller namespaces are always "
        "left out). Replace the list only to add a namespace of another cluster-wide component; a namespace with a "
        "LocalQueue may not be exempt.",
    )
