"""See hotswap happen: GKE Managed Prometheus scrapes the reconciler (PodMonitoring), alerting rules for what it
exports (a Managed Prometheus `Rules` object in its namespace), and a Grafana dashboard (a ConfigMap labelled
`grafana_dashboard: "1"`, the convention of Grafana's dashboard sidecar; its JSON also imports by hand).

One place defines every expression, so the tests parse each with a PromQL parser and check that every metric it
names is one :class:`hotswap.metrics.Metrics` exports. docs/operations.md, "Following one incident", reads them.
"""

from __future__ import annotations

import json
from typing import Any

from gke_tpu_priority.components.config import PlatformConfig
from gke_tpu_priority.components.reconciler.objects import APP, LABELS, SELECTOR, meta

MONITORING_API = "monitoring.googleapis.com/v1"
DASHBOARD_UID = "gke-tpu-priority-hotswap"
SCRAPE_INTERVAL = "30s"

# (alert, severity, for, expression, summary): what an operator is paged or warned about, and what to do.
ALERTS: tuple[tuple[str, str, str, str, str], ...] = (
    (
        "HotswapNoLeader",
        "critical",
        "5m",
        "sum(hotswap_leader) < 1 or absent(hotswap_leader)",
        "No hotswap reconciler replica holds the Lease: disrupted high-priority JobSets wait for repair and held "
        "work waits (maxHold is not enforced). Check `kubectl -n hotswap-system get pods,lease`.",
    ),
    (
        "HotswapSeveralLeaders",
        "critical",
        "2m",
        "sum(hotswap_leader) > 1",
        "More than one reconciler replica believes it leads; check the Lease and the replicas' clocks.",
    ),
    (
        "HotswapReconcileStalled",
        "critical",
        "10m",
        "sum(rate(hotswap_reconciles_total[10m])) == 0 and sum(hotswap_leader) >= 1",
        "The leader has run no reconcile pass for 10 minutes; its liveness probe should restart it. Read its logs.",
    ),
    (
        "HotswapWatchCachesNotSynced",
        "warning",
        "10m",
        "min(hotswap_cache_synced) < 1",
        "A watch cache of the reconciler is not synced: it plans on stale state and is not ready.",
    ),
    (
        "HotswapOperationBlocked",
        "warning",
        "0m",
        'sum(increase(hotswap_ops_total{result="blocked"}[30m])) > 0',
        "A disrupted high-priority JobSet could not be covered by lower-priority work (HotswapBlocked Event says "
        "why): it waits for repair. `kubectl get events -A --field-selector reason=HotswapBlocked`.",
    ),
    (
        "HotswapStarvedPreemptors",
        "warning",
        "15m",
        "max(hotswap_starved_preemptors) > 0",
        "An admitted JobSet has found no free slice for 15 minutes; see `kubectl hotswap status` and its "
        "HotswapBlocked Events.",
    ),
    (
        "HotswapWorkHeldLong",
        "warning",
        "3h",
        "max(hotswap_held_workloads) > 0",
        "Work has been held for 3 hours: capacity has not come back. `kubectl hotswap status` lists it; maxHold "
        "releases it.",
    ),
    (
        "HotswapSlowRecovery",
        "warning",
        "30m",
        "histogram_quantile(0.9, sum by (le) (rate(hotswap_failure_to_preemptor_ready_seconds_bucket[1h]))) > 600",
        "Disrupted JobSets took more than 10 minutes (p90, last hour) from failure to all pods running again.",
    ),
    (
        "HotswapApiErrors",
        "warning",
        "10m",
        "sum by (verb, code) (rate(hotswap_api_errors_total[10m])) > 0.1",
        "The reconciler's API calls fail (RBAC, throttling, conflicts); `hotswap_api_errors_total` says which.",
    ),
)

# (title, kind, [(expression, legend)], unit): the dashboard's panels, top to bottom.
PANELS: tuple[tuple[str, str, tuple[tuple[str, str], ...], str], ...] = (
    ("Leader", "stat", (("sum(hotswap_leader)", "replicas leading"),), "none"),
    ("Held Workloads", "stat", (("max(hotswap_held_workloads)", "held"),), "none"),
    ("Starved preemptors", "stat", (("max(hotswap_starved_preemptors)", "starved"),), "none"),
    (
        "Operations by outcome",
        "timeseries",
        (("sum by (result) (increase(hotswap_ops_total[$__rate_interval]))", "{{result}}"),),
        "none",
    ),
    (
        "Victims held and slices freed",
        "timeseries",
        (
            ("sum(increase(hotswap_victims_total[$__rate_interval]))", "victims held"),
            ("sum(increase(hotswap_slices_freed_total[$__rate_interval]))", "slices freed"),
        ),
        "none",
    ),
    (
        "Releases by reason",
        "timeseries",
        (("sum by (reason) (increase(hotswap_releases_total[$__rate_interval]))", "{{reason}}"),),
        "none",
    ),
    (
        "Failure to preemptor ready (MTTR)",
        "timeseries",
        (
            (
                "histogram_quantile(0.5, sum by (le) (rate(hotswap_failure_to_preemptor_ready_seconds_bucket"
                "[$__rate_interval])))",
                "p50",
            ),
            (
                "histogram_quantile(0.9, sum by (le) (rate(hotswap_failure_to_preemptor_ready_seconds_bucket"
                "[$__rate_interval])))",
                "p90",
            ),
        ),
        "s",
    ),
    (
        "Victim hold time",
        "timeseries",
        (
            (
                "histogram_quantile(0.9, sum by (le) (rate(hotswap_victim_hold_seconds_bucket[$__rate_interval])))",
                "p90",
            ),
        ),
        "s",
    ),
    (
        "Excluded JobSets by reason",
        "timeseries",
        (("sum by (reason) (hotswap_excluded)", "{{reason}}"),),
        "none",
    ),
    (
        "Reconcile pass duration",
        "timeseries",
        (
            (
                "histogram_quantile(0.99, sum by (le) (rate(hotswap_reconcile_duration_seconds_bucket"
                "[$__rate_interval])))",
                "p99",
            ),
        ),
        "s",
    ),
    (
        "API errors and writes",
        "timeseries",
        (
            ("sum by (verb, code) (rate(hotswap_api_errors_total[$__rate_interval]))", "error {{verb}} {{code}}"),
            ("sum by (action, result) (rate(hotswap_writes_total[$__rate_interval]))", "{{action}} {{result}}"),
        ),
        "ops",
    ),
)


def monitoring_enabled(config: PlatformConfig) -> bool:
    """The setting, else on where the package creates the cluster (Managed Prometheus is on there) and off on an
    existing cluster (whose monitoring.googleapis.com CRDs may be absent)."""
    chosen = config.hotswap.monitoring.enabled
    return (not config.cluster.is_existing()) if chosen is None else chosen


def pod_monitoring(config: PlatformConfig) -> dict[str, Any]:
    return {
        "apiVersion": MONITORING_API,
        "kind": "PodMonitoring",
        "metadata": meta(APP, config.hotswap.namespace),
        "spec": {
            "selector": {"matchLabels": dict(SELECTOR)},
            "endpoints": [{"port": "metrics", "path": "/metrics", "interval": SCRAPE_INTERVAL}],
        },
    }


def alert_rules(config: PlatformConfig) -> dict[str, Any]:
    rules = [
        {
            "alert": name,
            "expr": expr,
            "for": hold,
            "labels": {"severity": severity, "component": APP},
            "annotations": {"summary": summary},
        }
        for name, severity, hold, expr, summary in ALERTS
    ]
    return {
        "apiVersion": MONITORING_API,
        "kind": "Rules",
        "metadata": meta(APP, config.hotswap.namespace),
        "spec": {"groups": [{"name": "hotswap-reconciler", "interval": SCRAPE_INTERVAL, "rules": rules}]},
    }


def dashboard() -> dict[str, Any]:
    """The Grafana dashboard (schemaVersion 39), datasource chosen by a variable."""
    source = {"type": "prometheus", "uid": "${datasource}"}
    panels: list[dict[str, Any]] = []
    x = y = 0
    for number, (title, kind, targets, unit) in enumerate(PANELS, 1):
        width, height = (8, 4) if kind == "stat" else (12, 8)
        if x + width > 24:
            x, y = 0, y + height
        panels.append(
            {
                "id": number,
                "type": kind,
                "title": title,
                "datasource": source,
                "gridPos": {"x": x, "y": y, "w": width, "h": height},
                "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
                "targets": [
                    {"refId": chr(ord("A") + i), "expr": expr, "legendFormat": legend, "datasource": source}
                    for i, (expr, legend) in enumerate(targets)
                ],
            }
        )
        x += width
    return {
        "uid": DASHBOARD_UID,
        "title": "Hotswap reconciler (gke-tpu-priority)",
        "tags": ["gke-tpu-priority", "hotswap", "kueue"],
        "schemaVersion": 39,
        "time": {"from": "now-6h", "to": "now"},
        "refresh": "1m",
        "templating": {
            "list": [{"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Data source"}]
        },
        "panels": panels,
    }


def dashboard_config_map(config: PlatformConfig) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": meta(f"{APP}-dashboard", config.hotswap.namespace, labels={**LABELS, "grafana_dashboard": "1"}),
        "data": {"hotswap-reconciler.json": json.dumps(dashboard(), indent=2, sort_keys=True)},
    }
