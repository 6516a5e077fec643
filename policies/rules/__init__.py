"""The one rule set of gke-tpu-priority, by family; the pack, the CLI and the admission policy are built from it.

| module | family |
|---|---|
| ``priority_tiers`` | PriorityClass values, one lowest global default, PriorityClass <-> WorkloadPriorityClass |
| ``kueue_objects`` | Kueue v1beta2, ClusterQueue shape, LocalQueues pointing at declared ClusterQueues |
| ``admission_checks`` | MultiKueue and ProvisioningRequest checks: parameters, references, kubeconfig Secrets, |
| | queued flavors covered, worker quota |
| ``workload_capacity`` | work that can never run: a topology no flavor of its queue has, more chips than the queue |
| | can be admitted with, a TPU quota below one slice |
| ``tpu_workloads`` | JobSets/Jobs/Pods on TPU: queue, priority tier, exclusive slices, v6e shape (also in CEL) |
| ``hotswap_readiness`` | TPU JobSets of tiers hotswap protects survive the restart that moves them (also in CEL) |
| ``spot_tiers`` | TPU workloads of tiers kept off spot exclude spot capacity (also in CEL) |
| ``tenancy`` | TPU only through Kueue, no nodeName, tier entitlements, who may opt out of hotswap (also in CEL) |
| ``gke`` | TPU node pool placement, node identity and cluster hardening (Pulumi resources only) |
| ``reconciler_hardening`` | restricted pod security, least-privilege RBAC |

``base`` holds what they share (reading props and manifests, the rule types); ``v6e`` the slice shapes.
Front ends: ``pack`` (Pulumi policies; needs pulumi_policy, so it is imported only on use),
``policies.check`` (the CLI) and ``policies.admission`` (the ValidatingAdmissionPolicy).
"""

from __future__ import annotations

import importlib
from typing import Any

from . import (
    admission_checks,
    gke,
    hotswap_readiness,
    kueue_objects,
    priority_tiers,
    reconciler_hardening,
    spot_tiers,
    tenancy,
    tpu_workloads,
    workload_capacity,
)
from .base import GcpRule, ObjectRule, PictureRule, Rule

RULES: tuple[Rule, ...] = (
    *priority_tiers.RULES,
    *kueue_objects.RULES,
    *admission_checks.RULES,
    *tpu_workloads.RULES,
    *workload_capacity.RULES,
    *hotswap_readiness.RULES,
    *spot_tiers.RULES,
    *tenancy.RULES,
    *gke.RULES,
    *reconciler_hardening.RULES,
)
OBJECT_RULES = tuple(r for r in RULES if isinstance(r, ObjectRule))
PICTURE_RULES = tuple(r for r in RULES if isinstance(r, PictureRule))
GCP_RULES = tuple(r for r in RULES if isinstance(r, GcpRule))
ADMISSION_RULES = tuple(r for r in RULES if r.admission is not None)


def __getattr__(name: str) -> Any:
    # The Pulumi front end (ALL, evaluate_resources, the policy objects) loads pulumi_policy, which the CLI and
    # the admission component do not need: import it on first use only.
    if name.startswith("__") or name == "pack":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.pack"), name)
