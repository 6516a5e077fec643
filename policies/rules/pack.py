"""Front end 1: the rule set as Pulumi policies (what ``policies/__main__.py`` serves), and a runner for tests.

Each rule becomes one policy of the same name: object rules and GCP rules are resource policies, whole-picture
rules are stack policies over every Kubernetes object of the stack. Nothing here decides anything.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    Policy,
    PolicyConfigSchema,
    PolicyCustomTimeouts,
    PolicyProviderResource,
    PolicyResource,
    PolicyResourceOptions,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    Severity,
    StackValidationArgs,
    StackValidationPolicy,
)

from . import RULES, gke, kueue_objects, priority_tiers, reconciler_hardening, tpu_workloads
from .base import (
    PULUMI_SECRET_SIGNATURE,
    Config,
    GcpResource,
    GcpRule,
    KubeObject,
    ObjectRule,
    PictureRule,
    Rule,
    kubernetes_objects,
    provider_cluster,
    provider_urn,
    unwrap_secrets,
)

__all__ = ["ALL", "PULUMI_SECRET_SIGNATURE", "RESOURCE_POLICIES", "STACK_POLICIES", "Violation", "evaluate_resources"]

_SEVERITY = {"high": Severity.HIGH, "medium": Severity.MEDIUM, "low": Severity.LOW}


def _config_schema(rule: Rule) -> PolicyConfigSchema | None:
    return PolicyConfigSchema(properties={k: dict(v) for k, v in rule.config.items()}) if rule.config else None


def effective_config(policy: ResourceValidationPolicy | StackValidationPolicy, given: Config) -> dict[str, Any]:
    """Schema defaults overlaid with the configured values (the engine fills defaults; unit tests may not)."""
    schema = policy.config_schema.properties if policy.config_schema else {}
    merged = {key: spec["default"] for key, spec in schema.items() if "default" in spec}
    merged.update(given)
    return merged


def resource_policy(rule: ObjectRule | GcpRule) -> ResourceValidationPolicy:
    """A resource policy: object rules see every manifest a resource declares (alone or in a ConfigGroup)."""

    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        cfg = args.get_config()
        if isinstance(rule, GcpRule):
            if args.resource_type == rule.resource_type:
                resource = GcpResource(args.props, args.name, args.urn, dict(args.stack_tags or {}))
                for message in rule.findings(resource, cfg):
                    report_violation(message, None)
            return
        for obj in kubernetes_objects(args.resource_type, args.props, args.name):
            for message in rule.findings(obj, cfg):
                report_violation(message, None)

    return ResourceValidationPolicy(
        name=rule.name,
        description=rule.description,
        validate=validate,
        enforcement_level=EnforcementLevel(rule.level),
        severity=_SEVERITY[rule.severity],
        config_schema=_config_schema(rule),
        tags=list(rule.tags),
    )


def stack_objects(resources: Sequence[PolicyResource]) -> list[KubeObject]:
    """Every Kubernetes object of the stack, each tagged with the cluster (Kubernetes provider) it goes to."""
    return [
        obj
        for r in resources
        for obj in kubernetes_objects(
            r.resource_type, r.props, r.name, provider_cluster(r.provider.urn if r.provider else "")
        )
    ]


def stack_policy(rule: PictureRule) -> StackValidationPolicy:
    """A stack policy: the rule sees every Kubernetes object of the stack."""

    def validate(args: StackValidationArgs, report_violation: ReportViolation) -> None:
        for finding in rule.findings(stack_objects(args.resources), args.get_config()):
            report_violation(finding.message, None)

    return StackValidationPolicy(
        name=rule.name,
        description=rule.description,
        validate=validate,
        enforcement_level=EnforcementLevel(rule.level),
        severity=_SEVERITY[rule.severity],
        config_schema=_config_schema(rule),
        tags=list(rule.tags),
    )


def policy_for(rule: Rule) -> ResourceValidationPolicy | StackValidationPolicy:
    if isinstance(rule, PictureRule):
        return stack_policy(rule)
    if isinstance(rule, ObjectRule | GcpRule):
        return resource_policy(rule)
    raise TypeError(f"rule {rule.name} has no Pulumi form")


POLICIES: dict[str, ResourceValidationPolicy | StackValidationPolicy] = {r.name: policy_for(r) for r in RULES}
RESOURCE_POLICIES: list[ResourceValidationPolicy] = [
    p for p in POLICIES.values() if isinstance(p, ResourceValidationPolicy)
]
STACK_POLICIES: list[StackValidationPolicy] = [p for p in POLICIES.values() if isinstance(p, StackValidationPolicy)]
ALL: list[Policy] = [*RESOURCE_POLICIES, *STACK_POLICIES]


def _resource(rule: Rule) -> ResourceValidationPolicy:
    policy = POLICIES[rule.name]
    assert isinstance(policy, ResourceValidationPolicy)
    return policy


def _stack(rule: Rule) -> StackValidationPolicy:
    policy = POLICIES[rule.name]
    assert isinstance(policy, StackValidationPolicy)
    return policy


# The policies by name, for tests and users who compose their own pack.
PRIORITY_CLASS_VALUE_IN_BAND = _resource(priority_tiers.PRIORITY_CLASS_VALUE_IN_BAND)
PRIORITY_CLASS_SINGLE_GLOBAL_DEFAULT = _stack(priority_tiers.PRIORITY_CLASS_SINGLE_GLOBAL_DEFAULT)
PRIORITY_CLASSES_MATCH_WORKLOAD_PRIORITY_CLASSES = _stack(
    priority_tiers.PRIORITY_CLASSES_MATCH_WORKLOAD_PRIORITY_CLASSES
)
KUEUE_REQUIRE_V1BETA2 = _resource(kueue_objects.KUEUE_REQUIRE_V1BETA2)
KUEUE_CLUSTER_QUEUE_SHAPE = _resource(kueue_objects.KUEUE_CLUSTER_QUEUE_SHAPE)
KUEUE_LOCAL_QUEUE_TARGETS_EXISTING_CLUSTER_QUEUE = _stack(
    kueue_objects.KUEUE_LOCAL_QUEUE_TARGETS_EXISTING_CLUSTER_QUEUE
)
TPU_WORKLOAD_REQUIRE_QUEUE_NAME = _resource(tpu_workloads.TPU_WORKLOAD_REQUIRE_QUEUE_NAME)
TPU_WORKLOAD_QUEUE_DECLARED = _stack(tpu_workloads.TPU_WORKLOAD_QUEUE_DECLARED)
TPU_WORKLOAD_PRIORITY_MATCHES = _resource(tpu_workloads.TPU_WORKLOAD_PRIORITY_MATCHES)
TPU_WORKLOAD_PRIORITY_TIER_DECLARED = _stack(tpu_workloads.TPU_WORKLOAD_PRIORITY_TIER_DECLARED)
JOBSET_EXCLUSIVE_TOPOLOGY = _resource(tpu_workloads.JOBSET_EXCLUSIVE_TOPOLOGY)
TPU_WORKLOAD_FITS_V6E_SHAPE = _resource(tpu_workloads.TPU_WORKLOAD_FITS_V6E_SHAPE)
GKE_TPU_NODE_POOL_PLACEMENT = _resource(gke.GKE_TPU_NODE_POOL_PLACEMENT)
GKE_NODE_POOL_SPOT_XOR_RESERVATION = _resource(gke.GKE_NODE_POOL_SPOT_XOR_RESERVATION)
GKE_NODE_POOL_SERVICE_ACCOUNT = _resource(gke.GKE_NODE_POOL_SERVICE_ACCOUNT)
GKE_NODE_POOL_METADATA_SERVER = _resource(gke.GKE_NODE_POOL_METADATA_SERVER)
GKE_NODE_POOL_SHIELDED = _resource(gke.GKE_NODE_POOL_SHIELDED)
GKE_NODE_POOL_AUTO_REPAIR = _resource(gke.GKE_NODE_POOL_AUTO_REPAIR)
GKE_CLUSTER_WORKLOAD_IDENTITY = _resource(gke.GKE_CLUSTER_WORKLOAD_IDENTITY)
GKE_CLUSTER_LEGACY_ABAC = _resource(gke.GKE_CLUSTER_LEGACY_ABAC)
GKE_CLUSTER_CLIENT_CERTIFICATE = _resource(gke.GKE_CLUSTER_CLIENT_CERTIFICATE)
GKE_CLUSTER_RELEASE_CHANNEL = _resource(gke.GKE_CLUSTER_RELEASE_CHANNEL)
GKE_CLUSTER_DELETION_PROTECTION = _resource(gke.GKE_CLUSTER_DELETION_PROTECTION)
DEPLOYMENT_POD_SECURITY_RESTRICTED = _resource(reconciler_hardening.DEPLOYMENT_POD_SECURITY_RESTRICTED)
CLUSTER_ROLE_LEAST_PRIVILEGE = _resource(reconciler_hardening.CLUSTER_ROLE_LEAST_PRIVILEGE)


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


def _provider(ref: Any) -> PolicyProviderResource | None:
    """The provider of a resources.json entry (``urn::id``), as the engine gives it to stack policies."""
    if not isinstance(ref, str) or not ref:
        return None
    urn = provider_urn(ref)
    type_name = urn.split("::")[-2] if urn.count("::") >= 3 else ""
    return PolicyProviderResource(type_name, {}, urn, provider_cluster(urn))


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
        PolicyResource(
            resource_type,
            props,
            urn,
            name,
            _no_options(raw.get("parent")),
            _provider(raw.get("provider")),
            None,
            [],
            {},
        )
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
