"""Kueue admission checks: MultiKueue (fleet) and ProvisioningRequest (queued flex-start) wiring that holds together.

Kueue has no webhook for these kinds (v0.19.2 pkg/webhooks/webhooks.go), so a broken reference is accepted by the API
server and only shows later as an inactive check or ClusterQueue, with workloads pending forever.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence

from .base import (
    KUEUE_GROUP,
    Config,
    Finding,
    KubeObject,
    ObjectRule,
    PictureRule,
    as_number,
    dig,
    items,
    mapping,
    of_kind,
)

FAMILY = "Kueue admission checks"


MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"
PROVISIONING_CONTROLLER = "kueue.x-k8s.io/provisioning-request"
PARAMETERS_KIND = {MULTIKUEUE_CONTROLLER: "MultiKueueConfig", PROVISIONING_CONTROLLER: "ProvisioningRequestConfig"}
QUEUED_PROVISIONING_CLASS = "queued-provisioning.gke.io"
CAPACITY_LABEL = "gke-tpu-priority.io/capacity"
QUEUED_CAPACITY = "flex-start-queued"
GKE_QUEUED_KEY = "cloud.google.com/gke-queued"
# GKE's limit on how long queued-provisioning (flex-start) nodes run: 7 days. The ProvisioningRequest parameter
# `maxRunDurationSeconds` defaults to and may not exceed it; see "Run a large-scale workload with flex-start with
# queued provisioning", https://cloud.google.com/kubernetes-engine/docs/how-to/provisioningrequest (the package's
# own flex-start limit, components/config/tpu.py FLEX_START_MAX_RUN_SECONDS, is the same 604800 s).
GKE_QUEUED_MAX_RUN_SECONDS = 604_800
MAX_RUN_DURATION_PARAMETER = "maxRunDurationSeconds"
DEFAULT_KUEUE_NAMESPACE = "kueue-system"
_SECRET_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_ZERO_QUANTITY = re.compile(r"^[+]?0+(\.0*)?([a-zA-Z]{1,2})?$")


def cluster_queue_checks(cluster_queue: KubeObject) -> list[tuple[str, list[str] | None]]:
    """(check name, onFlavors or None for every flavor) of a ClusterQueue: the strategy's and the older list's."""
    spec = mapping(dig(cluster_queue.manifest, "spec"))
    checks: list[tuple[str, list[str] | None]] = []
    for entry in items(dig(spec, "admissionChecksStrategy", "admissionChecks")):
        on = dig(entry, "onFlavors")
        checks.append((str(dig(entry, "name", default="")), [str(f) for f in items(on)] if on else None))
    checks += [(str(name), None) for name in items(dig(spec, "admissionChecks"))]
    return checks


def cluster_queue_flavors(cluster_queue: KubeObject) -> list[str]:
    """The flavors of a ClusterQueue's resource groups, in order."""
    names = [
        str(dig(f, "name", default=""))
        for group in items(dig(cluster_queue.manifest, "spec", "resourceGroups"))
        for f in items(dig(group, "flavors"))
    ]
    return list(dict.fromkeys(names))


def is_queued_flavor(flavor: KubeObject) -> bool:
    """A ResourceFlavor of queued-provisioning nodes: the package's capacity label, or GKE's queued label/taint."""
    labels = mapping(dig(flavor.manifest, "spec", "nodeLabels"))
    tolerations = items(dig(flavor.manifest, "spec", "tolerations"))
    return (
        labels.get(CAPACITY_LABEL) == QUEUED_CAPACITY
        or GKE_QUEUED_KEY in labels
        or any(dig(t, "key") == GKE_QUEUED_KEY for t in tolerations)
    )


def _controllers(objects: Sequence[KubeObject]) -> dict[str, str]:
    """AdmissionCheck name -> controllerName."""
    return {
        c.name: str(dig(c.manifest, "spec", "controllerName", default=""))
        for c in of_kind(objects, "AdmissionCheck", KUEUE_GROUP)
    }


def is_manager_queue(cluster_queue: KubeObject, controllers: Mapping[str, str]) -> bool:
    """A MultiKueue manager's ClusterQueue: one of its checks is a MultiKueue AdmissionCheck."""
    return any(controllers.get(name) == MULTIKUEUE_CONTROLLER for name, _ in cluster_queue_checks(cluster_queue))


def check_admission_check_parameters(obj: KubeObject, cfg: Config) -> Iterator[str]:
    controller = str(dig(obj.manifest, "spec", "controllerName", default=""))
    kind = PARAMETERS_KIND.get(controller)
    if kind is None:
        return
    parameters = mapping(dig(obj.manifest, "spec", "parameters"))
    given = (
        str(parameters.get("apiGroup") or ""),
        str(parameters.get("kind") or ""),
        str(parameters.get("name") or ""),
    )
    if given[0] != KUEUE_GROUP or given[1] != kind or not given[2]:
        shown = (
            f"{{apiGroup: {given[0] or '-'}, kind: {given[1] or '-'}, name: {given[2] or '-'}}}"
            if parameters
            else "none"
        )
        yield (
            f"{obj.label} has controllerName {controller} but spec.parameters {shown}; that controller reads only a "
            f"{kind}: set spec.parameters to {{apiGroup: {KUEUE_GROUP}, kind: {kind}, name: <the {kind}>}}."
        )


def check_admission_check_references(objects: Sequence[KubeObject], cfg: Config) -> Iterator[Finding]:
    checks = {c.name: c for c in of_kind(objects, "AdmissionCheck", KUEUE_GROUP)}
    external = set(cfg.get("externalAdmissionChecks") or [])
    for check in checks.values():
        parameters = mapping(dig(check.manifest, "spec", "parameters"))
        kind, name = str(parameters.get("kind") or ""), str(parameters.get("name") or "")
        if parameters.get("apiGroup") != KUEUE_GROUP or kind not in PARAMETERS_KIND.values() or not name:
            continue
        declared = {o.name for o in of_kind(objects, kind, KUEUE_GROUP)}
        if name not in declared:
            known = ", ".join(sorted(declared)) or "none declared"
            yield Finding(
                f"{check.label} names {kind} '{name}' in spec.parameters, which this stack does not declare "
                f"(declared: {known}); declare it or fix the name (the check stays inactive until it exists).",
                check,
            )
    clusters = {c.name for c in of_kind(objects, "MultiKueueCluster", KUEUE_GROUP)}
    for config in of_kind(objects, "MultiKueueConfig", KUEUE_GROUP):
        for name in items(dig(config.manifest, "spec", "clusters")):
            if str(name) not in clusters:
                known = ", ".join(sorted(clusters)) or "none declared"
                yield Finding(
                    f"{config.label} lists cluster '{name}', which is not a declared MultiKueueCluster (declared: "
                    f"{known}); declare it or remove it from spec.clusters.",
                    config,
                )
    for cluster_queue in of_kind(objects, "ClusterQueue", KUEUE_GROUP):
        flavors = cluster_queue_flavors(cluster_queue)
        for name, on in cluster_queue_checks(cluster_queue):
            if name not in checks and name not in external:
                known = ", ".join(sorted(checks)) or "none declared"
                yield Finding(
                    f"{cluster_queue.label} uses admission check '{name}', which is not a declared AdmissionCheck "
                    f"(declared: {known}); declare the AdmissionCheck or fix the name (Kueue admits no workload "
                    "of a ClusterQueue whose checks are missing).",
                    cluster_queue,
                )
            for flavor in sorted(set(on or ()) - set(flavors)):
                yield Finding(
                    f"{cluster_queue.label} applies admission check '{name}' onFlavors '{flavor}', which is not a "
                    f"flavor of its resourceGroups (flavors: {', '.join(flavors) or 'none'}); list only its flavors.",
                    cluster_queue,
                )


def check_multikueue_cluster(obj: KubeObject, cfg: Config) -> Iterator[str]:
    source = mapping(dig(obj.manifest, "spec", "clusterSource"))
    kube_config = mapping(source.get("kubeConfig"))
    if not kube_config:
        if not source.get("clusterProfileRef"):
            yield (
                f"{obj.label} has no spec.clusterSource.kubeConfig; set {{locationType: Secret, location: <Secret "
                "name>}} naming the worker's kubeconfig Secret in Kueue's namespace."
            )
        return
    location_type = str(kube_config.get("locationType") or "Secret")
    location = str(kube_config.get("location") or "")
    if location_type != "Secret":
        yield (
            f"{obj.label} reads its kubeconfig from {location_type} '{location}'; use locationType: Secret with "
            "location the name of a Secret in Kueue's namespace (a path exists only inside the controller's pod)."
        )
    elif not _SECRET_NAME.match(location) or len(location) > 253:
        yield (
            f"{obj.label} has kubeConfig location '{location}', which is not a Secret name; set it to the name "
            "(lowercase DNS subdomain, no namespace or path) of the kubeconfig Secret in Kueue's namespace."
        )


def check_kubeconfig_secret_namespace(objects: Sequence[KubeObject], cfg: Config) -> Iterator[Finding]:
    namespace = str(cfg.get("kueueNamespace") or DEFAULT_KUEUE_NAMESPACE)
    secrets = [s for s in of_kind(objects, "Secret") if s.group == ""]
    for cluster in of_kind(objects, "MultiKueueCluster", KUEUE_GROUP):
        kube_config = mapping(dig(cluster.manifest, "spec", "clusterSource", "kubeConfig"))
        if str(kube_config.get("locationType") or "Secret") != "Secret" or not kube_config.get("location"):
            continue
        location = str(kube_config["location"])
        named = [s for s in secrets if s.name == location]
        # A Secret the stack does not declare (made by hand, or by another stack) is not judged.
        if named and not any((s.namespace or "default") == namespace for s in named):
            elsewhere = ", ".join(sorted({s.namespace or "default" for s in named}))
            yield Finding(
                f"{cluster.label} reads kubeconfig Secret '{location}', which is declared in namespace {elsewhere}, "
                f"not in Kueue's namespace '{namespace}'; Kueue reads it only from there: move the Secret.",
                cluster,
            )


def check_queued_flavor_provisioning(objects: Sequence[KubeObject], cfg: Config) -> Iterator[Finding]:
    flavors = {f.name: f for f in of_kind(objects, "ResourceFlavor", KUEUE_GROUP)}
    queued = {name for name, f in flavors.items() if is_queued_flavor(f)}
    controllers = _controllers(objects)
    provisioning = sorted(n for n, c in controllers.items() if c == PROVISIONING_CONTROLLER)
    hint = f"'{provisioning[0]}'" if len(provisioning) == 1 else f"a {PROVISIONING_CONTROLLER} AdmissionCheck"
    for cluster_queue in of_kind(objects, "ClusterQueue", KUEUE_GROUP):
        own = cluster_queue_flavors(cluster_queue)
        checks = cluster_queue_checks(cluster_queue)
        if not is_manager_queue(cluster_queue, controllers):  # a manager's pods run on the workers
            for flavor in (f for f in own if f in queued):
                if not any(
                    controllers.get(n) == PROVISIONING_CONTROLLER and (on is None or flavor in on) for n, on in checks
                ):
                    yield Finding(
                        f"{cluster_queue.label} has queued-provisioning flavor '{flavor}' but no "
                        f"{PROVISIONING_CONTROLLER} admission check on it, so Kueue admits workloads to nodes that do "
                        f"not exist and they wait forever; add {hint} to spec.admissionChecksStrategy.admissionChecks "
                        f"with onFlavors including '{flavor}'.",
                        cluster_queue,
                    )
        for name, on in checks:
            if controllers.get(name) != PROVISIONING_CONTROLLER:
                continue
            for flavor in (f for f in (own if on is None else on) if f in flavors and f not in queued):
                yield Finding(
                    f"{cluster_queue.label} applies provisioning-request admission check '{name}' to flavor "
                    f"'{flavor}', which is not a queued-provisioning flavor (no {CAPACITY_LABEL}: {QUEUED_CAPACITY} "
                    f"or {GKE_QUEUED_KEY}); its workloads would wait for a ProvisioningRequest GKE never fills: "
                    "list only the queued flavors in onFlavors.",
                    cluster_queue,
                )


def check_max_run_duration(obj: KubeObject, cfg: Config) -> Iterator[str]:
    spec = mapping(dig(obj.manifest, "spec"))
    if spec.get("provisioningClassName") != QUEUED_PROVISIONING_CLASS:
        return
    parameters = mapping(spec.get("parameters"))
    if MAX_RUN_DURATION_PARAMETER not in parameters:
        return
    value = parameters[MAX_RUN_DURATION_PARAMETER]
    where = f"{obj.label} spec.parameters.{MAX_RUN_DURATION_PARAMETER}"
    if not isinstance(value, str) or not re.fullmatch(r"[1-9][0-9]*", value):
        yield (
            f"{where} is {value!r}; set it to a positive whole number of seconds as a string (e.g. '86400'), at most "
            f"'{GKE_QUEUED_MAX_RUN_SECONDS}' (7 days)."
        )
    elif int(value) > GKE_QUEUED_MAX_RUN_SECONDS:
        yield (
            f"{where} is '{value}', beyond GKE's {GKE_QUEUED_MAX_RUN_SECONDS} s (7 days) limit for queued "
            f"provisioning; set it to at most '{GKE_QUEUED_MAX_RUN_SECONDS}'."
        )


def _is_zero(quantity: object) -> bool:
    number = as_number(quantity)
    if number is not None:
        return number == 0
    return isinstance(quantity, str) and bool(_ZERO_QUANTITY.match(quantity))


def check_worker_quota(objects: Sequence[KubeObject], cfg: Config) -> Iterator[Finding]:
    controllers = _controllers(objects)
    for cluster_queue in of_kind(objects, "ClusterQueue", KUEUE_GROUP):
        if is_manager_queue(cluster_queue, controllers):
            continue
        quotas = [
            dig(r, "nominalQuota", default=0)
            for group in items(dig(cluster_queue.manifest, "spec", "resourceGroups"))
            for f in items(dig(group, "flavors"))
            for r in items(dig(f, "resources"))
        ]
        if quotas and dig(cluster_queue.manifest, "spec", "cohortName"):
            continue  # zero nominal quota in a cohort is a borrowing-only queue, a Kueue pattern of its own
        if all(_is_zero(q) for q in quotas):
            shown = "no resourceGroups" if not quotas else "only zero nominalQuota"
            yield Finding(
                f"{cluster_queue.label} has {shown}, and it is not a MultiKueue manager queue (no "
                f"{MULTIKUEUE_CONTROLLER} admission check); a worker ClusterQueue needs real TPU quota: give its "
                "flavors the chips of their node pools in nominalQuota.",
                cluster_queue,
            )


ADMISSION_CHECK_PARAMETERS = ObjectRule(
    name="kueue-v1beta2-admissioncheck-parameters-kind",
    description="MultiKueue and ProvisioningRequest admission checks must reference parameters of the kind their "
    "controller reads (MultiKueueConfig, ProvisioningRequestConfig).",
    family=FAMILY,
    tags=("kueue", "multikueue", "queued-provisioning"),
    kinds=frozenset({"AdmissionCheck"}),
    check=check_admission_check_parameters,
)

ADMISSION_CHECK_REFERENCES = PictureRule(
    name="kueue-v1beta2-admission-check-references-exist",
    description="ClusterQueues name declared admission checks on their own flavors; checks name declared parameters; "
    "MultiKueueConfigs list declared MultiKueueClusters.",
    family=FAMILY,
    tags=("kueue", "multikueue", "queued-provisioning"),
    check=check_admission_check_references,
    config={
        "externalAdmissionChecks": {
            "type": "array",
            "items": {"type": "string"},
            "default": [],
            "description": "AdmissionChecks managed outside this stack.",
        },
    },
)

MULTIKUEUE_CLUSTER_KUBECONFIG = ObjectRule(
    name="kueue-v1beta2-multikueue-cluster-kubeconfig-secret",
    description="A MultiKueueCluster must read its kubeconfig from a Secret (locationType Secret, a Secret name).",
    family=FAMILY,
    tags=("kueue", "multikueue"),
    kinds=frozenset({"MultiKueueCluster"}),
    check=check_multikueue_cluster,
)

MULTIKUEUE_SECRET_NAMESPACE = PictureRule(
    name="kueue-v1beta2-multikueue-kubeconfig-secret-namespace",
    description="A MultiKueueCluster's kubeconfig Secret, where the stack declares it, must be in Kueue's namespace.",
    family=FAMILY,
    tags=("kueue", "multikueue"),
    check=check_kubeconfig_secret_namespace,
    config={
        "kueueNamespace": {
            "type": "string",
            "default": DEFAULT_KUEUE_NAMESPACE,
            "description": "The namespace Kueue runs in (where it reads MultiKueue kubeconfig Secrets).",
        },
    },
)

QUEUED_FLAVOR_NEEDS_PROVISIONING_CHECK = PictureRule(
    name="kueue-v1beta2-queued-flavor-provisioning-check",
    description="A ClusterQueue's queued-provisioning flavors carry the ProvisioningRequest admission check, and "
    "only they do (MultiKueue manager queues exempt: their workers carry it).",
    family=FAMILY,
    tags=("kueue", "queued-provisioning"),
    check=check_queued_flavor_provisioning,
)

PROVISIONING_MAX_RUN_DURATION = ObjectRule(
    name="kueue-v1beta2-provisioning-max-run-duration",
    description="A queued-provisioning ProvisioningRequestConfig's maxRunDurationSeconds must be a positive whole "
    "number of seconds, at most GKE's 7 days.",
    family=FAMILY,
    tags=("kueue", "queued-provisioning"),
    kinds=frozenset({"ProvisioningRequestConfig"}),
    check=check_max_run_duration,
)

WORKER_CLUSTER_QUEUE_QUOTA = PictureRule(
    name="kueue-v1beta2-worker-clusterqueue-has-quota",
    description="A ClusterQueue that is not a MultiKueue manager queue must have nonzero nominal quota, or borrow it "
    "from its cohort.",
    family=FAMILY,
    tags=("kueue", "multikueue"),
    check=check_worker_quota,
)

RULES = (
    ADMISSION_CHECK_PARAMETERS,
    ADMISSION_CHECK_REFERENCES,
    MULTIKUEUE_CLUSTER_KUBECONFIG,
    MULTIKUEUE_SECRET_NAMESPACE,
    QUEUED_FLAVOR_NEEDS_PROVISIONING_CHECK,
    PROVISIONING_MAX_RUN_DURATION,
    WORKER_CLUSTER_QUEUE_QUOTA,
)
