"""What every rule family shares: reading engine props and manifests, the objects rules look at, and the rule types.

Nothing here imports pulumi_policy: the rule set is also loaded by the CLI and by the admission component,
which do not need the policy SDK. Props are read the way the engine delivers them (camelCase names, numbers
as floats, secrets wrapped) and manifests the way YAML gives them; both go through :func:`dig`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any, Literal

import yaml

Config = Mapping[str, Any]
ConfigSchema = Mapping[str, Mapping[str, Any]]

# --------------------------------------------------------------------------------------------------------
# Property access


PULUMI_SECRET_SIGNATURE = ("4dabf18193072939515e22adb298388d", "1b47061264138c4ac30d75fd1eb44270")
"""Key and value marking a secret in serialized Pulumi properties (what mocks capture)."""


def is_list(value: Any) -> bool:
    """A list in props. The real engine hands policies its values wrapped in pulumi_policy's unknown-checking
    proxies, whose lists are Sequences but not `list`s (the mock runtime hands plain lists)."""
    return isinstance(value, Sequence) and not isinstance(value, str | bytes)


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
    if is_list(value):
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
            if not is_list(current) or not -len(current) <= step < len(current):
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


# Kubernetes quantities (resource.Quantity), for the rules and the tests that restate the servers.

_QUANTITY = re.compile(r"^([+-]?[0-9.]+)([eE][+-]?[0-9]+|[numkMGTPE]|[KMGTPE]i)?$")
_SUFFIX = {
    "": Decimal(1),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
    **{f"{p}i": Decimal(1024) ** (i + 1) for i, p in enumerate("KMGTPE")},
}


def parse_quantity(value: Any) -> Decimal:
    """A resource.Quantity's value (``32``, ``"500m"``, ``"1Gi"``, ``"1e3"``); ValueError if malformed."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a quantity")
    if isinstance(value, int | float):
        return Decimal(str(value))
    match = _QUANTITY.match(str(value))
    if not match:
        raise ValueError(f"{value!r} is not a quantity")
    number, suffix = match.group(1), match.group(2) or ""
    try:
        if suffix[:1] in ("e", "E"):
            return Decimal(number + suffix)
        return Decimal(number) * _SUFFIX[suffix]
    except InvalidOperation as exc:
        raise ValueError(f"{value!r} is not a quantity") from exc


def show_number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def items(value: Any) -> list[Any]:
    value = unwrap_secret(value)
    return [unwrap_secret(v) for v in value] if is_list(value) else []


def mapping(value: Any) -> Mapping[str, Any]:
    value = unwrap_secret(value)
    return value if isinstance(value, Mapping) else {}


# --------------------------------------------------------------------------------------------------------
# Kubernetes objects, from Pulumi resources or from YAML


KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VERSION = "v1beta2"
JOBSET_GROUP = "jobset.x-k8s.io"
CONFIG_GROUP_TYPES = frozenset({"kubernetes:yaml/v2:ConfigGroup", "kubernetes:yaml:ConfigGroup"})
_K8S_TYPE = re.compile(r"^kubernetes:(?P<group>[^/:]+)/(?P<version>[^:]+):(?P<kind>\w+)$")


@dataclass(frozen=True)
class KubeObject:
    """One Kubernetes manifest, from a resource of its own, a ConfigGroup's ``objs``/``yaml``, or a YAML file."""

    api_version: str
    kind: str
    manifest: Mapping[str, Any]
    source: str  # the Pulumi resource name or file the object came from, for messages
    cluster: str = ""
    """The cluster the object goes to (its Kubernetes provider, or the preview's cluster annotation); "" unknown."""

    @property
    def name(self) -> str:
        return str(dig(self.manifest, "metadata", "name", default="") or "")

    @property
    def namespace(self) -> str:
        return str(dig(self.manifest, "metadata", "namespace", default="") or "")

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def ref(self) -> str:
        """``kind namespace/name`` (``kind name`` when cluster-scoped), as kubectl users know objects."""
        where = f"{self.namespace}/{self.name or '?'}" if self.namespace else self.name or "?"
        return f"{self.kind} {where}"

    @property
    def label(self) -> str:
        """How messages name the object: ``ClusterQueue 'tpu-cq'`` plus the Pulumi resource if different."""
        shown = f"{self.kind} '{self.name or '?'}'"
        return shown if self.source in ("", self.name) else f"{shown} (Pulumi resource '{self.source}')"


CLUSTER_ANNOTATION = "preview.gke-tpu-priority.io/cluster"
"""The annotation a fleet preview (tools/fleet_preview.py) puts on each object: the cluster it goes to."""


def provider_urn(provider_ref: str) -> str:
    """The URN of a provider reference: ``urn``, or ``urn::id`` as resources.json and the engine write it."""
    return provider_ref.rsplit("::", 1)[0] if provider_ref.count("::") > 3 else provider_ref


def provider_cluster(provider_ref: str) -> str:
    """The cluster a Kubernetes provider reference stands for: the provider's resource name."""
    return provider_urn(provider_ref).rsplit("::", 1)[-1] if provider_ref else ""


def kubernetes_objects(
    resource_type: str, props: Mapping[str, Any], resource_name: str = "", cluster: str = ""
) -> list[KubeObject]:
    """The manifests a resource declares: itself for a Kubernetes kind, its objects for a ConfigGroup."""
    if resource_type in CONFIG_GROUP_TYPES:
        manifests = [m for m in items(dig(props, "objs")) if isinstance(m, Mapping)]
        text = dig(props, "yaml")
        for chunk in text if is_list(text) else [text]:
            if isinstance(chunk, str):
                manifests += [d for d in yaml.safe_load_all(chunk) if isinstance(d, Mapping)]
        return [manifest_object(m, resource_name, cluster) for m in manifests]
    match = _K8S_TYPE.match(resource_type)
    if not match:
        return []
    group = "" if match["group"] == "core" else match["group"]
    default_api_version = f"{group}/{match['version']}" if group else match["version"]
    api_version = str(dig(props, "apiVersion", default=default_api_version))
    kind = str(dig(props, "kind", default=match["kind"]))
    return [KubeObject(api_version, kind, props, resource_name, cluster)]


def manifest_object(manifest: Mapping[str, Any], source: str = "", cluster: str = "") -> KubeObject:
    """A manifest as an object; its cluster is ``cluster``, else the preview's cluster annotation, else unknown."""
    annotated = mapping(dig(manifest, "metadata", "annotations")).get(CLUSTER_ANNOTATION)
    return KubeObject(
        str(dig(manifest, "apiVersion", default="")),
        str(dig(manifest, "kind", default="")),
        manifest,
        source,
        cluster or (str(annotated) if annotated else ""),
    )


def unique_objects(objects: Iterable[KubeObject]) -> list[KubeObject]:
    """Objects once per (group, kind, namespace, name): a ConfigGroup's objs and its children may both appear."""
    seen: dict[tuple[str, str, str, str], KubeObject] = {}
    for obj in objects:
        seen.setdefault((obj.group, obj.kind, obj.namespace, obj.name), obj)
    return list(seen.values())


def by_cluster(objects: Sequence[KubeObject]) -> list[list[KubeObject]]:
    """The picture of each cluster: objects of one known cluster, plus those whose cluster is unknown.

    A stack holding several clusters (a MultiKueue fleet) declares same-named objects in each, which are
    different objects; objects of no known cluster (a team's workloads given to the CLI) belong to every picture.
    """
    clusters = list(dict.fromkeys(o.cluster for o in objects if o.cluster))
    if not clusters:
        return [list(objects)]
    return [[o for o in objects if o.cluster in (cluster, "")] for cluster in clusters]


def of_kind(objects: Iterable[KubeObject], kind: str, group: str | None = None) -> list[KubeObject]:
    return [o for o in objects if o.kind == kind and (group is None or o.group == group)]


def pod_templates(obj: KubeObject) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(where, pod template) pairs of a JobSet, a workload with a pod template, a CronJob, or a Pod (itself)."""
    if obj.kind == "JobSet":
        for index, job in enumerate(items(dig(obj.manifest, "spec", "replicatedJobs"))):
            where = f"replicatedJobs[{dig(job, 'name', default=index)}]"
            yield where, mapping(dig(job, "template", "spec", "template"))
    elif obj.kind in ("Deployment", "StatefulSet", "DaemonSet", "Job", "ReplicaSet"):
        yield "template", mapping(dig(obj.manifest, "spec", "template"))
    elif obj.kind == "CronJob":
        yield "jobTemplate", mapping(dig(obj.manifest, "spec", "jobTemplate", "spec", "template"))
    elif obj.kind == "Pod":
        yield "pod", obj.manifest


TPU_ACCELERATOR_LABEL = "cloud.google.com/gke-tpu-accelerator"
TPU_TOPOLOGY_LABEL = "cloud.google.com/gke-tpu-topology"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
TPU_RESOURCE = "google.com/tpu"


TPU_TAINT_KEY = "google.com/tpu"
"""The taint GKE puts on every TPU node: only pods that tolerate it are scheduled there."""


def tolerates_tpu(toleration: Any) -> bool:
    """A toleration of GKE's TPU taint: its key, or no key with ``Exists`` (which tolerates every taint)."""
    key = str(dig(toleration, "key", default="") or "")
    return key == TPU_TAINT_KEY or (key == "" and dig(toleration, "operator") == "Exists")


def pod_targets_tpu(template: Mapping[str, Any]) -> bool:
    """True when a pod can reach TPU nodes or chips: it asks for chips (resources), selects TPU nodes
    (accelerator selector), tolerates the TPU taint, or names a node (``spec.nodeName`` bypasses the scheduler
    and with it the taint; which node it names cannot be told from the object)."""
    spec = mapping(dig(template, "spec"))
    if TPU_ACCELERATOR_LABEL in mapping(dig(spec, "nodeSelector")):
        return True
    if dig(spec, "nodeName") or any(tolerates_tpu(t) for t in items(dig(spec, "tolerations"))):
        return True
    for container in items(dig(spec, "containers")) + items(dig(spec, "initContainers")):
        resources = mapping(dig(container, "resources"))
        if any(TPU_RESOURCE in mapping(dig(resources, part)) for part in ("limits", "requests")):
            return True
    return False


def targets_tpu(obj: KubeObject) -> bool:
    """True when any of the object's pods targets TPU (see :func:`pod_targets_tpu`)."""
    return any(pod_targets_tpu(template) for _, template in pod_templates(obj))


# --------------------------------------------------------------------------------------------------------
# Rules: one convention each; front ends (pack, CLI, admission policy) are built from these


Level = Literal["mandatory", "advisory"]
Severity = Literal["high", "medium", "low"]


@dataclass(frozen=True)
class Finding:
    """A violation found by a whole-picture rule; ``subject`` is the object to change, when there is one."""

    message: str
    subject: KubeObject | None = None


@dataclass(frozen=True)
class Rule:
    """Common metadata: the name is the policy name in the pack and the rule name in CLI and admission reports."""

    name: str
    description: str
    family: str
    tags: tuple[str, ...]
    config: ConfigSchema = field(default_factory=dict)
    level: Level = "mandatory"
    severity: Severity = "high"
    admission: AdmissionCel | None = None
    """The rule in CEL, for the in-cluster admission policy (None: the rule has no in-cluster form)."""

    def defaults(self) -> dict[str, Any]:
        return {key: spec["default"] for key, spec in self.config.items() if "default" in spec}

    def effective_config(self, given: Config) -> dict[str, Any]:
        """Schema defaults overlaid with the configured values (the engine fills defaults; other callers may not)."""
        return {**self.defaults(), **given}


ObjectCheck = Callable[[KubeObject, Config], Iterable[str]]
PictureCheck = Callable[[Sequence[KubeObject], Config], Iterable[Finding]]


@dataclass(frozen=True)
class ObjectRule(Rule):
    """A rule about one Kubernetes object of ``kinds``, wherever it is declared (Pulumi resource or YAML)."""

    kinds: frozenset[str] = frozenset()
    check: ObjectCheck = lambda obj, cfg: ()

    def findings(self, obj: KubeObject, cfg: Config) -> Iterator[str]:
        if obj.kind in self.kinds:
            yield from self.check(obj, self.effective_config(cfg))


@dataclass(frozen=True)
class PictureRule(Rule):
    """A rule that needs every object given together (declared tiers, queues, ClusterQueues)."""

    check: PictureCheck = lambda objects, cfg: ()

    def findings(self, objects: Sequence[KubeObject], cfg: Config) -> Iterator[Finding]:
        """The check over each cluster's picture (see :func:`by_cluster`), each finding once."""
        seen: set[str] = set()
        for picture in by_cluster(objects):
            for finding in self.check(unique_objects(picture), self.effective_config(cfg)):
                if finding.message not in seen:
                    seen.add(finding.message)
                    yield finding


@dataclass(frozen=True)
class GcpResource:
    """What a GCP rule reads: the resource's input props, its name and the stack it belongs to."""

    props: Mapping[str, Any]
    name: str
    urn: str = ""
    stack_tags: Mapping[str, str] = field(default_factory=dict)


GcpCheck = Callable[[GcpResource, Config], Iterable[str]]


@dataclass(frozen=True)
class GcpRule(Rule):
    """A rule about one GCP resource type's inputs; only the Pulumi pack sees these (no Kubernetes object)."""

    resource_type: str = ""
    check: GcpCheck = lambda resource, cfg: ()

    def findings(self, resource: GcpResource, cfg: Config) -> Iterator[str]:
        yield from self.check(resource, self.effective_config(cfg))


def stack_name_from_urn(urn: str) -> str:
    """``urn:pulumi:<stack>::<project>::...`` -> ``<stack>``."""
    return urn.split("::", 1)[0].removeprefix("urn:pulumi:") if urn.startswith("urn:pulumi:") else ""


# --------------------------------------------------------------------------------------------------------
# What the admission front end needs from a rule that it can enforce in the cluster


@dataclass(frozen=True)
class AdmissionContext:
    """What the stack declares, for rules whose in-cluster form needs the whole picture (as CEL literals)."""

    tiers: tuple[str, ...]
    local_queues: Mapping[str, tuple[str, ...]]  # namespace -> LocalQueue names
    exclusive_topology_key: str = "cloud.google.com/gke-nodepool"
    hotswap_tiers: tuple[str, ...] = ()
    """Tiers whose JobSets hotswap protects (every tier above the lowest)."""
    entitlements: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Namespace -> the tiers its workloads may use (the stack's teams); a namespace not listed may use every tier."""
    protecting_namespaces: tuple[str, ...] | None = None
    """Namespaces whose teams may set the reconciler's protect annotation; None: every namespace (no teams)."""
    spot_free_tiers: tuple[str, ...] = ()
    """Tiers whose TPU workloads must stay off spot capacity (`priorities[].spot: false`)."""


@dataclass(frozen=True)
class CelValidation:
    """One ``spec.validations`` entry of a ValidatingAdmissionPolicy: refuse when ``expression`` is false."""

    expression: str
    message: str
    message_expression: str
    kinds: frozenset[str] | None = None
    """The kinds (JobSet, Job, Pod) it applies to; None: every kind the rule's policy matches."""


AdmissionCel = Callable[[AdmissionContext], Sequence[CelValidation]]


def cel_string(value: str) -> str:
    """A CEL string literal (single-quoted; JSON escapes are valid CEL escapes)."""
    import json

    return "'" + json.dumps(value)[1:-1].replace("'", "\\'") + "'"


def cel_list(values: Iterable[str]) -> str:
    return "[" + ", ".join(cel_string(v) for v in values) + "]"
