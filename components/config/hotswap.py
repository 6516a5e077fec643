"""Settings of the bundled hotswap reconciler and of who may preempt TPU work."""

from __future__ import annotations

from pydantic import Field

from components.config.base import ConfigModel
from components.config.priorities import HotswapMode


class HotswapSettings(ConfigModel):
    mode: HotswapMode = Field(
        default=HotswapMode.RECONCILER,
        description="`reconciler`: only the hotswap reconciler preempts TPU work, whole slices through Kueue, and "
        "TPU priority classes use `preemptionPolicy: Never`; `scheduler-assisted`: kube-scheduler preempts pods "
        "(GKE's documented pattern) and the reconciler only completes whole-slice evictions through Kueue.",
    )
