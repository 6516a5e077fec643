"""The admission policy's CEL stays far inside the API server's runtime cost limits.

Costs come from tests/support/cel_cost.py (cel-go runtimecost.go + Kubernetes library/cost.go restated). The
validations and the lazily evaluated variables share RuntimeCELCostBudget; every messageExpression is then
evaluated (validator.go evaluates all of them, not only the failing ones) with new lazy variables against what is
left; matchConditions have their own RuntimeCELCostBudgetMatchConditions. Each expression has PerCallLimit.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from celpy import celtypes

import gke_tpu_priority.policies.admission as admission
from tests.policies.admission_cel import _evaluate, _resource_matches, request_for
from tests.policies.test_three_front_ends import SETTINGS, jobset
from tests.support import cel_cost
from tests.support.cel_cost import PER_CALL_LIMIT, RUNTIME_CEL_COST_BUDGET, LazyMap, evaluate

DATA = {"a": {"b": {"c": 1}, "s": "abcdefghijk"}, "x": 1, "l": [1, 2, 3]}


@pytest.mark.parametrize(
    ("expression", "cost"),
    [
        ("a.b.c", 3),  # ident 1 + two constant qualifiers
        ("has(a.b)", 1),  # qualifier 1, presence test 0 (PresenceTestHasCost(false)), operand not observed
        ("[1, 2].all(x, x > 0)", 11),  # constant range 0; per item cond 2 + accu 1 + x 1 + > 1; result 1
        ("x in [1, 2]", 1),  # set membership of a constant list: only x
        ("x in l", 1 + 1 + 3),  # x, l, InList = size of the list
        ("a.s == 'abcdefghijk'", 1 + 1 + 2),  # ceil(11 * 0.1)
        ("a.s + a.s", 2 + 2 + 3),  # ceil(22 * 0.1)
        ("a.s.matches('^[0-9]+$')", 2 + 2 * 2),  # ceil(12 * 0.1) * ceil(7 * 0.25)
        ("cel.bind(v, a.b, v.c + v.c)", 7),  # init a.b (2) once, v 1 + c 1 twice, + 1
        ("true ? a.b : {}", 1),  # ternary: attribute branch's root not observed
        ("[a].map(y, y)", 25),  # [a] 10+1; per item step 1 + accu 1 + [y] 10 + y 1; result 1
        ("l.map(y, y).sum()", 1 + 3 * 13 + 1 + 3),  # sum: traversalCost = 3 ints
        ("l.filter(y, y > 1)", 1 + 3 * 2 + 2 * 13 + 1),
        ("{'k': x}['k']", 1 + 30 + 1 + 1),  # relative attribute 1 + map 30 + x 1 + constant qualifier 1
    ],
)
def test_unit_costs(expression: str, cost: int) -> None:
    assert evaluate(expression, DATA).cost == cost


def test_unmodelled_construct_is_an_error() -> None:
    with pytest.raises(cel_cost.NotModelled):
        evaluate("a.s.replaceAll('a', 'b')", DATA)


def big_jobset(good: bool = True) -> dict[str, Any]:
    obj = jobset("4x4", 4, 4)
    obj["metadata"]["labels"].update({f"team.example.com/l{i}": f"value-{i}" for i in range(20)})
    obj["metadata"]["annotations"].update({f"example.com/a{i}": "x" * 40 for i in range(20)})
    base = obj["spec"]["replicatedJobs"][0]
    jobs = []
    for j in range(16):
        rj = copy.deepcopy(base)
        rj["name"] = f"slice-{j}"
        spec = rj["template"]["spec"]["template"]["spec"]
        trainer = spec["containers"][0]
        containers = []
        for c in range(8):
            cont = copy.deepcopy(trainer)
            cont["name"] = f"c{c}"
            cont["env"] = [{"name": f"ENV_{i}", "value": f"value-{j}-{c}-{i}"} for i in range(100)]
            if c:
                cont["resources"] = {"limits": {"cpu": "1"}, "requests": {"cpu": "1"}}
            containers.append(cont)
        spec["containers"] = containers
        if not good and j == 15:
            spec["priorityClassName"] = "nope"
            spec["nodeSelector"]["cloud.google.com/gke-tpu-topology"] = "9x9"
        jobs.append(rj)
    obj["spec"]["replicatedJobs"] = jobs
    return obj


def _policy_for(obj: dict[str, Any]) -> dict[str, Any]:
    build = getattr(admission, "validating_admission_policies", None)
    policies = build(SETTINGS) if build else [admission.validating_admission_policy(SETTINGS)]
    request = request_for(obj)
    return next(
        p
        for p in policies
        if any(_resource_matches(r, request) for r in p["spec"]["matchConstraints"]["resourceRules"])
    )


def _plain(v: Any) -> Any:
    if isinstance(v, celtypes.BoolType):
        return bool(v)
    if isinstance(v, dict):
        return {str(k): _plain(i) for k, i in v.items()}
    if isinstance(v, list):
        return [_plain(i) for i in v]
    if isinstance(v, celtypes.IntType):
        return int(v)
    if isinstance(v, celtypes.StringType):
        return str(v)
    return v


def request_costs(policy: dict[str, Any], obj: dict[str, Any]) -> dict[str, Any]:
    from celpy.adapter import json_to_cel

    spec = policy["spec"]
    request = request_for(obj)
    base = {"object": obj, "oldObject": None, "request": request}
    cel_activation = {"object": json_to_cel(obj), "oldObject": None, "request": json_to_cel(request)}
    figures: dict[str, int] = {}
    match = 0
    for m in spec.get("matchConditions", []):
        r = evaluate(m["expression"], base)
        assert r.value is True
        assert _plain(_evaluate(m["expression"], cel_activation)) == r.value
        figures[f"matchCondition {m['name']}"] = r.cost
        match += r.cost
    exprs = {v["name"]: v["expression"] for v in spec.get("variables", [])}
    total = 0
    failing = []
    for phase, key in (("validation", "expression"), ("messageExpression", "messageExpression")):
        variables = LazyMap(exprs, base)
        for i, v in enumerate(spec["validations"]):
            r = evaluate(v[key], {**base, "variables": variables})
            total += r.cost + variables.take_cost()
            figures[f"{phase}[{i}] {v['message'][:50]}"] = r.cost
            if phase == "validation" and r.value is not True:
                failing.append(i)
        for name, cost in variables.costs.items():
            figures[f"variable {name} ({phase}s)"] = cost
    # values agree with cel-python's evaluation
    cel_vars: dict[str, Any] = {}
    for name, e in exprs.items():
        cel_activation["variables"] = celtypes.MapType({celtypes.StringType(k): x for k, x in cel_vars.items()})
        cel_vars[name] = _evaluate(e, cel_activation)
        if name in variables.values:
            assert _plain(cel_vars[name]) == variables.values[name], name
    cel_activation["variables"] = celtypes.MapType({celtypes.StringType(k): x for k, x in cel_vars.items()})
    variables = LazyMap(exprs, base)
    for v in spec["validations"]:
        for key in ("expression", "messageExpression"):
            mine = evaluate(v[key], {**base, "variables": variables}).value
            assert _plain(_evaluate(v[key], cel_activation)) == mine, v[key][:80]
    return {"match": match, "total": total, "figures": figures, "failing": failing}


@pytest.mark.parametrize("good", [True, False])
def test_policy_cost_on_a_large_jobset(good: bool) -> None:
    obj = big_jobset(good)
    costs = request_costs(_policy_for(obj), obj)
    assert bool(costs["failing"]) is not good
    print(
        f"\n{'accepted' if good else 'refused'}: matchConditions {costs['match']}, validations + variables + "
        f"messageExpressions {costs['total']}"
    )
    for name, cost in sorted(costs["figures"].items(), key=lambda kv: -kv[1]):
        print(f"  {cost:>8}  {name}")
    assert costs["match"] + costs["total"] <= RUNTIME_CEL_COST_BUDGET / 10
    assert max(costs["figures"].values()) <= PER_CALL_LIMIT / 10
