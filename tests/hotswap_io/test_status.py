"""`kubectl hotswap status`: what is held, for whom, since when and why, readable in a terminal and by scripts
(-o json|yaml), in one namespace or all, and a partial answer that says so in every format and in its exit code."""

from __future__ import annotations

import importlib.metadata
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from gke_tpu_priority.hotswap.annotations import AnnotationKeys
from gke_tpu_priority.hotswap.status import age, held_rows, op_rows, quarantine_rows, render
from testkit.apiserver import FakeApiServer, Fault

from .cluster import NS, WORKLOADS
from .test_cli_access import cli, home_with_kubeconfig

pytestmark = pytest.mark.timeout(60)

KEYS = AnnotationKeys("hotswap.gke-tpu-priority.io")
EVENTS = "events.events.k8s.io"
NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)


def victim(name: str, since: str, op: str = "op-7") -> dict[str, object]:
    return {
        "metadata": {
            "name": f"jobset-{name}-abc",
            "namespace": NS,
            "ownerReferences": [{"kind": "JobSet", "name": name, "apiVersion": "jobset.x-k8s.io/v1alpha2"}],
            "annotations": {
                KEYS.held_by: f"{NS}/high/uid-1/0",
                KEYS.op_id: op,
                KEYS.held_since: since,
                KEYS.hold_count: "2",
            },
        },
        "spec": {"active": False},
    }


def preemptor() -> dict[str, object]:
    op = "id=op-7;attempt=1;since=2026-12-05T10:58:00Z;slices=pool-3,pool-4;fenced=1;victims=ml/jobset-low-abc"
    return {"metadata": {"name": "jobset-high-xyz", "namespace": NS, "annotations": {KEYS.op: op}}, "spec": {}}


def held_event(jobset: str, op: str, note: str, at: str) -> dict[str, object]:
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {
            "name": f"{jobset}.hotswap-{at[-3:-1]}",
            "namespace": NS,
            "labels": {"app.kubernetes.io/managed-by": "hotswap-reconciler"},
            "annotations": {KEYS.op_id: op},
        },
        "eventTime": at,
        "reason": "HotswapVictimHeld",
        "note": note,
        "regarding": {"kind": "JobSet", "namespace": NS, "name": jobset},
    }


def test_rows_say_who_for_whom_since_when_and_why() -> None:
    workloads = [victim("low", "2026-12-05T11:00:00Z"), victim("mid", "2026-12-05T09:30:00Z", "op-3"), preemptor()]
    events = [
        held_event("low", "op-7", "old note", "2026-12-05T10:00:00.000000Z"),
        held_event("low", "op-7", "held (spec.active=false) to free slices for ml/high", "2026-12-05T11:00:00.000000Z"),
    ]
    held = held_rows(workloads, events, KEYS)
    assert [(r.workload, r.jobset, r.preemptor, r.op_id, r.holds) for r in held] == [
        (f"{NS}/jobset-mid-abc", "mid", f"{NS}/high", "op-3", 2),
        (f"{NS}/jobset-low-abc", "low", f"{NS}/high", "op-7", 2),
    ]
    assert held[1].why == "held (spec.active=false) to free slices for ml/high"
    assert held[0].why == f"held for {NS}/high (no Event left: Events expire after an hour)"
    (op,) = op_rows(workloads, KEYS)
    assert (op.preemptor, op.op_id, op.attempt, op.slices, op.fenced) == (
        f"{NS}/jobset-high-xyz",
        "op-7",
        1,
        ("pool-3", "pool-4"),
        1,
    )
    text = render(held, [op], NOW).splitlines()
    assert text[0] == "Held by the reconciler: 2 Workload(s)"
    assert text[1].split() == ["WORKLOAD", "JOBSET", "HELD", "FOR", "AGE", "HOLDS", "OP", "WHY"]
    assert text[2].split()[:6] == [f"{NS}/jobset-mid-abc", "mid", f"{NS}/high", "2h30m", "2", "op-3"]
    assert text[3].endswith("held (spec.active=false) to free slices for ml/high")
    assert text[5] == "Open operations: 1"
    assert text[6].split() == ["PREEMPTOR", "OP", "AGE", "RESERVED", "SLICES", "VICTIMS"]
    assert text[7].split() == [f"{NS}/jobset-high-xyz", "op-7", "1h02m", "pool-3,pool-4", "ml/jobset-low-abc"]
    wide = render(held, [op], NOW, wide=True).splitlines()
    assert wide[1].split() == ["WORKLOAD", "JOBSET", "HELD", "FOR", "SINCE", "AGE", "HOLDS", "OP", "WHY"]
    assert wide[2].split()[:7] == [
        f"{NS}/jobset-mid-abc",
        "mid",
        f"{NS}/high",
        "2026-12-05T09:30:00Z",
        "2h30m",
        "2",
        "op-3",
    ]
    assert wide[6].split() == ["PREEMPTOR", "OP", "ATTEMPT", "SINCE", "AGE", "FENCED", "RESERVED", "SLICES", "VICTIMS"]
    assert wide[7].split() == [
        f"{NS}/jobset-high-xyz",
        "op-7",
        "1",
        "2026-12-05T10:58:00Z",
        "1h02m",
        "1",
        "pool-3,pool-4",
        "ml/jobset-low-abc",
    ]


def test_nothing_held_says_so() -> None:
    assert render([], [], NOW) == "Nothing is held by the reconciler.\n\nNo open operations."
    assert (age(datetime(2026, 12, 5, 11, 59, 20, tzinfo=UTC), NOW), age(None, NOW)) == ("40s", "?")


async def test_status_command_reads_the_cluster(api: FakeApiServer, tmp_path: Path) -> None:
    api.put(WORKLOADS, victim("low", "2026-12-05T11:00:00Z"))
    api.put(WORKLOADS, preemptor())
    api.put(WORKLOADS, {"metadata": {"name": "other", "namespace": NS}, "spec": {"active": True}})
    api.put(EVENTS, held_event("low", "op-7", "held to free slices for ml/high", "2026-12-05T11:00:00.000000Z"))
    home = home_with_kubeconfig(tmp_path, api.url)
    code, out, err = await cli("status", home=home)
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == "Held by the reconciler: 1 Workload(s)"
    assert lines[2].startswith(f"{NS}/jobset-low-abc") and lines[2].endswith("held to free slices for ml/high")
    assert "Open operations: 1" in lines
    code, out, err = await cli("status", "--output", "json", home=home)
    assert code == 0, err
    document = json.loads(out)
    assert [h["workload"] for h in document["held"]] == [f"{NS}/jobset-low-abc"]
    assert document["held"][0]["since"] == "2026-12-05T11:00:00Z"
    assert document["operations"][0]["slices"] == ["pool-3", "pool-4"]
    assert (document["partial"], document["warnings"]) == (False, [])
    code, out, err = await cli("status", "-o", "yaml", "-A", home=home)
    assert code == 0, err
    assert yaml.safe_load(out) == document  # the same answer, spelled in YAML
    assert api.writes() == []


async def test_namespace_and_selector_narrow_the_workloads_listed(api: FakeApiServer, tmp_path: Path) -> None:
    api.put(WORKLOADS, victim("low", "2026-12-05T11:00:00Z"))
    elsewhere = victim("other", "2026-12-05T11:00:00Z")
    elsewhere["metadata"] = {**elsewhere["metadata"], "namespace": "team-b", "labels": {"team": "b"}}  # type: ignore[dict-item]
    api.put(WORKLOADS, elsewhere)
    home = home_with_kubeconfig(tmp_path, api.url)

    async def held(*flags: str) -> list[str]:
        code, out, err = await cli("status", "-o", "json", *flags, home=home)
        assert code == 0, err
        return [h["workload"] for h in json.loads(out)["held"]]

    assert await held() == [f"{NS}/jobset-low-abc", "team-b/jobset-other-abc"]
    assert await held("-n", "team-b") == ["team-b/jobset-other-abc"]
    assert await held("--namespace", NS) == [f"{NS}/jobset-low-abc"]
    assert await held("-l", "team=b") == ["team-b/jobset-other-abc"]
    assert await held("-A", "--selector", "team!=b") == [f"{NS}/jobset-low-abc"]
    code, _, err = await cli("status", "-n", NS, "-A", home=home)
    assert code == 2 and "not allowed with argument" in err


@pytest.mark.parametrize("output", ["text", "wide", "json", "yaml"])
async def test_a_partial_answer_says_so_in_every_format_and_exits_1(
    api: FakeApiServer, tmp_path: Path, output: str
) -> None:
    api.put(WORKLOADS, victim("low", "2026-12-05T11:00:00Z"))
    api.inject(Fault(verb="list", resource=EVENTS, status=403, times=None))
    code, out, err = await cli("status", "-o", output, home=home_with_kubeconfig(tmp_path, api.url))
    assert code == 1
    warning = "Events unreadable (HTTP 403): WHY comes from the annotations only"
    assert err.strip().splitlines() == [f"warning: partial answer: {warning}"]
    if output in ("json", "yaml"):
        document = json.loads(out) if output == "json" else yaml.safe_load(out)
        assert (document["partial"], document["warnings"]) == (True, [warning])
        assert [h["workload"] for h in document["held"]] == [f"{NS}/jobset-low-abc"]
    else:
        assert f"{NS}/jobset-low-abc" in out and warning not in out  # stdout stays the table alone


async def test_status_refuses_dry_run_and_names_the_subcommand_on_bad_flags(tmp_path: Path) -> None:
    code, _, err = await cli("status", "--dry-run", home=tmp_path)
    assert code == 2 and "Traceback" not in err
    assert err.strip().endswith(
        "kubectl hotswap status: error: --dry-run does not apply: status only reads (it is "
        "for run, release-all and mark-checkpoint)"
    )
    code, _, err = await cli("status", "-o", "name", home=tmp_path)
    assert code == 2 and "argument -o/--output: invalid choice: 'name'" in err
    code, _, err = await cli("status", "--watch", home=tmp_path)
    assert code == 2 and err.strip().endswith("kubectl hotswap status: error: unrecognized arguments: --watch")


async def test_version_is_the_package_version(tmp_path: Path) -> None:
    code, out, _ = await cli("--version", home=tmp_path)
    assert (code, out.strip()) == (0, f"kubectl-hotswap {importlib.metadata.version('gke-tpu-priority')}")


def tpu_node(name: str, pool: str, *taint_keys: str) -> dict[str, object]:
    taints = [{"key": k, "effect": "NoSchedule"} for k in ("google.com/tpu", *taint_keys)]
    labels = {"cloud.google.com/gke-nodepool": pool}
    return {"metadata": {"name": name, "labels": labels}, "spec": {"taints": taints}}


def test_quarantined_slices_are_listed_by_pool() -> None:
    nodes = [
        tpu_node("p0-1", "p0", KEYS.quarantine_taint),
        tpu_node("p0-0", "p0", KEYS.quarantine_taint),
        tpu_node("p1-0", "p1"),
        tpu_node("p2-0", "p2", "hotswap.example.com/unhealthy-slice"),  # another domain's: not the reconciler's
    ]
    rows = quarantine_rows(nodes, KEYS)
    assert [(r.slice, r.nodes) for r in rows] == [("p0", ("p0-0", "p0-1"))]
    text = render([], [], NOW, rows).splitlines()
    assert text[-3:] == [
        "Quarantined slices (a host down; no new pods until the slice is back): 1",
        "SLICE  NODES",
        "p0     p0-0,p0-1",
    ]


async def test_status_command_shows_quarantined_slices_and_survives_no_node_access(
    api: FakeApiServer, tmp_path: Path
) -> None:
    api.put("nodes", tpu_node("p0-0", "p0", KEYS.quarantine_taint))
    home = home_with_kubeconfig(tmp_path, api.url)
    code, out, err = await cli("status", "--output", "json", home=home)
    assert code == 0, err
    assert json.loads(out)["quarantined"] == [{"slice": "p0", "nodes": ["p0-0"]}]
    api.inject(Fault(verb="list", resource="nodes", status=403, times=None))
    code, out, err = await cli("status", home=home)
    assert code == 1
    assert err.strip() == "warning: partial answer: nodes unreadable (HTTP 403): quarantined slices not shown"
    assert out.rstrip().endswith("No open operations.")
