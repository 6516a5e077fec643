"""Settings of the bundled hotswap reconciler and of who may preempt TPU work."""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from gke_tpu_priority.components.config.base import ConfigModel, problems_error
from gke_tpu_priority.components.config.errors import format_validation_error
from gke_tpu_priority.components.config.priorities import HotswapMode
from gke_tpu_priority.components.config.spelling import camel_case_keys

# Keys the package derives from the rest of the stack; setting them in `settings` would contradict it.
DERIVED_SETTINGS = {
    "leaderElection": "set by the package from the stack (remove it)",
    "metricsPort": "set by the package from the stack (remove it)",
    "healthPort": "set by the package from the stack (remove it)",
    "dryRun": "set by the package from the stack (use hotswap.dryRun)",
    "annotationDomain": "set by the package from the stack (remove it)",
    "preemptorMinPriority": "set by the package from the tiers (use priorities[].preempts: false)",
    "topTierPriority": "set by the package from the tiers (the highest tier that may preempt)",
    "maxPreemptorPriority": "set by the package from the teams (use teams[].maxTier)",
    "protectNamespaces": "set by the package from the teams (use teams[].mayProtect)",
}


class HotswapResources(ConfigModel):
    cpu: str | None = Field(
        default=None,
        pattern=r"^[0-9]+(\.[0-9]+)?m?$",
        description="CPU request and limit. Unset: sized from the fleet (250m per 1,024 TPU slices, limit 1 core).",
    )
    memory: str | None = Field(
        default=None,
        pattern=r"^[0-9]+(Mi|Gi)$",
        description="Memory request and limit. Unset: sized from the fleet (256Mi + 128Mi per 1,024 TPU slices).",
    )


class HotswapMonitoring(ConfigModel):
    enabled: bool | None = Field(
        default=None,
        description="Declare a GKE Managed Prometheus PodMonitoring for the reconciler's metrics, its alerting rules "
        '(a Managed Prometheus `Rules` object) and a Grafana dashboard ConfigMap (`grafana_dashboard: "1"`). Unset: '
        "on when the package creates the cluster (Managed Prometheus is on there), off with `cluster.mode: "
        "existing` (its cluster may lack the monitoring.googleapis.com CRDs).",
    )


class HotswapSettings(ConfigModel):
    mode: HotswapMode = Field(
        default=HotswapMode.RECONCILER,
        description="`reconciler`: only the hotswap reconciler preempts TPU work, whole slices through Kueue, and "
        "TPU priority classes use `preemptionPolicy: Never`; `scheduler-assisted`: kube-scheduler preempts pods "
        "(GKE's documented pattern) and the reconciler only completes whole-slice evictions through Kueue.",
    )
    enabled: bool = Field(default=True, description="Deploy the reconciler.")
    namespace: str = Field(
        default="hotswap-system", pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", description="Reconciler namespace."
    )
    image: str | None = Field(
        default=None,
        description="Reconciler image, ideally pinned by digest (`…@sha256:…`). Unset: the stack builds "
        "`hotswap/Dockerfile` and pushes it to an Artifact Registry repository it creates.",
    )
    replicas: int = Field(default=2, ge=1, le=3, description="Replicas; one leads (Lease), the others stand by.")
    dry_run: bool = Field(default=False, description="Log every decision but write nothing.")
    resources: HotswapResources = Field(default_factory=HotswapResources, description="Container resources.")
    monitoring: HotswapMonitoring = Field(
        default_factory=HotswapMonitoring, description="Scraping, alerting rules and a dashboard for the reconciler."
    )
    settings: dict[str, Any] = Field(
        default_factory=dict,
        description="Reconciler tuning in its own schema (camelCase), e.g. `unhealthyGrace: 20s`, `maxHold: 6h`, "
        "`inversionGrace: 15s`, `starvationGrace: 60s` (0 disables), `scope: Cohort`, `fastFail: {enabled: true}`; "
        "validated with the reconciler's own model.",
    )

    @model_validator(mode="after")
    def _settings_are_valid(self) -> HotswapSettings:
        from pydantic import ValidationError

        from gke_tpu_priority.hotswap.config import HotswapConfig

        problems = [f".settings.{key}: {why}" for key, why in DERIVED_SETTINGS.items() if key in self.settings]
        if "mode" in self.settings:
            problems.append(".settings.mode: use `hotswap.mode` (it also sets the PriorityClasses' preemption policy)")
        # The reconciler's model also takes field names; in a stack, as everywhere in it, keys are camelCase.
        settings, spelling = camel_case_keys(HotswapConfig, self.settings, ".settings")
        problems += spelling
        # The rest is checked in the same run, without the keys refused above (the reconciler's schema has them).
        rest = {k: v for k, v in settings.items() if k not in DERIVED_SETTINGS and k != "mode"}
        try:
            HotswapConfig.model_validate({**rest, "mode": self.mode.value})
        except ValidationError as err:
            # In the stack's words: an unknown key named with the setting meant, no library messages.
            problems += format_validation_error(".settings", err, model=HotswapConfig).problems
        if problems:
            raise problems_error(problems)
        return self
