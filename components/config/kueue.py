"""Kueue and JobSet installation settings."""

from __future__ import annotations

import re
from enum import StrEnum

from pydantic import Field, field_validator, model_validator

from gke_tpu_priority.components.config.base import ConfigModel, problems_error
from gke_tpu_priority.components.config.charts import ChartSource, chart_source, check_image_repository

_VERSION = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")
_DURATION = r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$"
# v1beta2 is Kueue's storage version from v0.16; older releases reject or down-convert the objects the package emits.
MIN_KUEUE = (0, 16, 0)
# JobSet's priority-scoped exclusive placement and the failure-policy rules the package emits need v0.11+.
MIN_JOBSET = (0, 11, 0)


def version_tuple(version: str) -> tuple[int, int, int]:
    match = _VERSION.match(version)
    if not match:
        raise ValueError(f"{version!r} is not a release version like `0.19.2` (no leading `v`)")
    a, b, c = match.groups()
    return int(a), int(b), int(c)


def duration_seconds(value: str) -> float:
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    return sum(float(n) * units[u] for n, _, u in re.findall(r"([0-9]+(\.[0-9]+)?)(ms|s|m|h)", value))


class FairSharingStrategy(StrEnum):
    LESS_THAN_OR_EQUAL_TO_FINAL_SHARE = "LessThanOrEqualToFinalShare"
    LESS_THAN_INITIAL_SHARE = "LessThanInitialShare"


# Below this, Kueue evicts a multi-host TPU workload before its pods can have pulled images and initialised.
MIN_READY_TIMEOUT_SECONDS = 300


class WaitForPodsReady(ConfigModel):
    timeout: str = Field(
        default="15m",
        pattern=_DURATION,
        description="Time an admitted workload may take to get all pods ready before Kueue evicts and requeues it; "
        "multi-host TPU start-up (image pull, TPU init) needs minutes.",
    )
    recovery_timeout: str = Field(
        default="20m",
        pattern=_DURATION,
        description="Time a running workload may spend with PodsReady=False (e.g. while hotswap restarts it on "
        "other slices) before Kueue evicts it; must exceed the worst hotswap recovery.",
    )
    block_admission: bool = Field(default=False, description="Admit one workload at a time until its pods are ready.")
    backoff_base_seconds: int = Field(default=60, ge=1, le=3600, description="Requeue backoff base after eviction.")
    backoff_max_seconds: int = Field(default=1800, ge=1, le=86400, description="Requeue backoff ceiling.")
    backoff_limit_count: int | None = Field(
        default=None,
        ge=1,
        description="Requeues before Kueue deactivates a workload; unset means requeue forever, so an evicted "
        "workload is never dropped.",
    )

    @model_validator(mode="after")
    def _check(self) -> WaitForPodsReady:
        problems = []
        if self.backoff_max_seconds < self.backoff_base_seconds:
            problems.append(".backoffMaxSeconds: must be at least backoffBaseSeconds")
        if duration_seconds(self.timeout) < MIN_READY_TIMEOUT_SECONDS:
            problems.append(
                f".timeout: {self.timeout!r} is shorter than 5m: a multi-host TPU slice takes minutes to pull images "
                "and initialise, so Kueue would evict and requeue every workload before it could start; use 10m or "
                "more (default 15m)"
            )
        if duration_seconds(self.recovery_timeout) < 300:
            problems.append(
                f".recoveryTimeout: {self.recovery_timeout!r} is shorter than 5m, which would cut hotswap recovery "
                "short (node grace + pod termination + restart); use 10m or more"
            )
        if problems:
            raise problems_error(problems)
        return self


KUEUE_CHART = "oci://registry.k8s.io/kueue/charts/kueue"
KUEUE_IMAGE = "registry.k8s.io/kueue/kueue"
JOBSET_CHART = "oci://registry.k8s.io/jobset/charts/jobset"
JOBSET_IMAGE = "registry.k8s.io/jobset/jobset"
_CHART_HELP = (
    "Where the {name} chart comes from: an OCI reference (default: the upstream registry; a mirror's "
    "`oci://…` for mirrored installs), an https:// URL of a packaged .tgz, or a chart directory or .tgz on disk "
    "for air-gapped installs (relative to the Pulumi project directory; its chart version must equal `version`)."
)
_IMAGE_HELP = (
    "Image repository of the {name} controller, without tag (the tag is `v<version>`); a mirror's path for "
    "mirrored or air-gapped installs."
)


class KueueSettings(ConfigModel):
    version: str = Field(default="0.19.2", description="Kueue release (chart version, no `v`); 0.16.0 or newer.")
    chart: str = Field(default=KUEUE_CHART, description=_CHART_HELP.format(name="Kueue"))
    image_repository: str = Field(default=KUEUE_IMAGE, description=_IMAGE_HELP.format(name="Kueue"))
    namespace: str = Field(default="kueue-system", description="Namespace of the Kueue controller.")
    replicas: int = Field(default=1, ge=1, le=3, description="Kueue controller replicas (leader-elected).")
    fair_sharing: bool | None = Field(
        default=None,
        description="Fair sharing between ClusterQueues of a cohort; default on when a cohort has several queues.",
    )
    preemption_strategies: list[FairSharingStrategy] = Field(
        default_factory=lambda: [
            FairSharingStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,
            FairSharingStrategy.LESS_THAN_INITIAL_SHARE,
        ],
        min_length=1,
        description="Fair-sharing preemption strategies, tried in order.",
    )
    wait_for_pods_ready: WaitForPodsReady = Field(
        default_factory=WaitForPodsReady, description="All-or-nothing start and recovery timeouts."
    )
    exclude_resource_prefixes: list[str] = Field(
        default_factory=lambda: ["cpu", "memory", "ephemeral-storage"],
        description="Resources Kueue does not account: quotas are in TPU chips (`google.com/tpu`); the "
        "kube-scheduler still enforces CPU and memory on the nodes.",
    )

    @field_validator("version")
    @classmethod
    def _supported(cls, value: str) -> str:
        if version_tuple(value) < MIN_KUEUE:
            raise ValueError(f"Kueue {value} is too old: kueue.x-k8s.io/v1beta2 needs 0.16.0 or newer (0.19.2 tested)")
        return value

    @field_validator("image_repository")
    @classmethod
    def _image(cls, value: str) -> str:
        return check_image_repository(value, KUEUE_IMAGE)

    @model_validator(mode="after")
    def _chart_matches_version(self) -> KueueSettings:
        try:
            chart_source(self.chart, "kueue", self.version)
        except ValueError as error:
            raise ValueError(f".chart: {error}") from None
        return self

    @property
    def chart_source(self) -> ChartSource:
        return chart_source(self.chart, "kueue", self.version)


class JobSetSettings(ConfigModel):
    version: str = Field(default="0.12.0", description="JobSet release (chart version, no `v`); 0.11.0 or newer.")
    chart: str = Field(default=JOBSET_CHART, description=_CHART_HELP.format(name="JobSet"))
    image_repository: str = Field(default=JOBSET_IMAGE, description=_IMAGE_HELP.format(name="JobSet"))
    namespace: str = Field(default="jobset-system", description="Namespace of the JobSet controller.")

    @field_validator("version")
    @classmethod
    def _supported(cls, value: str) -> str:
        if version_tuple(value) < MIN_JOBSET:
            raise ValueError(f"JobSet {value} is too old: use 0.11.0 or newer (0.12.0 tested)")
        return value

    @field_validator("image_repository")
    @classmethod
    def _image(cls, value: str) -> str:
        return check_image_repository(value, JOBSET_IMAGE)

    @model_validator(mode="after")
    def _chart_matches_version(self) -> JobSetSettings:
        try:
            chart_source(self.chart, "jobset", self.version)
        except ValueError as error:
            raise ValueError(f".chart: {error}") from None
        return self

    @property
    def chart_source(self) -> ChartSource:
        return chart_source(self.chart, "jobset", self.version)
