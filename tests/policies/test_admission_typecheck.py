"""The generated ValidatingAdmissionPolicies type-check cleanly for every kind they match.

The API server type-checks a policy's validations per matched kind and publishes what fails as
status.typeChecking.expressionWarnings; tests/support/cel_typecheck.py restates that offline, and also
checks each variable per kind (the server hides a broken variable by making it dyn). The first half proves
the checker catches the errors it must; the second runs it over the package's policies.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gke_tpu_priority.policies import admission
from gke_tpu_priority.policies.rules.base import AdmissionContext
from tests.support.cel_typecheck import (
    BOOL,
    DYN,
    GVK,
    INT,
    STRING,
    TIMESTAMP,
    CelType,
    SchemaResolver,
    TypeChecker,
    UnmodelledCelError,
    check_expression,
    convert_cel_type_to_decl_type,
    describe,
    list_of,
    map_of,
    object_type,
    schema_decl_type,
    types_to_check,
)

POD = GVK("", "v1", "Pod")
JOB = GVK("batch", "v1", "Job")
JOBSET = GVK("jobset.x-k8s.io", "v1alpha2", "JobSet")


@pytest.fixture(scope="module")
def checker() -> TypeChecker:
    return TypeChecker()


def env(checker: TypeChecker, gvk: GVK, variables: dict[str, CelType] | None = None) -> dict[str, CelType]:
    out = checker.environment({"spec": {}}, gvk)
    out["variables"] = object_type("kubernetes.variables", variables or {})
    return out


def issues(checker: TypeChecker, gvk: GVK, expression: str) -> list[str]:
    return [str(i) for i in check_expression(expression, env(checker, gvk)).issues]


def output(checker: TypeChecker, gvk: GVK, expression: str) -> CelType | None:
    result = check_expression(expression, env(checker, gvk))
    assert not result.issues, result.issues
    return result.output_type


def policy(variables: list[tuple[str, str]], validations: list[str], *rules: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "t"},
        "spec": {
            "matchConstraints": {"resourceRules": list(rules)},
            "variables": [{"name": n, "expression": e} for n, e in variables],
            "validations": [{"expression": e, "message": "m"} for e in validations],
        },
    }


PODS_RULE = {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}
JOBS_RULE = {"apiGroups": ["batch"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["jobs"]}
JOBSETS_RULE = {
    "apiGroups": ["jobset.x-k8s.io"],
    "apiVersions": ["v1alpha2"],
    "operations": ["CREATE"],
    "resources": ["jobsets"],
}


# --------------------------------------------------------------------------------------------------------
# The checker catches what cel-go's checker refuses


def test_undefined_field_on_a_kind_is_reported_where_cel_go_reports_it(checker: TypeChecker) -> None:
    assert issues(checker, POD, "object.spec.replicatedJobs") == [
        "ERROR: <input>:1:12: undefined field 'replicatedJobs'"
    ]
    assert issues(checker, JOB, "has(object.spec.replicatedJobs)") == [
        "ERROR: <input>:1:16: undefined field 'replicatedJobs'"
    ]
    assert issues(checker, JOBSET, "object.spec.replicatedJobs.all(r, r.template.spec.parallelism > 0)") == []
    assert issues(checker, JOBSET, "object.spec.replicatedJobs.all(r, r.template.spec.paralelism > 0)") == [
        "ERROR: <input>:1:50: undefined field 'paralelism'"
    ]


def test_ternary_with_different_object_types_has_no_matching_overload(checker: TypeChecker) -> None:
    assert issues(checker, JOBSET, "true ? [object] : object.spec.replicatedJobs.map(r, r.template)") == [
        "ERROR: <input>:1:6: found no matching overload for '_?_:_' applied to "
        "'(bool, list(JobSet), list(JobSet.spec.replicatedJobs.@idx.template))'"
    ]
    assert issues(checker, JOB, "false ? object.spec : object.spec.template.spec") == [
        "ERROR: <input>:1:7: found no matching overload for '_?_:_' applied to "
        "'(bool, Job.spec, Job.spec.template.spec)'"
    ]
    # the same object type on both sides, or an empty literal, unifies
    assert output(checker, JOB, "true ? [object] : []") == list_of(checker.resolver.decl_type(JOB))
    assert output(checker, POD, "has(object.metadata.labels) ? object.metadata.labels : {}") == map_of(STRING, STRING)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("'TPU ' + object.spec.priority", "found no matching overload for '_+_' applied to '(string, int)'"),
        ("object.metadata.name == 1", "found no matching overload for '_==_' applied to '(string, int)'"),
        ("object.metadata.name.startsWith(1)", "found no matching overload for 'startsWith' applied to 'string.(int)'"),
        ("size(object.spec.priority)", "found no matching overload for 'size' applied to '(int)'"),
        (
            "'a' in object.spec.containers",
            "found no matching overload for '@in' applied to '(string, list(Pod.spec.containers.@idx))'",
        ),
        (
            "object.spec.nodeSelector[0]",
            "found no matching overload for '_[_]' applied to '(map(string, string), int)'",
        ),
        (
            "object.spec.containers.map(c, c.name).sum()",
            "found no matching overload for 'sum' applied to 'list(string).()'",
        ),
        ("[1, 2].join(', ')", "found no matching overload for 'join' applied to 'list(int).(string)'"),
        ("object.spec.containers.all(c, c.name)", "found no matching overload for '_&&_' applied to '(bool, string)'"),
        (
            "object.spec.priority.exists(p, true)",
            "expression of type 'int' cannot be range of a comprehension (must be list, map, or dynamic)",
        ),
        ("object.metadata.name.size", "type 'string' does not support field selection"),
        ("objekt.spec", "undeclared reference to 'objekt' (in container '')"),
        ("[1, 'a']", "expected type 'int' but found 'string'"),
    ],
)
def test_calls_with_wrong_argument_types_are_refused(checker: TypeChecker, expression: str, message: str) -> None:
    found = check_expression(expression, env(checker, POD)).issues
    assert [i.message for i in found] == [message]


def test_the_subset_the_policy_uses_types_like_cel_go(checker: TypeChecker) -> None:
    assert output(checker, POD, "object.metadata.ownerReferences.exists(r, has(r.controller) && r.controller)") == BOOL
    assert output(checker, POD, "object.metadata.creationTimestamp") == TIMESTAMP
    assert output(checker, POD, "'k' in object.spec.nodeSelector ? object.spec.nodeSelector['k'] : ''") == STRING
    assert output(checker, POD, "object.spec.containers.map(c, c.name)") == list_of(STRING)
    assert output(checker, POD, "object.spec.containers.map(c, has(c.image), c.image)") == list_of(STRING)
    assert output(checker, POD, "object.spec.containers.filter(c, c.name != '')") == list_of(
        checker.resolver.decl_type(POD).fields["spec"].fields["containers"].params[0]  # type: ignore[index]
    )
    assert output(checker, POD, "object.spec.containers.exists_one(c, c.name == 'x')") == BOOL
    assert output(checker, POD, "[1, 2].map(x, x * 2).sum()") == INT
    assert output(checker, POD, "{'a': ['x']}['a'].join(', ')") == STRING
    assert output(checker, POD, "int(string(1)) + size([1]) + size('ab')") == INT
    assert (
        output(checker, POD, "string(1).matches('^[0-9]+$') && request.userInfo.username.startsWith('system:')") == BOOL
    )
    bind = "cel.bind(s, object.spec, s.containers.map(c, c.name))"
    assert check_expression(bind, env(checker, POD), bindings=True).output_type == list_of(STRING)
    assert output(checker, POD, "dyn(object.spec).anything.goes") == DYN
    assert output(checker, POD, "namespaceObject.metadata.labels") == map_of(STRING, STRING)


@pytest.mark.parametrize(
    "expression",
    [
        "authorizer.group('apps').resource('deployments').check('create').allowed()",
        "params.maxReplicas",
        "quantity('1').isGreaterThan(quantity('0'))",
        "object.metadata.name.lowerAscii()",
        "object.spec.containers.sortBy(c, c.name)",
        ".object",
        "Pod{}",
        "object.?spec",
    ],
)
def test_unmodelled_cel_raises_instead_of_passing(checker: TypeChecker, expression: str) -> None:
    environment = env(checker, POD)
    environment["params"] = DYN
    with pytest.raises(UnmodelledCelError):
        check_expression(expression, environment)


# --------------------------------------------------------------------------------------------------------
# Schemas and environment, as the server builds them


def test_schema_decl_type_follows_schemas_go(checker: TypeChecker) -> None:
    assert schema_decl_type({"x-kubernetes-int-or-string": True}, False, "x") == DYN
    assert schema_decl_type({"type": "string", "format": "date-time"}, False, "x") == TIMESTAMP
    assert schema_decl_type({"type": "object", "additionalProperties": {"type": "integer"}}, False, "x") == map_of(
        STRING, INT
    )
    assert schema_decl_type({"oneOf": [{"type": "string"}, {"type": "number"}]}, False, "x") is None
    root = schema_decl_type({"type": "object", "properties": {"spec": {"type": "object"}}}, True, "R")
    assert root is not None and root.fields is not None
    assert set(root.fields) == {"apiVersion", "kind", "metadata", "spec"}
    assert root.fields["spec"].name == "R.spec"
    # Built-in kinds: IntOrString is dyn, Quantity has no type, so a map of quantities is not exposed (as on
    # a real server: "undefined field 'limits'"); a CRD's int-or-string quantities are dyn.
    assert output(checker, JOB, "object.spec.template.spec.containers[0].ports[0].containerPort") == INT
    assert output(checker, POD, "object.spec.containers[0].livenessProbe.httpGet.port") == DYN
    assert issues(checker, POD, "object.spec.containers.all(c, has(c.resources.limits))") == [
        "ERROR: <input>:1:46: undefined field 'limits'"
    ]
    assert output(checker, POD, "object.spec.containers.all(c, has(dyn(c.resources).limits))") == BOOL
    assert output(
        checker,
        JOBSET,
        "object.spec.replicatedJobs.map(r, r.template.spec.template.spec.containers.map(c, "
        "c.resources.limits['google.com/tpu']))",
    ) == list_of(list_of(DYN))


def test_every_kind_has_the_full_object_meta(checker: TypeChecker) -> None:
    for gvk in (POD, JOB, JOBSET):
        meta = checker.resolver.decl_type(gvk).fields["metadata"]  # type: ignore[index]
        assert {"name", "generateName", "labels", "annotations", "ownerReferences", "deletionTimestamp"} <= set(
            meta.fields or {}
        ), gvk


def test_variables_are_stored_like_composition_go(checker: TypeChecker) -> None:
    assert convert_cel_type_to_decl_type(None) == DYN
    assert convert_cel_type_to_decl_type(list_of(checker.resolver.decl_type(POD))) == list_of(DYN)
    assert convert_cel_type_to_decl_type(map_of(STRING, list_of(STRING))) == map_of(STRING, list_of(STRING))
    checked = policy(
        [
            ("spec", "object.spec"),
            ("broken", "object.spec.replicatedJobs"),
            ("early", "variables.late"),
            ("late", "1"),
            ("names", "object.spec.containers.map(c, c.name)"),
        ],
        ["variables.spec.whatever && variables.broken.whatever", "variables.names.all(n, n == 1)"],
        PODS_RULE,
    )
    environment, results = checker.compile_variables(checked, POD)
    assert environment["variables"].fields == {
        "spec": DYN,  # an object type becomes dyn
        "broken": DYN,  # a variable that fails to compile becomes dyn
        "early": DYN,
        "late": INT,
        "names": list_of(STRING),
    }
    assert {name: [i.message for i in r.issues] for name, r in results if r.issues} == {
        "broken": ["undefined field 'replicatedJobs'"],
        "early": ["undefined field 'late'"],  # only the variables before it are declared
    }
    warnings = checker.check(checked)
    assert [(w.field_ref, w.gvk) for w in warnings] == [
        ("spec.variables[broken]", POD),
        ("spec.variables[early]", POD),
        ("spec.validations[1].expression", POD),
    ]
    assert checker.check(checked, strict=False) == [warnings[-1]]
    assert checker.expression_warnings(checked) == [
        {
            "fieldRef": "spec.validations[1].expression",
            "warning": "/v1, Kind=Pod: ERROR: <input>:1:26: found no matching overload for '_==_' applied to "
            "'(string, int)'\n",
        }
    ]


def test_types_to_check_follows_typechecking_go() -> None:
    resolver = SchemaResolver()
    wildcard = {"apiGroups": ["*"], "apiVersions": ["v1"], "operations": ["*"], "resources": ["pods"]}
    subresource = {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["*"], "resources": ["pods/status", "*"]}
    checked = policy([], [], JOBSETS_RULE, wildcard, subresource, PODS_RULE, JOBS_RULE, PODS_RULE)
    assert types_to_check(checked, resolver) == [POD, JOB, JOBSET]
    with pytest.raises(UnmodelledCelError):
        types_to_check(policy([], [], {**PODS_RULE, "resources": ["widgets"]}), resolver)


# --------------------------------------------------------------------------------------------------------
# Today's single policy (frozen copy): its shared variables fail per kind

FROZEN_SINGLE_POLICY: dict[str, Any] = json.loads(
    (Path(__file__).parent / "typecheck_frozen_single_policy.json").read_text(encoding="utf-8")
)
"""The matchConstraints and variables of the single policy for JobSets, Jobs and Pods (before one policy per
kind), with the validation that reads ``variables.pods``."""


def test_the_single_policy_for_three_kinds_fails_for_each_kind(checker: TypeChecker) -> None:
    warnings = checker.check(FROZEN_SINGLE_POLICY)
    found = {(w.field_ref, str(w.gvk)): [i.message for i in w.issues] for w in warnings}
    assert found == {
        ("spec.variables[jobs]", "/v1, Kind=Pod"): ["undefined field 'replicatedJobs'"] * 2,
        ("spec.variables[jobs]", "batch/v1, Kind=Job"): ["undefined field 'replicatedJobs'"] * 2,
        ("spec.variables[jobs]", "jobset.x-k8s.io/v1alpha2, Kind=JobSet"): [
            "found no matching overload for '_?_:_' applied to "
            "'(bool, list(JobSet.spec.replicatedJobs.@idx.template), list(JobSet))'"
        ],
    }, describe(warnings)
    # The server hides all of it: the broken variable becomes dyn, and so does everything built on it.
    assert checker.check(FROZEN_SINGLE_POLICY, strict=False) == []


# --------------------------------------------------------------------------------------------------------
# The package's policies

SETTINGS = admission.AdmissionSettings(
    AdmissionContext(
        tiers=("training-high", "training-low"),
        local_queues={"team-a": ("training",), "team-b": ("training",)},
        hotswap_tiers=("training-high",),
        # With teams: the entitlement and protect validations are generated, and type-checked, too.
        entitlements={"team-a": ("training-high", "training-low"), "team-b": ("training-low",)},
        protecting_namespaces=("team-a",),
        spot_free_tiers=("training-high",),  # and the off-spot validation
    ),
    controller_namespaces=("kueue-system", "jobset-system"),
)
GENERATED = [pytest.param(p, id=p["metadata"]["name"]) for p in admission.validating_admission_policies(SETTINGS)]


@pytest.mark.parametrize("generated", GENERATED)
def test_generated_policy_type_checks_cleanly_for_each_matched_kind(
    checker: TypeChecker, generated: dict[str, Any]
) -> None:
    assert types_to_check(generated, checker.resolver), "the policy matches no kind the checker can type"
    warnings = checker.check(generated)
    assert warnings == [], describe(warnings)


@pytest.mark.parametrize("generated", GENERATED)
def test_generated_policy_match_conditions_type_check_cleanly(checker: TypeChecker, generated: dict[str, Any]) -> None:
    warnings = [w for w in checker.check(generated, match_conditions=True) if "matchConditions" in w.field_ref]
    assert warnings == [], describe(warnings)


@pytest.mark.parametrize("generated", GENERATED)
def test_generated_policy_compiles_where_the_server_runs_it(checker: TypeChecker, generated: dict[str, Any]) -> None:
    """At run time ``object`` is dyn; an expression that does not compile there errors on every request."""
    assert checker.runtime_issues(generated) == []


def test_the_server_environment_has_no_cel_bind_and_only_homogeneous_literals(checker: TypeChecker) -> None:
    assert issues(checker, POD, "cel.bind(s, object.spec, s.containers.size())") == [
        "ERROR: <input>:1:1: undeclared reference to 'cel' (in container '')"
    ]
    runtime = checker.environment({"spec": {}}, None)
    runtime["variables"] = object_type("kubernetes.variables", {})
    # Typed, both values are strings; untyped (run time), the first is dyn and the literal is refused.
    mixed = "{'a': object.metadata.name, 'b': 'x'}"
    assert check_expression(mixed, env(checker, POD)).issues == ()
    assert [i.message for i in check_expression(mixed, runtime).issues] == ["expected type 'dyn' but found 'string'"]
    assert check_expression("{'a': string(object.metadata.name), 'b': 'x'}", runtime).issues == ()
    assert [i.message for i in check_expression("{'a': true, 'b': 'x'}", runtime).issues] == [
        "expected type 'bool' but found 'string'"
    ]


def test_the_multi_tenancy_validations_are_among_those_checked() -> None:
    """The generated policies above carry the entitlement, protect, nodeName and through-Kueue validations."""
    messages = {
        p.values[0]["metadata"]["name"]: " ".join(v["message"] for v in p.values[0]["spec"]["validations"])
        for p in GENERATED
    }
    jobsets = messages["gke-tpu-priority-tpu-workloads-jobsets"]
    assert "[tpu-workload-tier-entitled]" in jobsets and "[hotswap-protect-entitled]" in jobsets
    assert "[tpu-workload-no-node-name]" in messages["gke-tpu-priority-tpu-workloads-jobs"]
    for kind in ("pods", "deployments", "statefulsets", "replicasets", "daemonsets", "cronjobs"):
        assert messages[f"gke-tpu-priority-tpu-workloads-{kind}"].startswith("[tpu-only-through-kueue]")
