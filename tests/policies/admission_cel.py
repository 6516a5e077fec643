"""Evaluate ValidatingAdmissionPolicies and their bindings offline, the way the API server does, with cel-python.

Why it stays beside `make e2e`: policy authors run the three-front-ends table without Go; e2e runs the same table
on the real server (e2e/test_admission_cases.py).

Uses the CEL environment and Kubernetes library functions of tests/support/crd_validation.py (``compile_rule``),
so an expression calling a function neither implements fails here rather than on a real server. The request
is what the API server builds: ``request.kind``, ``namespace``, ``operation``, ``userInfo``; ``object`` as JSON
(built-in quantities are strings there, as the API server serializes them), after the defaulting and mutating
admission the server applies first (``tests.support.apiserver_defaults``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from celpy import celtypes
from celpy.adapter import json_to_cel

from tests.support.apiserver_defaults import server_view
from tests.support.crd_validation import compile_rule

RESOURCES = {
    "JobSet": ("jobset.x-k8s.io", "v1alpha2", "jobsets"),
    "Job": ("batch", "v1", "jobs"),
    "Pod": ("", "v1", "pods"),
    "Deployment": ("apps", "v1", "deployments"),
    "StatefulSet": ("apps", "v1", "statefulsets"),
    "ReplicaSet": ("apps", "v1", "replicasets"),
    "DaemonSet": ("apps", "v1", "daemonsets"),
    "CronJob": ("batch", "v1", "cronjobs"),
    "Workload": ("kueue.x-k8s.io", "v1beta2", "workloads"),
    "Node": ("", "v1", "nodes"),
}


@dataclass
class Outcome:
    matched: bool
    failures: list[str] = field(default_factory=list)  # messageExpression results of failed validations
    messages: list[str] = field(default_factory=list)  # their static messages

    @property
    def rules(self) -> set[str]:
        """Names of the rules refused (messages start with ``[rule-name]``)."""
        return {m[1 : m.index("]")] for m in self.messages}


def request_for(
    obj: Mapping[str, Any], operation: str = "CREATE", username: str = "alice@example.com"
) -> dict[str, Any]:
    group, version, resource = RESOURCES[str(obj["kind"])]
    return {
        "kind": {"group": group, "version": version, "kind": obj["kind"]},
        "resource": {"group": group, "version": version, "resource": resource},
        "namespace": obj.get("metadata", {}).get("namespace", ""),
        "name": obj.get("metadata", {}).get("name", ""),
        "operation": operation,
        "userInfo": {"username": username, "groups": ["system:authenticated"]},
    }


def _evaluate(expression: str, activation: Mapping[str, Any]) -> Any:
    return compile_rule(expression).program.evaluate(dict(activation))


def _resource_matches(rule: Mapping[str, Any], request: Mapping[str, Any]) -> bool:
    res = request["resource"]
    return (
        res["group"] in rule["apiGroups"]
        and res["version"] in rule["apiVersions"]
        and res["resource"] in rule["resources"]
        and request["operation"] in rule["operations"]
    )


def _namespace_selected(binding: Mapping[str, Any], namespace: str) -> bool:
    selector = binding["spec"].get("matchResources", {}).get("namespaceSelector")
    if selector is None:
        return True
    for expression in selector.get("matchExpressions", []):
        assert expression["key"] == "kubernetes.io/metadata.name" and expression["operator"] in ("In", "NotIn")
        if (namespace in expression["values"]) != (expression["operator"] == "In"):
            return False
    return True


def evaluate(
    policies: Sequence[Mapping[str, Any]],
    bindings: Sequence[Mapping[str, Any]],
    obj: Mapping[str, Any],
    *,
    operation: str = "CREATE",
    username: str = "alice@example.com",
    old: Mapping[str, Any] | None = None,
    priority_classes: Sequence[Mapping[str, Any]] = (),
    local_queues: Mapping[str, Sequence[str]] | None = None,
) -> Outcome:
    """What the API server would decide for ``obj`` (as submitted: it is defaulted first) under every policy whose
    binding names it; a CEL error anywhere fails the test (failurePolicy: Fail)."""
    seen = server_view(obj, priority_classes=priority_classes, local_queues=local_queues)
    seen_old = server_view(old, priority_classes=priority_classes, local_queues=local_queues) if old else None
    by_name = {p["metadata"]["name"]: p for p in policies}
    outcome = Outcome(False)
    for binding in bindings:
        one = evaluate_one(by_name[binding["spec"]["policyName"]], binding, seen, operation, username, seen_old)
        outcome.matched |= one.matched
        outcome.failures += one.failures
        outcome.messages += one.messages
    return outcome


def evaluate_one(
    policy: Mapping[str, Any],
    binding: Mapping[str, Any],
    obj: Mapping[str, Any],
    operation: str,
    username: str,
    old: Mapping[str, Any] | None,
) -> Outcome:
    """One policy's verdict on ``obj`` exactly as given (no defaulting)."""
    request = request_for(obj, operation, username)
    spec = policy["spec"]
    if not any(_resource_matches(r, request) for r in spec["matchConstraints"]["resourceRules"]):
        return Outcome(False)
    if not _namespace_selected(binding, request["namespace"]):
        return Outcome(False)
    activation: dict[str, Any] = {
        "object": json_to_cel(dict(obj)),
        "oldObject": json_to_cel(dict(old)) if old is not None else None,
        "request": json_to_cel(request),
    }
    for condition in spec.get("matchConditions", []):
        result = _evaluate(condition["expression"], activation)
        assert isinstance(result, celtypes.BoolType), f"matchCondition {condition['name']}: {result!r}"
        if not result:
            return Outcome(False)
    variables: dict[str, Any] = {}
    for variable in spec.get("variables", []):
        activation["variables"] = celtypes.MapType({celtypes.StringType(k): v for k, v in variables.items()})
        variables[variable["name"]] = _evaluate(variable["expression"], activation)
    activation["variables"] = celtypes.MapType({celtypes.StringType(k): v for k, v in variables.items()})
    outcome = Outcome(True)
    for validation in spec["validations"]:
        result = _evaluate(validation["expression"], activation)
        assert isinstance(result, celtypes.BoolType), f"{validation['expression'][:80]}: {result!r}"
        if not result:
            message = _evaluate(validation["messageExpression"], activation)
            assert isinstance(message, str) and message, validation["messageExpression"]
            outcome.failures.append(str(message))
            outcome.messages.append(validation["message"])
    return outcome
