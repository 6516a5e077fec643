"""Offline preview of a fleet stack: the fleet by region, chips per worker, dispatch order; every object written.

`build/<stack>/resources.json` and `manifests.yaml` hold every resource and every Kubernetes object of every
cluster (each object annotated with the cluster it goes to); values Pulumi holds as secrets are written as
`[secret]`, so no token or kubeconfig reaches the files.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any

from gke_tpu_priority.components.config.fleet import DISPATCHER_NAMES, FleetConfig, check_groups
from gke_tpu_priority.components.fleet.multikueue import manager_cluster_queues
from gke_tpu_priority.policies.rules.base import CLUSTER_ANNOTATION
from testkit.resources import SECRET_SIG, ProgramRun, RegisteredResource
from tools.manifests import kubernetes_objects
from tools.text_table import text_table

REDACTED = "[secret]"


def redact(value: Any) -> Any:
    if isinstance(value, dict):
        if SECRET_SIG in value:
            return REDACTED
        return {k: redact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    return value


def redacted_run(run: ProgramRun) -> ProgramRun:
    resources = [dataclasses.replace(r, inputs=redact(r.inputs)) for r in run.resources]
    return ProgramRun(stack=run.stack, project=run.project, resources=resources, outputs=redact(run.outputs))


def _cluster_of(res: RegisteredResource, providers: dict[str, str]) -> str:
    return providers.get((res.provider or "").rsplit("::", 1)[0], "")


def fleet_objects(run: ProgramRun, stack: str) -> list[dict[str, Any]]:
    """Every Kubernetes object, annotated with the cluster (manager or worker) whose provider applies it."""
    providers: dict[str, str] = {}
    for res in run.resources:
        if res.type == "pulumi:providers:kubernetes":
            short = res.name.removeprefix(f"{stack}-").removesuffix("-k8s").removesuffix("-cluster")
            providers[res.urn] = short
    objects: list[dict[str, Any]] = []
    for res in run.resources:
        found = kubernetes_objects([res])
        if not found:
            continue
        obj = found[0]
        meta = obj.setdefault("metadata", {})
        meta["annotations"] = {**meta.get("annotations", {}), CLUSTER_ANNOTATION: _cluster_of(res, providers)}
        objects.append(obj)
    return objects


def render_fleet_plan(run: ProgramRun, config: FleetConfig, objects: list[dict[str, Any]]) -> str:
    m = config.manager
    out = [
        f"Fleet stack {run.stack!r}: {len(config.workers)} workers + manager, {len(run.resources)} resources, "
        f"{len(objects)} Kubernetes objects",
        "",
        "Clusters by region",
        text_table(
            ["role", "name", "cluster", "region", "mode", "TPU slices", "chips"],
            [
                ["manager", "manager", m.name, m.location or m.region, f"{m.mode.value} (Autopilot, CPU-only)", 0, 0],
                *[
                    [
                        "worker",
                        w.name,
                        w.platform.cluster.name,
                        w.platform.region,
                        w.platform.cluster.mode.value,
                        sum(g.slices for g in w.platform.tpu_pools),
                        sum(g.chips for g in w.platform.tpu_pools),
                    ]
                    for w in config.workers
                ],
            ],
        ),
    ]
    flavor_rows = []
    for w in config.workers:
        for f in w.platform.flavors:
            flavor_rows.append([w.name, f.name, f.slices, f.chips])
    out += ["", "Chips per worker and flavor", text_table(["worker", "flavor", "slices", "chips"], flavor_rows)]
    mk = config.multi_kueue
    out += [
        "",
        f"Dispatch: {mk.dispatcher.value} ({DISPATCHER_NAMES[mk.dispatcher]}); order: "
        + " > ".join(w.name for w in config.workers),
        text_table(
            ["admissionCheck", "clusterQueues", "workers (preference order)", "flavors"],
            [
                [g.name, ",".join(g.cluster_queues), ",".join(g.workers), ",".join(g.flavors)]
                for g in check_groups(config)
            ],
        ),
    ]
    rows = [[cq.name, q.flavor, q.chips] for cq in manager_cluster_queues(config) for q in cq.quotas]
    out += ["", "Manager ClusterQueues (quota = fleet sum)", text_table(["clusterQueue", "flavor", "chips"], rows)]
    per_cluster = Counter(o["metadata"]["annotations"][CLUSTER_ANNOTATION] for o in objects)
    out += [
        "",
        "Kubernetes objects per cluster",
        text_table(["cluster", "objects"], [[c, n] for c, n in sorted(per_cluster.items())]),
    ]
    kinds = Counter(f"{o['apiVersion']}/{o['kind']}" for o in objects)
    out += ["", "Kubernetes objects", text_table(["kind", "count"], [[k, n] for k, n in sorted(kinds.items())])]
    out += ["", "Outputs: " + ", ".join(sorted(run.outputs))]
    return "\n".join(out)
