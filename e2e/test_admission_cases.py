"""Every allow/deny case of the policy tests, judged by the real API server with the admission policy deployed.

The offline table (tests/policies/test_three_front_ends.py) says which rules each object breaks; here the same
policies and bindings run in kube-apiserver's own CEL engine. Two passes: with the bindings as deployed (Deny),
the server must refuse exactly the objects the table refuses, naming one of their rules; with the bindings set to
Warn, every failing rule comes back as a warning, so the full set must equal the table's. Kueue's and JobSet's
webhooks run too (e2e/conftest.py `controllers`): an object the table accepts must pass them as well.
"""

from __future__ import annotations

import copy
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest

from e2e import report
from e2e.apply import apply_all, delete_all
from e2e.conftest import Controllers, Target
from testkit import admission_cases as table
from testkit.admission_cases import big_jobset

JsonObj = dict[str, Any]
RULE = re.compile(r"\[([a-z0-9][a-z0-9.-]*)\]")
_results: dict[str, JsonObj] = {}


def _namespaces() -> list[JsonObj]:
    names = {table.NAMESPACE} | {o["metadata"]["namespace"] for o in table.PLATFORM if o["metadata"].get("namespace")}
    return [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}} for name in sorted(names)]


def _bindings(action: str) -> list[JsonObj]:
    bindings: list[JsonObj] = copy.deepcopy(table.BINDINGS)
    for binding in bindings:
        binding["spec"]["validationActions"] = [action]
    return bindings


@pytest.fixture(scope="module")
def platform(target: Target, controllers: Controllers) -> Iterator[list[JsonObj]]:
    objects = [*_namespaces(), *table.PLATFORM, *table.POLICIES]
    outcomes = apply_all(target.rest, objects)
    assert [o.as_json() for o in outcomes if not o.accepted] == []
    # The ServiceAccount admission plugin refuses pods until the namespace's default ServiceAccount exists.
    target.kubectl.run(
        "wait", "--for=jsonpath={.metadata.name}=default", "--timeout=60s",
        "-n", table.NAMESPACE, "serviceaccount/default",
    )  # fmt: skip
    yield objects
    summary = report.section("admission")
    summary["cases"] = len(_results)
    summary["agree"] = sum(r["agree"] for r in _results.values())
    summary["disagree"] = {k: r for k, r in _results.items() if not r["agree"]}
    left = delete_all(target.rest, objects)
    assert not left, left


def _submit(target: Target, obj: JsonObj) -> tuple[bool, str, set[str]]:
    """(accepted, error, rules named in warnings) for a server-side dry-run create."""
    response = target.rest.create(obj, dry_run=True)
    warned = {rule for warning in response.warnings for rule in RULE.findall(warning)}
    return response.ok, response.message, warned


_action = {"current": ""}


def _use(target: Target, action: str) -> None:
    """Switch every binding to `action` and wait until the server enforces it (its policy cache is an informer).

    One probe per kind: each kind has a binding of its own, and the informer takes them up one by one, so a
    JobSet probe that already warns says nothing about the DaemonSet binding (a CI rehearsal once met three
    DaemonSet, ReplicaSet and CronJob cases still denied right after the switch)."""
    if _action["current"] == action:
        return
    outcomes = apply_all(target.rest, _bindings(action))
    assert [o.as_json() for o in outcomes if not o.accepted] == []
    probes: dict[str, JsonObj] = {}
    for _, obj, broken in table.CASES:
        if broken:
            probes.setdefault(obj["kind"], obj)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        pending = []
        for kind, probe in probes.items():
            accepted, _, warned = _submit(target, probe)
            if not ((action == "Deny" and not accepted) or (action == "Warn" and accepted and warned)):
                pending.append(kind)
        if not pending:
            _action["current"] = action
            return
        time.sleep(0.2)
    raise AssertionError(f"the bindings switched to {action} never took effect for {', '.join(pending)}")


def _cases() -> list[Any]:
    return [pytest.param(i, o, b, id=i) for i, o, b in table.CASES]


@pytest.mark.parametrize(("case", "obj", "broken"), _cases())
def test_deployed_policy_refuses_exactly_what_the_offline_policy_refuses(
    case: str, obj: JsonObj, broken: set[str], target: Target, platform: list[JsonObj]
) -> None:
    _use(target, "Deny")
    accepted, error, _ = _submit(target, obj)
    denied = set(RULE.findall(error)) if "ValidatingAdmissionPolicy" in error else set()
    result = _results.setdefault(case, {"offline": sorted(broken), "agree": True})
    result.update(serverAccepted=accepted, serverDenied=sorted(denied))
    if not accepted and not denied:
        result["error"] = error
    result["agree"] = result["agree"] and accepted == (not broken) and (accepted or bool(denied)) and denied <= broken
    assert accepted == (not broken), error
    assert denied <= broken and (accepted or denied), error


@pytest.mark.parametrize(("case", "obj", "broken"), _cases())
def test_every_rule_the_offline_policy_names_fails_on_the_server(
    case: str, obj: JsonObj, broken: set[str], target: Target, platform: list[JsonObj]
) -> None:
    _use(target, "Warn")
    accepted, error, warned = _submit(target, obj)
    result = _results.setdefault(case, {"offline": sorted(broken), "agree": True})
    result["serverWarned"] = sorted(warned)
    result["agree"] = result["agree"] and accepted and warned == broken
    assert accepted, error
    assert warned == broken


@pytest.mark.parametrize("good", [True, False], ids=["accepted", "refused"])
def test_the_servers_own_cost_tracker_lets_the_policy_judge_a_large_jobset(
    good: bool, target: Target, platform: list[JsonObj]
) -> None:
    """16 replicated jobs x 8 containers x 100 env vars (testkit.admission_cases.big_jobset): the API
    server's runtime cost tracking (budget and per-call limit) must let every expression finish, so the verdict is
    the policy's and never 'cost limit exceeded'."""
    _use(target, "Deny")
    response = target.rest.create(big_jobset(good), dry_run=True)
    report.section("admission").setdefault("largeJobSet", {})["accepted" if good else "refused"] = {
        "status": response.status,
        "message": response.message[:300],
    }
    assert "cost" not in response.message.lower() and "budget" not in response.message.lower(), response.message
    if good:
        assert response.ok, response.message
    else:
        assert response.status == 422 and "ValidatingAdmissionPolicy" in response.message, response.message
