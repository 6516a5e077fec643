"""Kueue admission checks: MultiKueue (fleet) and ProvisioningRequest (queued flex-start) wiring that holds together.

Kueue has no webhook for these kinds (v0.19.2 pkg/webhooks/webhooks.go), so a broken reference is accepted by the API
server and only shows later as an inactive check or ClusterQueue, with workloads pending forever.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from .base import KUEUE_GROUP, Config, Finding, KubeObject, ObjectRule, PictureRule, dig, items, mapping, of_kind

FAMILY = "Kueue admission checks"

MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"
PROVISIONING_CONTROLLER = "kueue.x-k8s.io/provisioning-request"
PARAMETERS_KIND = {MULTIKUEUE_CONTROLLER: "MultiKueueConfig", PROVISIONING_CONTROLLER: "ProvisioningRequestConfig"}
# Queued-provisioning flavors: the package's capacity label, or GKE's own queued-provisioning node label.
CAPACITY_LABEL = "gke-tpu-priority.io/capacity"
QUEUED_CAPACITY = "flex-start-queued"
GKE_QUEUED_LABEL = "cloud.google.com/gke-queued"
# GKE: a ProvisioningRequest's maxRunDurationSeconds may not exceed 7 days, flex-start's limit
# (https://cloud.google.com/kubernetes-engine/docs/how-to/provisioningrequest).
MAX_RUN_DURATION_S = 7 * 24 * 3600


def check_parameters_kind(obj: KubeObject, cfg: Config) -> Iterator[str]:
    controller = str(dig(obj.manifest, "spec", "controllerName") or "")
    kind = PARAMETERS_KIND.get(controller)
    if kind is None:
        return
    ref = mapping(dig(obj.manifest, "spec", "parameters"))
    if ref.get("apiGroup") != KUEUE_GROUP or ref.get("kind") != kind or not ref.get("name"):
        got = f"{ref.get('apiGroup')}/{ref.get('kind')} {ref.get('name')!r}" if ref else "none"
        yield (
            f"{obj.label} (controller {controller}) has parameters {got}; set spec.parameters to "
            f"{{apiGroup: {KUEUE_GROUP}, kind: {kind}, name: <its {kind}>}}, or Kueue keeps the check inactive."
        )


def check_max_run_duration(obj: KubeObject, cfg: Config) -> Iterator[str]:
    raw = dig(obj.manifest, "spec", "parameters", "maxRunDurationSeconds")
    if raw is None:
        return
    text = str(raw)
    if not text.isdigit() or not 0 < int(text) <= MAX_RUN_DURATION_S:
        yield (
            f"{obj.label} sets parameters.maxRunDurationSeconds {text!r}; GKE takes a whole number of seconds from 1 "
            f"to {MAX_RUN_DURATION_S} (7 days)."
        )


def _checks_of(cluster_queue: KubeObject) -> list[tuple[str, list[str] | None]]:
    """(check name, onFlavors or None for all flavors) of a ClusterQueue, either spelling."""
    spec = mapping(dig(cluster_queue.manifest, "spec"))
    out: list[tuple[str, list[str] | None]] = [(str(name), None) for name in items(spec.get("admissionChecks"))]
    for entry in items(dig(spec, "admissionChecksStrategy", "admissionChecks")):
        on = [str(f) for f in items(dig(entry, "onFlavors"))]
        out.append((str(dig(entry, "name") or ""), on or None))
    return out


def _flavors_of(cluster_queue: KubeObject) -> list[str]:
    return [
        str(dig(f, "name"))
        for group in items(dig(cluster_queue.manifest, "spec", "resourceGroups"))
        for f in items(dig(group, "flavors"))
    ]


def _is_queued(flavor: KubeObject) -> bool:
    labels = mapping(dig(flavor.manifest, "spec", "nodeLabels"))
    return labels.get(CAPACITY_LABEL) == QUEUED_CAPACITY or str(labels.get(GKE_QUEUED_LABEL, "")).lower() == "true"


def check_references(objects: Sequence[KubeObject], cfg: Config) -> Iterator[Finding]:
    checks = {c.name: c for c in of_kind(objects, "AdmissionCheck", KUEUE_GROUP)}
    external = set(cfg.get("externalAdmissionChecks") or [])
    declared: dict[str, set[str]] = {
        kind: {o.name for o in of_kind(objects, kind, KUEUE_GROUP)}
        for kind in ("MultiKueueConfig", "ProvisioningRequestConfig", "MultiKueueCluster")
    }
    for check in checks.values():
        ref = mapping(dig(check.manifest, "spec", "parameters"))
        kind, name = str(ref.get("kind") or ""), str(ref.get("name") or "")
        if kind in declared and name and name not in declared[kind]:
            yield Finding(f"{check.label} names {kind} '{name}', which this stack does not declare; declare it.", check)
    for config in of_kind(objects, "MultiKueueConfig", KUEUE_GROUP):
        for cluster in items(dig(config.manifest, "spec", "clusters")):
            if str(cluster) not in declared["MultiKueueCluster"]:
                yield Finding(
                    f"{config.label} lists cluster '{cluster}', which this stack does not declare as a "
                    "MultiKueueCluster; declare it or remove it from spec.clusters.",
                    config,
                )
    for cq in of_kind(objects, "ClusterQueue", KUEUE_GROUP):
        flavors = set(_flavors_of(cq))
        for name, on in _checks_of(cq):
            if name not in checks and name not in external:
                known = ", ".join(sorted(checks)) or "none declared"
                yield Finding(
                    f"{cq.label} uses admission check '{name}', which this stack does not declare (declared: {known}); "
                    "Kueue keeps the ClusterQueue inactive.",
                    cq,
                )
            for flavor in sorted(set(on or ()) - flavors):
                yield Finding(
                    f"{cq.label} applies admission check '{name}' on flavor '{flavor}', which none of its resource "
                    f"groups has (flavors: {', '.join(sorted(flavors))}).",
                    cq,
                )


def check_queued_flavors(objects: Sequence[KubeObject], cfg: Config) -> Iterator[Finding]:
    controllers: Mapping[str, str] = {
        c.name: str(dig(c.manifest, "spec", "controllerName") or "")
        for c in of_kind(objects, "AdmissionCheck", KUEUE_GROUP)
    }
    queued = {f.name for f in of_kind(objects, "ResourceFlavor", KUEUE_GROUP) if _is_queued(f)}
    for cq in of_kind(objects, "ClusterQueue", KUEUE_GROUP):
        checks = _checks_of(cq)
        if any(controllers.get(name) == MULTIKUEUE_CONTROLLER for name, _ in checks):
            continue  # a MultiKueue manager queue: the workers' queues carry the provisioning check
        flavors = _flavors_of(cq)
        covered: set[str] = set()
        for name, on in checks:
            if controllers.get(name) != PROVISIONING_CONTROLLER:
                continue
            scope = on if on is not None else flavors
            covered.update(scope)
            for flavor in [f for f in scope if f not in queued]:
                yield Finding(
                    f"{cq.label} applies provisioning check '{name}' on flavor '{flavor}', which is not a "
                    "queued-provisioning flavor: every workload there would wait for a ProvisioningRequest GKE "
                    "cannot serve; list only the queued flavors in its onFlavors.",
                    cq,
                )
        for flavor in [f for f in flavors if f in queued and f not in covered]:
            yield Finding(
                f"{cq.label} has queued-provisioning flavor '{flavor}' without a "
                f"{PROVISIONING_CONTROLLER} admission check on it: workloads would be admitted to nodes that only "
                "a ProvisioningRequest creates and wait forever; add the check with onFlavors including it.",
                cq,
            )


ADMISSION_CHECK_PARAMETERS = ObjectRule(
    name="kueue-v1beta2-admissioncheck-parameters-kind",
    description="MultiKueue and ProvisioningRequest admission checks must reference parameters of the kind their "
    "controller reads.",
    family=FAMILY,
    tags=("kueue", "multikueue", "queued-provisioning"),
    kinds=frozenset({"AdmissionCheck"}),
    check=check_parameters_kind,
)

PROVISIONING_MAX_RUN_DURATION = ObjectRule(
    name="kueue-v1beta2-provisioning-max-run-duration",
    description="A ProvisioningRequestConfig's maxRunDurationSeconds must be a whole number of seconds within GKE's "
    "7-day limit.",
    family=FAMILY,
    tags=("kueue", "queued-provisioning"),
    kinds=frozenset({"ProvisioningRequestConfig"}),
    check=check_max_run_duration,
)

ADMISSION_CHECK_REFERENCES = PictureRule(
    name="kueue-v1beta2-admission-check-references-exist",
    description="ClusterQueues name declared admission checks on their own flavors; checks name declared parameters; "
    "MultiKueueConfigs list declared MultiKueueClusters.",
    family=FAMILY,
    tags=("kueue", "multikueue", "queued-provisioning"),
    check=check_references,
    config={
        "externalAdmissionChecks": {
            "type": "array",
            "items": {"type": "string"},
            "default": [],
            "description": "AdmissionChecks managed outside this stack.",
        },
    },
)

QUEUED_FLAVOR_NEEDS_PROVISIONING_CHECK = PictureRule(
    name="kueue-v1beta2-queued-flavor-provisioning-check",
    description="A ClusterQueue's queued-provisioning flavors carry the ProvisioningRequest admission check, and "
    "only they do.",
    family=FAMILY,
    tags=("kueue", "queued-provisioning"),
    check=check_queued_flavors,
)

RULES = (
    ADMISSION_CHECK_PARAMETERS,
    PROVISIONING_MAX_RUN_DURATION,
    ADMISSION_CHECK_REFERENCES,
    QUEUED_FLAVOR_NEEDS_PROVISIONING_CHECK,
)
