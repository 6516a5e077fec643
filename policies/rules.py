"""Policies of the gke-tpu-priority pack: priority conventions, Kueue/JobSet shape, GKE and RBAC hardening.

Everything here is importable without side effects; ``__main__.py`` only wraps :data:`ALL` in a
``PolicyPack`` (whose constructor serves gRPC forever). Checks are pure functions that yield violation
messages; thin adapters turn them into pulumi_policy objects. Props are the engine's inputs: camelCase
names, numbers as floats. :func:`evaluate_resources` runs the whole pack over a captured resource list.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml
from pulumi_policy import (
    EnforcementLevel,
    Policy,
    PolicyConfigSchema,
    PolicyCustomTimeouts,
    PolicyResource,
    PolicyResourceOptions,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    Severity,
    StackValidationArgs,
    StackValidationPolicy,
)

Config = Mapping[str, Any]

# --------------------------------------------------------------------------------------------------------
# Property access


PULUMI_SECRET_SIGNATURE = ("4dabf18193072939515e22adb298388d", "1b47061264138c4ac30d75fd1eb44270")
"""Key and value marking a secret in serialized Pulumi properties (what mocks capture)."""


def unwrap_secret(value: Any) -> Any:
    """The plaintext of a serialized secret, or ``value`` unchanged (shallow: unknowns stay untouched)."""
    key, signature = PULUMI_SECRET_SIGNATURE
    if isinstance(value, Mapping) and value.get(key) == signature:
        return value.get("value")
    return value


def unwrap_secrets(value: Any) -> Any:
    """Deep :func:`unwrap_secret`, for fully known data such as a ``resources.json`` dump."""
    value = unwrap_secret(value)
    if isinstance(value, Mapping):
        return {k: unwrap_secrets(v) for k, v in value.items()}
    if isinstance(value, list):
        return [unwrap_secrets(v) for v in value]
    return value


def dig(value: Any, *path: str | int, default: Any = None) -> Any:
    """Follow keys/indexes through nested props, unwrapping secrets; ``default`` when anything is absent.

    Only the values on the path are read, so an unknown value elsewhere (during preview) does not stop
    the policy from running.
    """
    current = unwrap_secret(value)
    for step in path:
        if isinstance(step, int):
            if not isinstance(current, list) or not -len(current) <= step < len(current):
                return default
            current = unwrap_secret(current[step])
        else:
            if not isinstance(current, Mapping) or step not in current:
                return default
            current = unwrap_secret(current[step])
    return default if current is None else current


def as_number(value: Any) -> float | None:
    value = unwrap_secret(value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def show_number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def items(value: Any) -> list[Any]:
    value = unwrap_secret(value)
    return [unwrap_secret(v) for v in value] if isinstance(value, list) else []


def mapping(value: Any) -> Mapping[str, Any]:
    value = unwrap_secret(value)
    return value if isinstance(value, Mapping) else {}


# --------------------------------------------------------------------------------------------------------
# Kubernetes objects inside Pulumi resources


KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VERSION = "v1beta2"
JOBSET_GROUP = "jobset.x-k8s.io"
CONFIG_GROUP_TYPES = frozenset({"kubernetes:yaml/v2:ConfigGroup", "kubernetes:yaml:ConfigGroup"})
_K8S_TYPE = re.compile(r"^kubernetes:(?P<group>[^/:]+)/(?P<version>[^:]+):(?P<kind>\w+)$")


@dataclass(frozen=True)
class KubeObject:
    """One Kubernetes manifest, from a resource of its own or from a ConfigGroup's ``objs``/``yaml``."""

    api_version: str
    kind: str
    manifest: Mapping[str, Any]
    source: str  # the Pulumi resource name, for messages

    @property
    def name(self) -> str:
        return str(dig(self.manifest, "metadata", "name", default="") or "")

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def label(self) -> str:
        """How messages name the object: ``ClusterQueue 'tpu-cq'`` plus the Pulumi resource if different."""
        shown = f"{self.kind} '{self.name or '?'}'"
        return shown if self.source in ("", self.name) else f"{shown} (Pulumi resource '{self.source}')"


def kubernetes_objects(resource_type: str, props: Mapping[str, Any], resource_name: str = "") -> list[KubeObject]:
    """The manifests a resource declares: itself for a Kubernetes kind, its objects for a ConfigGroup."""
    if resource_type in CONFIG_GROUP_TYPES:
        manifests = [m for m in items(dig(props, "objs")) if isinstance(m, Mapping)]
        text = dig(props, "yaml")
        for chunk in text if isinstance(text, list) else [text]:
            if isinstance(chunk, str):
                manifests += [d for d in yaml.safe_load_all(chunk) if isinstance(d, Mapping)]
        return [
            KubeObject(str(dig(m, "apiVersion", default="")), str(dig(m, "kind", default="")), m, resource_name)
            for m in manifests
        ]
    match = _K8S_TYPE.match(resource_type)
    if not match:
        return []
    group = "" if match["group"] == "core" else match["group"]
    default_api_version = f"{group}/{match['version']}" if group else match["version"]
    api_version = str(dig(props, "apiVersion", default=default_api_version))
    kind = str(dig(props, "kind", default=match["kind"]))
    return [KubeObject(api_version, kind, props, resource_name)]


def pod_templates(obj: KubeObject) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(where, pod template) pairs of a JobSet, Job or Deployment."""
    if obj.kind == "JobSet":
        for index, job in enumerate(items(dig(obj.manifest, "spec", "replicatedJobs"))):
            where = f"replicatedJobs[{dig(job, 'name', default=index)}]"
            yield where, mapping(dig(job, "template", "spec", "template"))
    elif obj.kind in ("Deployment", "StatefulSet", "DaemonSet", "Job", "ReplicaSet"):
        yield "template", mapping(dig(obj.manifest, "spec", "template"))


TPU_ACCELERATOR_LABEL = "cloud.google.com/gke-tpu-accelerator"
TPU_RESOURCE = "google.com/tpu"


def targets_tpu(obj: KubeObject) -> bool:
    """True when any pod asks for TPU nodes (accelerator selector) or TPU chips (resources)."""
    for _, template in pod_templates(obj):
        spec = mapping(dig(template, "spec"))
        if TPU_ACCELERATOR_LABEL in mapping(dig(spec, "nodeSelector")):
            return True
        for container in items(dig(spec, "containers")) + items(dig(spec, "initContainers")):
            resources = mapping(dig(container, "resources"))
            if any(TPU_RESOURCE in mapping(dig(resources, part)) for part in ("limits", "requests")):
                return True
    return False


# --------------------------------------------------------------------------------------------------------
# Resource views for stack policies


@dataclass(frozen=True)
class ResourceView:
    """The parts of a Pulumi resource a stack-level check reads."""

    resource_type: str
    name: str
    urn: str
    props: Mapping[str, Any]

    def objects(self) -> list[KubeObject]:
        return kubernetes_objects(self.resource_type, self.props, self.name)


def stack_name_from_urn(urn: str) -> str:
    """``urn:pulumi:<stack>::<project>::...`` -> ``<stack>``."""
    return urn.split("::", 1)[0].removeprefix("urn:pulumi:") if urn.startswith("urn:pulumi:") else ""


def _unique_objects(resources: Iterable[ResourceView], kind: str, group: str | None = None) -> list[KubeObject]:
    """Objects of a kind, once per (group, name): a ConfigGroup's objs and its children may both appear."""
    seen: dict[tuple[str, str], KubeObject] = {}
    for resource in resources:
        for obj in resource.objects():
            if obj.kind == kind and (group is None or obj.group == group):
                seen.setdefault((obj.group, obj.name), obj)
    return list(seen.values())


# --------------------------------------------------------------------------------------------------------
# Checks: priority conventions


MAX_USER_PRIORITY = 1_000_000_000
"""PriorityClass values above this are reserved for system classes (scheduling.k8s.io API validation)."""


def check_priority_class_value(obj: KubeObject, cfg: Config) -> Iterator[str]:
    value = as_number(dig(obj.manifest, "value"))
    if value is None:
        yield f"{obj.label} has no numeric 'value'; set an integer priority."
        return
    high, low = float(cfg["maxValue"]), float(cfg["minValue"])
    if not low <= value <= high:
        yield (
            f"{obj.label} has value {show_number(value)}, outside the allowed band "
            f"[{show_number(low)}, {show_number(high)}]; pick a value inside it (user classes must be "
            f"<= {MAX_USER_PRIORITY:,})."
        )
    allowed = [float(v) for v in cfg.get("allowedValues") or []]
    if allowed and value not in allowed:
        shown = ", ".join(show_number(v) for v in allowed)
        yield f"{obj.label} has value {show_number(value)}, which is not one of the allowed values ({shown})."


def check_global_default(resources: Sequence[ResourceView], cfg: Config) -> Iterator[str]:
    classes = _unique_objects(resources, "PriorityClass", "scheduling.k8s.io")
    defaults = [c for c in classes if dig(c.manifest, "globalDefault") is True]
    if len(defaults) > 1:
        names = ", ".join(sorted(c.name for c in defaults))
        yield f"PriorityClasses {names} all set globalDefault: true; keep it on at most one (the lowest)."
    values = {c.name: as_number(dig(c.manifest, "value")) for c in classes}
    known = [v for v in values.values() if v is not None]
    for default in defaults:
        value = values[default.name]
        if value is not None and known and value > min(known):
            lowest = min((n for n, v in values.items() if v is not None), key=lambda n: values[n] or 0.0)
            yield (
                f"{default.label} is the global default but has value {show_number(value)}, above "
                f"PriorityClass '{lowest}' ({show_number(min(known))}); make the lowest class the default."
            )


# A PriorityClass labelled with this (value "controllers") is for platform controllers, never for TPU work.
PRIORITY_CLASS_ROLE_LABEL = "gke-tpu-priority.io/priority-class-role"


def _exempt_priority_classes(resources: Sequence[ResourceView], cfg: Config) -> set[str]:
    """Classes that are not TPU-work classes: configured ones, system-*, labelled controller classes, and those
    only non-TPU pods use."""
    exempt = set(cfg.get("exemptPriorityClasses") or [])
    for resource in resources:
        for obj in resource.objects():
            role = dig(obj.manifest, "metadata", "labels", PRIORITY_CLASS_ROLE_LABEL)
            if obj.kind == "PriorityClass" and role == "controllers":
                exempt.add(obj.name)
    used_by_tpu: set[str] = set()
    used_elsewhere: set[str] = set()
    for resource in resources:
        for obj in resource.objects():
            for _, template in pod_templates(obj):
                pc = dig(template, "spec", "priorityClassName")
                if isinstance(pc, str):
                    (used_by_tpu if targets_tpu(obj) else used_elsewhere).add(pc)
    return exempt | (used_elsewhere - used_by_tpu)


def check_priority_class_pairs(resources: Sequence[ResourceView], cfg: Config) -> Iterator[str]:
    """Every TPU PriorityClass has a WorkloadPriorityClass of the same name and value, and vice versa."""
    exempt = _exempt_priority_classes(resources, cfg)
    pods = {
        c.name: c
        for c in _unique_objects(resources, "PriorityClass", "scheduling.k8s.io")
        if c.name not in exempt and not c.name.startswith("system-")
    }
    kueue = {c.name: c for c in _unique_objects(resources, "WorkloadPriorityClass", KUEUE_GROUP)}
    for name, pod_class in sorted(pods.items()):
        partner = kueue.get(name)
        if partner is None:
            yield (
                f"{pod_class.label} has no WorkloadPriorityClass named '{name}'; declare one with the same "
                f"value so Kueue and kube-scheduler rank TPU work identically (or exempt the class)."
            )
        elif as_number(dig(partner.manifest, "value")) != as_number(dig(pod_class.manifest, "value")):
            yield (
                f"{pod_class.label} has value {dig(pod_class.manifest, 'value')} but {partner.label} has "
                f"{dig(partner.manifest, 'value')}; give both the same value."
            )
    for name, workload_class in sorted(kueue.items()):
        if name not in pods and name not in exempt:
            yield (
                f"{workload_class.label} has no PriorityClass named '{name}'; declare one with the same value "
                "so pod preemption follows Kueue priority."
            )


# --------------------------------------------------------------------------------------------------------
# Checks: Kueue


def check_kueue_api_version(obj: KubeObject, cfg: Config) -> Iterator[str]:
    if obj.group == KUEUE_GROUP and obj.api_version != f"{KUEUE_GROUP}/{KUEUE_VERSION}":
        yield (
            f"{obj.label} uses {obj.api_version}; declare it as {KUEUE_GROUP}/{KUEUE_VERSION}, the storage "
            "version since Kueue v0.16 (v1beta1 is deprecated and lacks fields such as cohortName)."
        )


# Fields of ClusterQueue.spec.preemption in Kueue v1beta2 (v0.19.2 CRD).
CLUSTER_QUEUE_PREEMPTION_FIELDS = frozenset({"withinClusterQueue", "reclaimWithinCohort", "borrowWithinCohort"})


def check_cluster_queue(obj: KubeObject, cfg: Config) -> Iterator[str]:
    spec = mapping(dig(obj.manifest, "spec"))
    if "namespaceSelector" not in spec:
        yield (
            f"{obj.label} has no spec.namespaceSelector, so it admits no workloads; set it "
            "({} admits every namespace, or select the team namespaces)."
        )
    if "cohort" in spec:
        yield f"{obj.label} sets spec.cohort, which v1beta2 drops; use spec.cohortName."
    for unknown in sorted(set(mapping(dig(spec, "preemption"))) - CLUSTER_QUEUE_PREEMPTION_FIELDS):
        allowed = ", ".join(sorted(CLUSTER_QUEUE_PREEMPTION_FIELDS))
        yield (
            f"{obj.label} sets spec.preemption.{unknown}, which Kueue does not have (the API server drops it); "
            f"use only {allowed}."
        )
    for index, group in enumerate(items(dig(spec, "resourceGroups"))):
        if not items(dig(group, "coveredResources")):
            resources = sorted(
                {str(dig(r, "name")) for f in items(dig(group, "flavors")) for r in items(dig(f, "resources"))}
            )
            yield (
                f"{obj.label} spec.resourceGroups[{index}] has no coveredResources; list the resources its "
                f"flavors cover ({', '.join(resources) or 'e.g. google.com/tpu'})."
            )


def check_local_queue_targets(resources: Sequence[ResourceView], cfg: Config) -> Iterator[str]:
    cluster_queues = {c.name for c in _unique_objects(resources, "ClusterQueue", KUEUE_GROUP)}
    external = set(cfg.get("externalClusterQueues") or [])
    for local_queue in _unique_objects(resources, "LocalQueue", KUEUE_GROUP):
        target = dig(local_queue.manifest, "spec", "clusterQueue")
        if not target:
            yield f"{local_queue.label} has no spec.clusterQueue; point it at a ClusterQueue of this stack."
        elif target not in cluster_queues and target not in external:
            known = ", ".join(sorted(cluster_queues)) or "none declared"
            yield (
                f"{local_queue.label} points to ClusterQueue '{target}', which this stack does not declare "
                f"(declared: {known}); fix the name or declare the ClusterQueue."
            )


# --------------------------------------------------------------------------------------------------------
# Checks: JobSet


EXCLUSIVE_TOPOLOGY_ANNOTATION = "alpha.jobset.sigs.k8s.io/exclusive-topology"
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
KUEUE_PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"


def check_tpu_jobset(obj: KubeObject, cfg: Config) -> Iterator[str]:
    if obj.kind != "JobSet" or not targets_tpu(obj):
        return
    annotations = mapping(dig(obj.manifest, "metadata", "annotations"))
    labels = mapping(dig(obj.manifest, "metadata", "labels"))
    topology_key = str(cfg["exclusiveTopologyKey"])
    if annotations.get(EXCLUSIVE_TOPOLOGY_ANNOTATION) != topology_key:
        yield (
            f"TPU {obj.label} lacks annotation {EXCLUSIVE_TOPOLOGY_ANNOTATION}: {topology_key}; add it so each "
            "replicated job gets whole slices (node pools) to itself."
        )
    if not labels.get(QUEUE_NAME_LABEL):
        yield f"TPU {obj.label} lacks label {QUEUE_NAME_LABEL}; set it to a LocalQueue so Kueue admits it."
    kueue_priority = labels.get(KUEUE_PRIORITY_LABEL)
    for where, template in pod_templates(obj):
        pod_priority = dig(template, "spec", "priorityClassName")
        if not pod_priority:
            yield f"TPU {obj.label} {where} pods have no priorityClassName; set one so hotswap preemption works."
        elif kueue_priority is None:
            yield (
                f"TPU {obj.label} has no {KUEUE_PRIORITY_LABEL} label; set it to '{pod_priority}' so Kueue "
                "and the pods share one priority."
            )
        elif pod_priority != kueue_priority:
            yield (
                f"TPU {obj.label} {where} pods use priorityClassName '{pod_priority}' but label "
                f"{KUEUE_PRIORITY_LABEL} is '{kueue_priority}'; make them the same class."
            )


# --------------------------------------------------------------------------------------------------------
# Checks: GKE node pools and clusters


TPU_MACHINE_PREFIX = "ct6e-"
DEFAULT_COMPUTE_SA = re.compile(r"^\d+-compute@developer\.gserviceaccount\.com$")


def _machine_type(props: Mapping[str, Any]) -> str:
    return str(dig(props, "nodeConfig", "machineType", default=""))


def chips_per_host(machine_type: str) -> int | None:
    """``ct6e-standard-4t`` -> 4."""
    match = re.search(r"-(\d+)t$", machine_type)
    return int(match.group(1)) if match else None


def topology_chips(topology: str) -> int | None:
    """``4x4`` -> 16."""
    if not re.fullmatch(r"\d+(x\d+)+", topology):
        return None
    total = 1
    for part in topology.split("x"):
        total *= int(part)
    return total


def _is_flex_start(props: Mapping[str, Any]) -> bool:
    return bool(dig(props, "nodeConfig", "flexStart")) or bool(dig(props, "queuedProvisioning", "enabled"))


def check_tpu_node_pool_placement(props: Mapping[str, Any], name: str, cfg: Config) -> Iterator[str]:
    machine = _machine_type(props)
    if not machine.startswith(TPU_MACHINE_PREFIX):
        return
    placement = mapping(dig(props, "placementPolicy"))
    topology = str(dig(placement, "tpuTopology", default=""))
    per_host, chips = chips_per_host(machine), topology_chips(topology)
    per_zone_max = as_number(dig(props, "autoscaling", "maxNodeCount"))
    zones = dig(props, "nodeLocations", default=[])
    node_count = (
        as_number(dig(props, "nodeCount"))
        or as_number(dig(props, "autoscaling", "totalMaxNodeCount"))
        or (per_zone_max * max(1, len(zones) if isinstance(zones, list) else 1) if per_zone_max else None)
        or as_number(dig(props, "initialNodeCount"))
        or 1.0
    )
    # Without a tpuTopology a pool holds single-host slices (one VM each, any count); with one it is one slice.
    if placement and dig(placement, "type") == "COMPACT" and not topology and per_host is not None:
        yield (
            f"TPU node pool '{name}' ({machine}) has COMPACT placement but no placementPolicy.tpuTopology; "
            "set the slice topology (for example '4x4') so GKE builds one multi-host slice."
        )
    multi_host = chips is not None and per_host is not None and chips > per_host
    if not multi_host:
        return
    if dig(placement, "type") != "COMPACT":
        yield f"TPU node pool '{name}' ({machine}) is a multi-host slice; set placementPolicy.type to COMPACT."
    if chips is not None and per_host and node_count * per_host != chips:
        yield (
            f"TPU node pool '{name}' has {show_number(node_count)} nodes x {per_host} chips but topology "
            f"{topology} needs {chips} chips; set nodeCount to {chips // per_host}."
        )


def check_spot_and_reservation(props: Mapping[str, Any], name: str, cfg: Config) -> Iterator[str]:
    spot = bool(dig(props, "nodeConfig", "spot")) or bool(dig(props, "nodeConfig", "preemptible"))
    reservation = dig(props, "nodeConfig", "reservationAffinity", "consumeReservationType")
    if spot and reservation in ("SPECIFIC_RESERVATION", "ANY_RESERVATION"):
        yield (
            f"Node pool '{name}' is Spot and also consumes a reservation ({reservation}); choose one: "
            "remove spot or set consumeReservationType to NO_RESERVATION."
        )


def check_node_service_account(props: Mapping[str, Any], name: str, cfg: Config) -> Iterator[str]:
    account = dig(props, "nodeConfig", "serviceAccount")
    if not account or account == "default" or DEFAULT_COMPUTE_SA.match(str(account)):
        yield (
            f"Node pool '{name}' runs as the Compute Engine default service account; set "
            "nodeConfig.serviceAccount to a dedicated least-privilege service account (CIS GKE 5.2.1)."
        )


def check_gke_metadata_server(props: Mapping[str, Any], name: str, cfg: Config) -> Iterator[str]:
    mode = dig(props, "nodeConfig", "workloadMetadataConfig", "mode")
    if mode != "GKE_METADATA":
        yield (
            f"Node pool '{name}' has workloadMetadataConfig.mode {mode or 'unset'}; set it to GKE_METADATA "
            "so pods cannot read node credentials (CIS GKE 5.4.1)."
        )


def check_shielded_nodes(props: Mapping[str, Any], name: str, cfg: Config) -> Iterator[str]:
    shielded = mapping(dig(props, "nodeConfig", "shieldedInstanceConfig"))
    if shielded.get("enableSecureBoot") is not True:
        yield f"Node pool '{name}' does not enable Secure Boot; set shieldedInstanceConfig.enableSecureBoot."
    if shielded.get("enableIntegrityMonitoring") is False:
        yield f"Node pool '{name}' disables integrity monitoring; set enableIntegrityMonitoring to true."


def check_auto_repair(props: Mapping[str, Any], name: str, cfg: Config) -> Iterator[str]:
    if _is_flex_start(props):
        return  # flex-start / queued-provisioning pools are replaced, not repaired
    if dig(props, "management", "autoRepair") is not True:
        yield f"Node pool '{name}' does not enable auto-repair; set management.autoRepair to true."


def check_cluster_workload_identity(props: Mapping[str, Any], name: str, cfg: Config) -> Iterator[str]:
    if not dig(props, "workloadIdentityConfig", "workloadPool"):
        yield (
            f"Cluster '{name}' has no workloadIdentityConfig.workloadPool; set it to '<project>.svc.id.goog' "
            "(CIS GKE 5.2.2)."
        )


def check_cluster_legacy_abac(props: Mapping[str, Any], name: str, cfg: Config) -> Iterator[str]:
    if dig(props, "enableLegacyAbac") is True:
        yield f"Cluster '{name}' enables legacy ABAC; set enableLegacyAbac to false (CIS GKE 5.8.3)."


def check_cluster_client_certificate(props: Mapping[str, Any], name: str, cfg: Config) -> Iterator[str]:
    if dig(props, "masterAuth", "clientCertificateConfig", "issueClientCertificate") is True:
        yield (
            f"Cluster '{name}' issues client certificates; set masterAuth.clientCertificateConfig."
            "issueClientCertificate to false (CIS GKE 5.8.1)."
        )


def check_cluster_release_channel(props: Mapping[str, Any], name: str, cfg: Config) -> Iterator[str]:
    channel = dig(props, "releaseChannel", "channel")
    allowed = list(cfg["allowedChannels"])
    if channel not in allowed:
        yield (
            f"Cluster '{name}' has release channel {channel or 'unset'}; "
            f"set releaseChannel.channel to one of {allowed}."
        )


def is_production(urn: str, stack_tags: Mapping[str, str], cfg: Config) -> bool:
    if cfg.get("production") is not None:
        return bool(cfg["production"])
    tag = stack_tags.get(str(cfg["productionTagKey"]), "")
    return stack_name_from_urn(urn) in set(cfg["productionStacks"]) or tag in set(cfg["productionTagValues"])


# --------------------------------------------------------------------------------------------------------
# Checks: reconciler Deployment and RBAC


def check_restricted_pod_security(obj: KubeObject, cfg: Config) -> Iterator[str]:
    for where, template in pod_templates(obj):
        spec = mapping(dig(template, "spec"))
        pod_context = mapping(dig(spec, "securityContext"))
        for container in items(dig(spec, "containers")) + items(dig(spec, "initContainers")):
            context = mapping(dig(container, "securityContext"))
            who = f"{obj.label} {where} container '{dig(container, 'name', default='?')}'"
            if dig(context, "runAsNonRoot", default=dig(pod_context, "runAsNonRoot")) is not True:
                yield f"{who} may run as root; set securityContext.runAsNonRoot: true."
            if as_number(dig(context, "runAsUser", default=dig(pod_context, "runAsUser"))) == 0:
                yield f"{who} sets runAsUser 0; use a non-zero UID."
            if dig(context, "readOnlyRootFilesystem") is not True:
                yield f"{who} has a writable root filesystem; set readOnlyRootFilesystem: true."
            if dig(context, "allowPrivilegeEscalation") is not False:
                yield f"{who} allows privilege escalation; set allowPrivilegeEscalation: false."
            if dig(context, "privileged") is True:
                yield f"{who} is privileged; remove privileged: true."
            if "ALL" not in items(dig(context, "capabilities", "drop")):
                yield f"{who} keeps Linux capabilities; set capabilities.drop: [ALL]."
            seccomp = dig(context, "seccompProfile", "type", default=dig(pod_context, "seccompProfile", "type"))
            if seccomp not in ("RuntimeDefault", "Localhost"):
                yield f"{who} has seccomp profile {seccomp or 'unset'}; set seccompProfile.type: RuntimeDefault."


FORBIDDEN_VERBS = frozenset({"bind", "escalate", "impersonate"})
FORBIDDEN_SUBRESOURCES = frozenset({"pods/exec", "pods/attach", "pods/portforward", "nodes/proxy"})


def check_cluster_role(obj: KubeObject, cfg: Config) -> Iterator[str]:
    for index, rule in enumerate(items(dig(obj.manifest, "rules"))):
        where = f"{obj.label} rules[{index}]"
        verbs = {str(v) for v in items(dig(rule, "verbs"))}
        resources = {str(r) for r in items(dig(rule, "resources"))}
        groups = {str(g) for g in items(dig(rule, "apiGroups"))}
        if "*" in verbs or "*" in resources or "*" in groups:
            yield f"{where} uses a '*' wildcard; list the exact apiGroups, resources and verbs needed."
        if "secrets" in resources:
            yield f"{where} grants access to secrets; the reconciler must not read secrets, remove it."
        if verbs & FORBIDDEN_VERBS:
            yield f"{where} grants {', '.join(sorted(verbs & FORBIDDEN_VERBS))}; remove these escalation verbs."
        if resources & FORBIDDEN_SUBRESOURCES:
            yield f"{where} grants {', '.join(sorted(resources & FORBIDDEN_SUBRESOURCES))}; remove them."
        if "pods" in resources and "" in groups and verbs & {"delete", "deletecollection"}:
            yield f"{where} lets the holder delete pods; evict through pods/eviction instead."


# --------------------------------------------------------------------------------------------------------
# Adapters: pure checks -> pulumi_policy objects


KubeCheck = Callable[[KubeObject, Config], Iterable[str]]
PropsCheck = Callable[[Mapping[str, Any], str, Config], Iterable[str]]
StackCheck = Callable[[Sequence[ResourceView], Config], Iterable[str]]


def _config_schema(properties: Mapping[str, Mapping[str, Any]] | None) -> PolicyConfigSchema | None:
    return PolicyConfigSchema(properties={k: dict(v) for k, v in properties.items()}) if properties else None


def effective_config(policy: ResourceValidationPolicy | StackValidationPolicy, given: Config) -> dict[str, Any]:
    """Schema defaults overlaid with the configured values (the engine fills defaults; unit tests may not)."""
    schema = policy.config_schema.properties if policy.config_schema else {}
    merged = {key: spec["default"] for key, spec in schema.items() if "default" in spec}
    merged.update(given)
    return merged


def _resource_policy(
    name: str,
    description: str,
    validate: Callable[[ResourceValidationArgs, ReportViolation], None],
    enforcement_level: EnforcementLevel,
    severity: Severity,
    config: Mapping[str, Mapping[str, Any]] | None,
    tags: Sequence[str],
) -> ResourceValidationPolicy:
    return ResourceValidationPolicy(
        name=name,
        description=description,
        validate=validate,
        enforcement_level=enforcement_level,
        severity=severity,
        config_schema=_config_schema(config),
        tags=list(tags),
    )


def kubernetes_policy(
    name: str,
    description: str,
    kinds: Iterable[str],
    check: KubeCheck,
    *,
    enforcement_level: EnforcementLevel = EnforcementLevel.MANDATORY,
    severity: Severity = Severity.HIGH,
    config: Mapping[str, Mapping[str, Any]] | None = None,
    tags: Sequence[str] = (),
) -> ResourceValidationPolicy:
    """A resource policy over Kubernetes objects of ``kinds``, whether declared alone or in a ConfigGroup."""
    wanted = frozenset(kinds)

    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        cfg = effective_config(policy, args.get_config())
        for obj in kubernetes_objects(args.resource_type, args.props, args.name):
            if obj.kind in wanted:
                for message in check(obj, cfg):
                    report_violation(message, None)

    policy = _resource_policy(name, description, validate, enforcement_level, severity, config, tags)
    return policy


def gcp_policy(
    name: str,
    description: str,
    resource_type: str,
    check: PropsCheck,
    *,
    enforcement_level: EnforcementLevel = EnforcementLevel.MANDATORY,
    severity: Severity = Severity.HIGH,
    config: Mapping[str, Mapping[str, Any]] | None = None,
    tags: Sequence[str] = (),
) -> ResourceValidationPolicy:
    """A resource policy over one GCP resource type's input props."""

    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        if args.resource_type != resource_type:
            return
        cfg = effective_config(policy, args.get_config())
        for message in check(args.props, args.name, cfg):
            report_violation(message, None)

    policy = _resource_policy(name, description, validate, enforcement_level, severity, config, tags)
    return policy


def stack_policy(
    name: str,
    description: str,
    check: StackCheck,
    *,
    enforcement_level: EnforcementLevel = EnforcementLevel.MANDATORY,
    severity: Severity = Severity.HIGH,
    config: Mapping[str, Mapping[str, Any]] | None = None,
    tags: Sequence[str] = (),
) -> StackValidationPolicy:
    """A stack policy: ``check`` sees every resource of the stack."""

    def validate(args: StackValidationArgs, report_violation: ReportViolation) -> None:
        cfg = effective_config(policy, args.get_config())
        views = [ResourceView(r.resource_type, r.name, r.urn, r.props) for r in args.resources]
        for message in check(views, cfg):
            report_violation(message, None)

    policy = StackValidationPolicy(
        name=name,
        description=description,
        validate=validate,
        enforcement_level=enforcement_level,
        severity=severity,
        config_schema=_config_schema(config),
        tags=list(tags),
    )
    return policy


# --------------------------------------------------------------------------------------------------------
# The policies


PRIORITY_CLASS_VALUE_IN_BAND = kubernetes_policy(
    "kubernetes-scheduling-v1-priorityclass-value-in-band",
    "PriorityClass values must lie in the user range (at most 1,000,000,000) and in the configured band.",
    ["PriorityClass"],
    check_priority_class_value,
    config={
        "maxValue": {
            "type": "number",
            "default": MAX_USER_PRIORITY,
            "maximum": MAX_USER_PRIORITY,
            "description": "Highest value a PriorityClass may use.",
        },
        "minValue": {"type": "number", "default": -2147483648, "description": "Lowest value allowed."},
        "allowedValues": {
            "type": "array",
            "items": {"type": "number"},
            "default": [],
            "description": "When non-empty, the only values PriorityClasses may use.",
        },
    },
    tags=["priority"],
)

PRIORITY_CLASS_SINGLE_GLOBAL_DEFAULT = stack_policy(
    "kubernetes-scheduling-v1-priorityclass-single-global-default",
    "At most one PriorityClass may be the global default, and it must have the lowest value.",
    check_global_default,
    tags=["priority"],
)

PRIORITY_CLASSES_MATCH_WORKLOAD_PRIORITY_CLASSES = stack_policy(
    "kueue-workloadpriorityclass-matches-priorityclass",
    "Every PriorityClass used for TPU work must have a Kueue WorkloadPriorityClass of the same name and value, "
    "and every WorkloadPriorityClass a matching PriorityClass.",
    check_priority_class_pairs,
    config={
        "exemptPriorityClasses": {
            "type": "array",
            "items": {"type": "string"},
            "default": [],
            "description": "PriorityClasses that are not for TPU work (for example the reconciler's own class).",
        },
    },
    tags=["priority", "kueue"],
)

KUEUE_REQUIRE_V1BETA2 = kubernetes_policy(
    "kueue-require-v1beta2",
    "Kueue objects must be declared with the kueue.x-k8s.io/v1beta2 API, not the deprecated v1beta1.",
    [
        "ClusterQueue",
        "LocalQueue",
        "ResourceFlavor",
        "WorkloadPriorityClass",
        "Cohort",
        "Topology",
        "AdmissionCheck",
        "ProvisioningRequestConfig",
    ],
    check_kueue_api_version,
    tags=["kueue"],
)

KUEUE_CLUSTER_QUEUE_SHAPE = kubernetes_policy(
    "kueue-v1beta2-clusterqueue-valid-spec",
    "ClusterQueues must set a namespaceSelector, use cohortName, cover every resource group's resources, "
    "and use only preemption fields Kueue has.",
    ["ClusterQueue"],
    check_cluster_queue,
    tags=["kueue"],
)

KUEUE_LOCAL_QUEUE_TARGETS_EXISTING_CLUSTER_QUEUE = stack_policy(
    "kueue-v1beta2-localqueue-targets-existing-clusterqueue",
    "Every LocalQueue must point to a ClusterQueue that the same stack declares.",
    check_local_queue_targets,
    config={
        "externalClusterQueues": {
            "type": "array",
            "items": {"type": "string"},
            "default": [],
            "description": "ClusterQueues managed outside this stack.",
        },
    },
    tags=["kueue"],
)

JOBSET_TPU_CONVENTIONS = kubernetes_policy(
    "jobset-v1alpha2-tpu-jobset-require-priority-and-placement",
    "JobSets that target TPU nodes must carry the exclusive-topology annotation, a Kueue queue-name label, and "
    "a pod priorityClassName equal to their Kueue priority-class label.",
    ["JobSet"],
    check_tpu_jobset,
    config={
        "exclusiveTopologyKey": {
            "type": "string",
            "default": "cloud.google.com/gke-nodepool",
            "description": "Node label the exclusive-topology annotation must name.",
        },
    },
    tags=["priority", "jobset"],
)

NODE_POOL_TYPE = "gcp:container/nodePool:NodePool"
CLUSTER_TYPE = "gcp:container/cluster:Cluster"

GKE_TPU_NODE_POOL_PLACEMENT = gcp_policy(
    "gcp-container-nodepool-tpu-compact-placement",
    "Multi-host TPU v6e node pools (a tpuTopology larger than one VM) must use COMPACT placement and a node count "
    "that matches the topology.",
    NODE_POOL_TYPE,
    check_tpu_node_pool_placement,
    tags=["gke", "tpu"],
)
GKE_NODE_POOL_SPOT_XOR_RESERVATION = gcp_policy(
    "gcp-container-nodepool-disallow-spot-with-reservation",
    "A node pool must not be Spot and consume a reservation at the same time.",
    NODE_POOL_TYPE,
    check_spot_and_reservation,
    tags=["gke", "tpu"],
)
GKE_NODE_POOL_SERVICE_ACCOUNT = gcp_policy(
    "gcp-container-nodepool-disallow-default-service-account",
    "Node pools must run as a dedicated service account, not the Compute Engine default one.",
    NODE_POOL_TYPE,
    check_node_service_account,
    tags=["gke", "cis"],
)
GKE_NODE_POOL_METADATA_SERVER = gcp_policy(
    "gcp-container-nodepool-require-gke-metadata-server",
    "Node pools must use the GKE metadata server (workloadMetadataConfig.mode GKE_METADATA).",
    NODE_POOL_TYPE,
    check_gke_metadata_server,
    tags=["gke", "cis"],
)
GKE_NODE_POOL_SHIELDED = gcp_policy(
    "gcp-container-nodepool-enable-secure-boot",
    "Node pools should enable Secure Boot and keep integrity monitoring on.",
    NODE_POOL_TYPE,
    check_shielded_nodes,
    # Advisory: Secure Boot on ct6e TPU VMs is not yet verified on a real pool (security research a.1 #5).
    enforcement_level=EnforcementLevel.ADVISORY,
    severity=Severity.MEDIUM,
    tags=["gke", "cis"],
)
GKE_NODE_POOL_AUTO_REPAIR = gcp_policy(
    "gcp-container-nodepool-enable-auto-repair",
    "Node pools must enable auto-repair, except flex-start and queued-provisioning pools.",
    NODE_POOL_TYPE,
    check_auto_repair,
    tags=["gke", "cis"],
)
GKE_CLUSTER_WORKLOAD_IDENTITY = gcp_policy(
    "gcp-container-cluster-enable-workload-identity",
    "Clusters must enable Workload Identity.",
    CLUSTER_TYPE,
    check_cluster_workload_identity,
    tags=["gke", "cis"],
)
GKE_CLUSTER_LEGACY_ABAC = gcp_policy(
    "gcp-container-cluster-disable-legacy-abac",
    "Clusters must not enable legacy ABAC authorization.",
    CLUSTER_TYPE,
    check_cluster_legacy_abac,
    tags=["gke", "cis"],
)
GKE_CLUSTER_CLIENT_CERTIFICATE = gcp_policy(
    "gcp-container-cluster-disable-client-certificate",
    "Clusters must not issue client certificates.",
    CLUSTER_TYPE,
    check_cluster_client_certificate,
    tags=["gke", "cis"],
)
GKE_CLUSTER_RELEASE_CHANNEL = gcp_policy(
    "gcp-container-cluster-require-release-channel",
    "Clusters must be enrolled in an allowed release channel.",
    CLUSTER_TYPE,
    check_cluster_release_channel,
    config={
        "allowedChannels": {
            "type": "array",
            "items": {"type": "string"},
            "default": ["REGULAR", "STABLE", "RAPID"],
            "description": "Release channels clusters may use.",
        },
    },
    tags=["gke", "cis"],
)


_DELETION_PROTECTION_CONFIG: dict[str, dict[str, Any]] = {
    "production": {
        "type": ["boolean", "null"],
        "default": None,
        "description": "Force production (true) or non-production (false); null decides from the stack.",
    },
    "productionStacks": {
        "type": "array",
        "items": {"type": "string"},
        "default": ["prod", "production"],
        "description": "Stack names treated as production.",
    },
    "productionTagKey": {
        "type": "string",
        "default": "environment",
        "description": "Stack tag that marks the environment.",
    },
    "productionTagValues": {
        "type": "array",
        "items": {"type": "string"},
        "default": ["prod", "production"],
        "description": "Values of that tag that mean production.",
    },
}


def _validate_deletion_protection(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    if args.resource_type != CLUSTER_TYPE:
        return
    cfg = effective_config(GKE_CLUSTER_DELETION_PROTECTION, args.get_config())
    if is_production(args.urn, args.stack_tags, cfg) and dig(args.props, "deletionProtection") is not True:
        report_violation(
            f"Cluster '{args.name}' is in a production stack but deletionProtection is not true; set it to true.",
            None,
        )


GKE_CLUSTER_DELETION_PROTECTION = ResourceValidationPolicy(
    name="gcp-container-cluster-enable-deletion-protection",
    description="Clusters in production stacks must set deletionProtection to true.",
    validate=_validate_deletion_protection,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    config_schema=_config_schema(_DELETION_PROTECTION_CONFIG),
    tags=["gke", "reliability"],
)

DEPLOYMENT_POD_SECURITY_RESTRICTED = kubernetes_policy(
    "kubernetes-apps-v1-deployment-pod-security-restricted",
    "Deployments must run non-root with a read-only root filesystem, no privilege escalation, all "
    "capabilities dropped and the RuntimeDefault seccomp profile.",
    ["Deployment"],
    check_restricted_pod_security,
    tags=["kubernetes", "pss"],
)

CLUSTER_ROLE_LEAST_PRIVILEGE = kubernetes_policy(
    "kubernetes-rbac-v1-clusterrole-least-privilege",
    "ClusterRoles and Roles must not use wildcards, read secrets, grant bind/escalate/impersonate, "
    "exec into pods or delete pods.",
    ["ClusterRole", "Role"],
    check_cluster_role,
    tags=["kubernetes", "rbac"],
)

RESOURCE_POLICIES: list[ResourceValidationPolicy] = [
    PRIORITY_CLASS_VALUE_IN_BAND,
    KUEUE_REQUIRE_V1BETA2,
    KUEUE_CLUSTER_QUEUE_SHAPE,
    JOBSET_TPU_CONVENTIONS,
    GKE_TPU_NODE_POOL_PLACEMENT,
    GKE_NODE_POOL_SPOT_XOR_RESERVATION,
    GKE_NODE_POOL_SERVICE_ACCOUNT,
    GKE_NODE_POOL_METADATA_SERVER,
    GKE_NODE_POOL_SHIELDED,
    GKE_NODE_POOL_AUTO_REPAIR,
    GKE_CLUSTER_WORKLOAD_IDENTITY,
    GKE_CLUSTER_LEGACY_ABAC,
    GKE_CLUSTER_CLIENT_CERTIFICATE,
    GKE_CLUSTER_RELEASE_CHANNEL,
    GKE_CLUSTER_DELETION_PROTECTION,
    DEPLOYMENT_POD_SECURITY_RESTRICTED,
    CLUSTER_ROLE_LEAST_PRIVILEGE,
]
STACK_POLICIES: list[StackValidationPolicy] = [
    PRIORITY_CLASS_SINGLE_GLOBAL_DEFAULT,
    PRIORITY_CLASSES_MATCH_WORKLOAD_PRIORITY_CLASSES,
    KUEUE_LOCAL_QUEUE_TARGETS_EXISTING_CLUSTER_QUEUE,
]
ALL: list[Policy] = [*RESOURCE_POLICIES, *STACK_POLICIES]


# --------------------------------------------------------------------------------------------------------
# Running the pack without the Pulumi CLI


@dataclass(frozen=True)
class Violation:
    """One reported violation, as the CLI would print it."""

    policy: str
    message: str
    enforcement_level: EnforcementLevel
    resource_urn: str | None = None

    @property
    def blocking(self) -> bool:
        return self.enforcement_level in (EnforcementLevel.MANDATORY, EnforcementLevel.REMEDIATE)


def _no_options(parent: str | None = None) -> PolicyResourceOptions:
    return PolicyResourceOptions(False, [], False, [], PolicyCustomTimeouts(0, 0, 0), [], parent)


def _policy_settings(
    policy: ResourceValidationPolicy | StackValidationPolicy, pack_config: Config
) -> tuple[EnforcementLevel, dict[str, Any]]:
    """Enforcement level and properties for a policy from a --policy-pack-config style mapping."""
    level = policy.enforcement_level or EnforcementLevel.ADVISORY
    if "all" in pack_config:
        level = EnforcementLevel(pack_config["all"])
    entry = pack_config.get(policy.name)
    if isinstance(entry, str | EnforcementLevel):
        return EnforcementLevel(entry), {}
    properties = dict(entry or {})
    if "enforcementLevel" in properties:
        level = EnforcementLevel(properties.pop("enforcementLevel"))
    return level, properties


def _run(result: Any) -> None:
    if inspect.isawaitable(result):
        import asyncio

        async def wait() -> None:
            await result

        asyncio.run(wait())


def evaluate_resources(
    resources: list[dict[str, Any]],
    config: Mapping[str, Any] | None = None,
    stack_tags: Mapping[str, str] | None = None,
) -> list[Violation]:
    """Run every policy over resources shaped like ``build/<stack>/resources.json`` entries.

    Each resource is ``{"urn", "type", "name", "parent", "inputs"}``; secrets are unwrapped first. ``config``
    has the ``--policy-pack-config`` shape (``{"all": "advisory", "<policy>": {"enforcementLevel": ...,
    <properties>}}``). Disabled policies are skipped.
    """
    pack_config = config or {}
    tags = dict(stack_tags or {})
    prepared = [
        (
            str(r["type"]),
            str(r.get("name", "")),
            str(r.get("urn", "")),
            unwrap_secrets(r.get("inputs") or {}),
            r,
        )
        for r in resources
    ]
    violations: list[Violation] = []
    for policy in RESOURCE_POLICIES:
        level, properties = _policy_settings(policy, pack_config)
        if level is EnforcementLevel.DISABLED:
            continue
        for resource_type, name, urn, props, raw in prepared:
            args = ResourceValidationArgs(
                resource_type, props, urn, name, _no_options(raw.get("parent")), None, properties, tags
            )

            def report(
                message: str, urn_: str | None = None, *, _urn: str = urn, _p: Any = policy, _l: Any = level
            ) -> None:
                violations.append(Violation(_p.name, message, _l, urn_ or _urn))

            _run(policy.validate(args, report))
    policy_resources = [
        PolicyResource(resource_type, props, urn, name, _no_options(raw.get("parent")), None, None, [], {})
        for resource_type, name, urn, props, raw in prepared
    ]
    for stack in STACK_POLICIES:
        level, properties = _policy_settings(stack, pack_config)
        if level is EnforcementLevel.DISABLED:
            continue

        def report_stack(message: str, urn_: str | None = None, *, _p: Any = stack, _l: Any = level) -> None:
            violations.append(Violation(_p.name, message, _l, urn_))

        _run(stack.validate(StackValidationArgs(policy_resources, properties, tags), report_stack))
    return violations
