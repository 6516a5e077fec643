"""Settings of the in-cluster admission policy that holds TPU workloads to the platform's conventions."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from components.config.base import ConfigModel


class AdmissionPolicySettings(ConfigModel):
    enabled: bool = Field(
        default=True,
        description="Deploy the ValidatingAdmissionPolicy that checks TPU JobSets, Jobs and Pods in the team "
        "namespaces (queue, priority tier, exclusive slices, v6e shape).",
    )
    action: Literal["Deny", "Warn", "Audit"] = Field(
        default="Deny",
        description="What a violation does: `Deny` refuses the request; `Warn` admits it with a warning to the "
        "client; `Audit` only records it in the API server's audit log. Roll out with `Warn` or `Audit` first.",
    )
