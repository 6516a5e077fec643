"""Helpers for policy unit tests, mirroring pulumi/compliance-policies' unit-test-helpers in Python.

Policies are called the way the policy host calls them: ``policy.validate(args, report_violation)`` with
``ResourceValidationArgs``/``StackValidationArgs`` built from engine-style props (camelCase, float numbers).
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    PolicyCustomTimeouts,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import unknown_checking_proxy

from gke_tpu_priority.policies import rules

AnyPolicy = ResourceValidationPolicy | StackValidationPolicy
LOWER_KEBAB = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


def urn_for(resource_type: str, name: str, stack: str = "dev", project: str = "gke-tpu-priority") -> str:
    return f"urn:pulumi:{stack}::{project}::{resource_type}::{name}"


def options() -> PolicyResourceOptions:
    return PolicyResourceOptions(False, [], False, [], PolicyCustomTimeouts(0, 0, 0), [], None)


def engine_values(value: Any) -> Any:
    """Props as the engine delivers them: every number is a float (protobuf Struct)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return float(value)
    if isinstance(value, Mapping):
        return {k: engine_values(v) for k, v in value.items()}
    if isinstance(value, list):
        return [engine_values(v) for v in value]
    return value


def engine_props(props: Mapping[str, Any]) -> Any:
    """Props exactly as the real engine hands them to a policy: numbers as floats, wrapped in pulumi_policy's
    unknown-checking proxies (lists arrive as Sequences, not `list`s; the real engine showed a rule that missed
    that reporting a ClusterQueue with quota as having none)."""
    return unknown_checking_proxy(engine_values(copy.deepcopy(dict(props))))


def resource_args(
    resource_type: str,
    props: Mapping[str, Any],
    config: Mapping[str, Any] | None = None,
    *,
    name: str = "test-resource",
    stack: str = "dev",
    stack_tags: Mapping[str, str] | None = None,
) -> ResourceValidationArgs:
    """``createResourceValidationArgs``: engine-style props for one resource."""
    return ResourceValidationArgs(
        resource_type,
        engine_props(props),
        urn_for(resource_type, name, stack),
        name,
        options(),
        None,
        dict(config or {}),
        dict(stack_tags or {}),
    )


def policy_resource(resource_type: str, props: Mapping[str, Any], name: str) -> PolicyResource:
    return PolicyResource(
        resource_type,
        engine_props(props),
        urn_for(resource_type, name),
        name,
        options(),
        None,
        None,
        [],
        {},
    )


def stack_args(
    resources: Sequence[tuple[str, Mapping[str, Any], str]], config: Mapping[str, Any] | None = None
) -> StackValidationArgs:
    """Stack args from (type, props, name) triples."""
    return StackValidationArgs([policy_resource(t, p, n) for t, p, n in resources], dict(config or {}))


def run_policy(policy: AnyPolicy, args: ResourceValidationArgs | StackValidationArgs) -> list[str]:
    """Every violation message the policy reports for ``args``."""
    messages: list[str] = []

    def report(message: str, urn: str | None = None) -> None:
        messages.append(message)

    result = policy.validate(args, report)  # type: ignore[arg-type]
    if inspect.isawaitable(result):
        loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(result)
        finally:
            loop.close()
    return messages


def assert_has_violation(
    policy: AnyPolicy, args: ResourceValidationArgs | StackValidationArgs, message_substring: str
) -> list[str]:
    messages = run_policy(policy, args)
    assert any(message_substring in m for m in messages), (
        f"{policy.name}: expected a violation containing {message_substring!r}, got {messages}"
    )
    return messages


def assert_no_violations(policy: AnyPolicy, args: ResourceValidationArgs | StackValidationArgs) -> None:
    messages = run_policy(policy, args)
    assert messages == [], f"{policy.name}: expected no violations, got {messages}"


def assert_policy_metadata(policy: AnyPolicy, enforcement_level: EnforcementLevel) -> None:
    """Name is lower-kebab, description a full sentence, default enforcement level as expected."""
    assert LOWER_KEBAB.match(policy.name), f"{policy.name!r} is not lower-kebab-case"
    assert policy.description[0].isupper() and policy.description.endswith("."), (
        f"{policy.name}: description {policy.description!r} is not a full sentence"
    )
    assert policy.enforcement_level is enforcement_level, f"{policy.name}: {policy.enforcement_level}"


__all__ = [
    "assert_has_violation",
    "assert_no_violations",
    "assert_policy_metadata",
    "engine_values",
    "resource_args",
    "rules",
    "run_policy",
    "stack_args",
]
