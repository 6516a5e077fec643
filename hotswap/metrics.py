"""Prometheus metrics of the hotswap reconciler (every name prefixed `hotswap_`)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

# Seconds. Recovery and holds range from seconds (spare slice) to hours (maxHold, default 6 h).
_RECOVERY_BUCKETS = (5, 10, 20, 30, 60, 120, 180, 300, 600, 900, 1800, 3600, 7200)
_HOLD_BUCKETS = (30, 60, 120, 300, 600, 1800, 3600, 7200, 14400, 21600, 43200, 86400)
_RECONCILE_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


class Metrics:
    """All reconciler metrics on one registry (a fresh registry per instance keeps tests independent)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.ops = Counter("hotswap_ops", "Hotswap operations by outcome.", ["result"], registry=r)
        self.victims = Counter("hotswap_victims", "Workloads held (deactivated) as victims.", registry=r)
        self.slices_freed = Counter("hotswap_slices_freed", "TPU slices freed for disrupted preemptors.", registry=r)
        self.releases = Counter(
            "hotswap_releases", "Held workloads released (reactivated), by reason.", ["reason"], registry=r
        )
        self.failure_to_preemptor_ready = Histogram(
            "hotswap_failure_to_preemptor_ready_seconds",
            "MTTR: time from the infrastructure failure to the preemptor being ready again.",
            buckets=_RECOVERY_BUCKETS,
            registry=r,
        )
        self.detection_to_plan = Histogram(
            "hotswap_detection_to_plan_seconds",
            "Time from the first sign of disruption of a preemptor to its operation being planned.",
            buckets=_RECOVERY_BUCKETS,
            registry=r,
        )
        self.plan_to_done = Histogram(
            "hotswap_plan_to_done_seconds",
            "Time from an operation being planned to the preemptor being ready on healthy slices.",
            buckets=_RECOVERY_BUCKETS,
            registry=r,
        )
        self.hold_duration = Histogram(
            "hotswap_victim_hold_seconds",
            "How long a victim stayed held before release.",
            buckets=_HOLD_BUCKETS,
            registry=r,
        )
        self.held_workloads = Gauge("hotswap_held_workloads", "Workloads currently held by the reconciler.", registry=r)
        self.quarantined_nodes = Gauge(
            "hotswap_quarantined_nodes",
            "Nodes of Suspect or Unhealthy slices carrying the reconciler's NoSchedule quarantine taint.",
            registry=r,
        )
        self.starved_preemptors = Gauge(
            "hotswap_starved_preemptors",
            "Admitted JobSets whose pods waited for a node past starvationGrace without free slices to bind on.",
            registry=r,
        )
        self.excluded = Gauge(
            "hotswap_excluded",
            "Objects the last snapshot left out of every decision, by reason (see the pass log for examples).",
            ["reason"],
            registry=r,
        )
        self.reconcile_duration = Histogram(
            "hotswap_reconcile_duration_seconds",
            "Duration of one reconcile pass (snapshot, plan, actuation).",
            buckets=_RECONCILE_BUCKETS,
            registry=r,
        )
        self.reconciles = Counter("hotswap_reconciles", "Reconcile passes by outcome.", ["result"], registry=r)
        self.api_errors = Counter(
            "hotswap_api_errors",
            "Failed Kubernetes API calls by verb and HTTP status (0: no response).",
            ["verb", "code"],
            registry=r,
        )
        self.writes = Counter(
            "hotswap_writes",
            "Kubernetes writes attempted by the actuator, by action and result.",
            ["action", "result"],
            registry=r,
        )
        self.leader = Gauge("hotswap_leader", "1 while this replica holds the leader Lease.", registry=r)
        self.cache_synced = Gauge(
            "hotswap_cache_synced",
            "1 when the watch cache of a resource is synced and healthy.",
            ["resource"],
            registry=r,
        )
        self.watch_restarts = Counter(
            "hotswap_watch_restarts",
            "Watch restarts by resource and cause (relist_410, error, end).",
            ["resource", "cause"],
            registry=r,
        )
        self.events_emitted = Counter("hotswap_events", "Kubernetes Events emitted, by reason.", ["reason"], registry=r)

    def api_error(self, verb: str, code: int | None) -> None:
        self.api_errors.labels(verb=verb, code=str(code or 0)).inc()
