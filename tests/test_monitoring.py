"""See hotswap happen: the preview renders a PodMonitoring, alerting rules and a Grafana
dashboard for the reconciler; the dashboard JSON loads, every expression parses with a PromQL parser, and every
metric it names is one the reconciler exports."""

from __future__ import annotations

import json
import re
from typing import Any

import promql_parser
import pytest

from gke_tpu_priority.components.config import parse_platform_config
from gke_tpu_priority.components.reconciler import monitoring
from gke_tpu_priority.hotswap.metrics import Metrics
from testkit.platform import platform
from testkit.stacks import stack_run
from tools.manifests import kubernetes_objects

KINDS = {
    ("PodMonitoring", "hotswap-reconciler"),
    ("Rules", "hotswap-reconciler"),
    ("ConfigMap", "hotswap-reconciler-dashboard"),
}


def monitoring_objects(stack: str) -> dict[tuple[str, str], dict[str, Any]]:
    found = {(o["kind"], o["metadata"]["name"]): o for o in kubernetes_objects(stack_run(stack).resources)}
    return {key: obj for key, obj in found.items() if key in KINDS}


def exported_series() -> set[str]:
    """Every series name the reconciler's registry can expose (counters' _total, histograms' _bucket/_sum/_count)."""
    names: set[str] = set()
    for family in Metrics().registry.collect():
        names.add(family.name)
        names |= {f"{family.name}{suffix}" for suffix in ("_total", "_bucket", "_sum", "_count", "_created")}
    return names


def metric_names(expression: str) -> set[str]:
    return set(re.findall(r"\b(hotswap_[a-z_]+)\b", expression))


def parses(expression: str) -> None:
    # Grafana's $__rate_interval is substituted before the query reaches Prometheus.
    promql_parser.parse(expression.replace("$__rate_interval", "5m"))


def test_the_dev_preview_declares_monitor_rules_and_dashboard() -> None:
    objects = monitoring_objects("dev")
    assert set(objects) == KINDS
    assert {o["metadata"]["namespace"] for o in objects.values()} == {"hotswap-system"}
    pod_monitoring = objects[("PodMonitoring", "hotswap-reconciler")]
    assert pod_monitoring["apiVersion"] == "monitoring.googleapis.com/v1"
    assert pod_monitoring["spec"]["selector"] == {"matchLabels": {"app.kubernetes.io/name": "hotswap-reconciler"}}
    assert pod_monitoring["spec"]["endpoints"] == [{"port": "metrics", "path": "/metrics", "interval": "30s"}]
    dashboard_map = objects[("ConfigMap", "hotswap-reconciler-dashboard")]
    assert dashboard_map["metadata"]["labels"]["grafana_dashboard"] == "1"


def test_an_existing_cluster_gets_them_only_when_asked() -> None:
    assert monitoring_objects("existing") == {}
    config = parse_platform_config(
        platform(
            cluster={"mode": "existing", "name": "c"},
            hotswap={"image": "r/i@sha256:" + "a" * 64, "monitoring": {"enabled": True}},
        )
    )
    assert monitoring.monitoring_enabled(config)
    assert not monitoring.monitoring_enabled(
        parse_platform_config(platform(hotswap={"monitoring": {"enabled": False}}))
    )


def test_the_dashboard_json_loads_and_every_query_parses() -> None:
    data = monitoring_objects("dev")[("ConfigMap", "hotswap-reconciler-dashboard")]["data"]
    dashboard = json.loads(data["hotswap-reconciler.json"])
    assert dashboard["uid"] == monitoring.DASHBOARD_UID and dashboard["schemaVersion"] == 39
    targets = [t for p in dashboard["panels"] for t in p["targets"]]
    assert len(targets) >= 12
    exported = exported_series()
    for target in targets:
        parses(target["expr"])
        assert metric_names(target["expr"]) <= exported, target["expr"]
    # Panels tile a 24-column grid without overlapping.
    cells = set()
    for panel in dashboard["panels"]:
        box = panel["gridPos"]
        assert box["x"] + box["w"] <= 24
        mine = {(x, y) for x in range(box["x"], box["x"] + box["w"]) for y in range(box["y"], box["y"] + box["h"])}
        assert not cells & mine, panel["title"]
        cells |= mine


def test_every_alert_parses_names_exported_metrics_and_says_what_to_do() -> None:
    rules = monitoring_objects("dev")[("Rules", "hotswap-reconciler")]
    (group,) = rules["spec"]["groups"]
    names = [r["alert"] for r in group["rules"]]
    assert len(names) == len(set(names)) >= 8
    exported = exported_series()
    for rule in group["rules"]:
        parses(rule["expr"])
        assert metric_names(rule["expr"]) <= exported, rule["expr"]
        assert re.fullmatch(r"\d+[smh]", rule["for"]), rule["for"]
        assert rule["labels"]["severity"] in ("critical", "warning")
        assert len(rule["annotations"]["summary"]) > 40


def test_a_broken_expression_is_caught() -> None:
    with pytest.raises(ValueError):
        parses("sum(rate(hotswap_ops_total[5m])")
    assert not metric_names("rate(hotswap_opz_total[5m])") <= exported_series()
