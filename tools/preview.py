"""Offline preview: run the real program for a stack under Pulumi mocks, print a plan, write the contract files.

Writes `build/<stack>/resources.json` (every registered resource with its inputs) and
`build/<stack>/manifests.yaml` (every Kubernetes object, dependency-ordered). Invalid stacks write nothing.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pulumi
import yaml

from gke_tpu_priority.components.cluster.node_pools import tpu_pool_specs
from gke_tpu_priority.components.config import CONFIG_PATH, ConfigError, PlatformConfig, parse_platform_config
from gke_tpu_priority.components.config.fleet import FLEET_CONFIG_PATH, parse_fleet_config
from gke_tpu_priority.components.config.resolved import effective_cluster_queues, effective_local_queues
from gke_tpu_priority.components.priorities import preemption_policy
from gke_tpu_priority.components.queues.provisioning import ladder_fungibility
from testkit.mock_runtime import PROJECT_ROOT, StackFileError, load_stack_config, run_program
from testkit.resources import ProgramRun
from tools import fleet_preview
from tools.manifests import helm_charts, kubernetes_objects
from tools.text_table import text_table


def resources_document(run: ProgramRun) -> dict[str, Any]:
    return {
        "stack": run.stack,
        "project": run.project,
        "resources": [
            {
                "urn": r.urn,
                "type": r.type,
                "name": r.name,
                "parent": r.parent,
                "inputs": r.inputs,
                "dependencies": r.dependencies,
                "provider": r.provider,
                "options": r.options,
            }
            for r in run.resources
        ],
        "outputs": run.outputs,
    }


def tpu_capacity_rows(config: PlatformConfig) -> list[list[Any]]:
    rows: list[list[Any]] = []
    for g in config.tpu_pools:
        shape = g.shape
        rows.append(
            [
                g.name,
                shape.topology,
                shape.machine_type,
                g.capacity.mode.value,
                g.zone,
                g.slices,
                len(tpu_pool_specs(g)),
                f"{shape.vms}",
                g.nodes,
                g.chips,
            ]
        )
    return rows


def queue_plan(config: PlatformConfig) -> list[str]:
    mode = config.hotswap.mode
    tiers = sorted(config.priorities, key=lambda t: -t.value)
    out = [
        "",
        f"Priority tiers (hotswap mode: {mode.value})",
        text_table(
            ["tier", "value", "preempts", "preemptionPolicy", "default"],
            [
                [
                    t.name,
                    t.value,
                    "yes" if t.preempts else "no",
                    preemption_policy(t, mode),
                    "yes" if t.global_default else "",
                ]
                for t in tiers
            ],
        ),
    ]
    queues = effective_cluster_queues(config.queues, config.flavors)
    flavors = {f.name: f for f in config.flavors}
    nominal: dict[str, int] = {}
    for cq in queues:
        for q in cq.flavor_quotas:
            nominal[q.flavor] = nominal.get(q.flavor, 0) + q.chips
    out += [
        "",
        "Resource flavors (quota vs provisioned chips)",
        text_table(
            ["flavor", "node labels", "slices", "chips", "nominal quota", "pools"],
            [
                [
                    f.name,
                    ",".join(f"{k.rsplit('/', 1)[-1]}={v}" for k, v in f.node_labels),
                    f.slices,
                    f.chips,
                    nominal.get(f.name, 0),
                    ",".join(f.pools),
                ]
                for f in config.flavors
            ],
        ),
    ]
    rows = []
    check = config.queues.queued_provisioning.name
    for cq in queues:
        for rung, q in enumerate(cq.flavor_quotas, start=1):
            flavor = flavors.get(q.flavor)
            rows.append(
                [
                    cq.name,
                    cq.cohort or "",
                    ",".join(cq.namespaces) or "(selector)",
                    rung if cq.ladder is not None else "",
                    q.flavor,
                    ",".join(flavor.capacity_classes) if flavor else "",
                    q.chips,
                    "" if q.borrowing_limit is None else q.borrowing_limit,
                    "" if q.lending_limit is None else q.lending_limit,
                    check if flavor is not None and flavor.queued else "",
                ]
            )
    out += [
        "",
        f"ClusterQueues (fair sharing: {'on' if config.fair_sharing else 'off'})",
        text_table(
            [
                "clusterQueue",
                "cohort",
                "namespaces",
                "rung",
                "flavor",
                "capacity",
                "chips",
                "borrow limit",
                "lend limit",
                "admission check",
            ],
            rows,
        ),
    ]
    for cq in queues:
        if cq.ladder is not None:
            fungibility = ladder_fungibility(cq)
            out.append(
                f"  ladder {cq.name}: rungs tried in order 1..{len(cq.ladder)}; "
                + ", ".join(f"{k}={v}" for k, v in fungibility.items())
            )
    lqs = effective_local_queues(config.queues)
    out += [
        "",
        "LocalQueues",
        text_table(
            ["namespace", "localQueue", "clusterQueue"], [[lq.namespace, lq.name, lq.cluster_queue] for lq in lqs]
        ),
    ]
    return out + reconciler_plan(config)


def reconciler_plan(config: PlatformConfig) -> list[str]:
    hs = config.hotswap
    if not hs.enabled:
        return ["", "Hotswap reconciler: disabled (disrupted TPU work waits for repair)"]
    image = hs.image or "built from hotswap/Dockerfile into Artifact Registry (pinned by digest)"
    tuning = ", ".join(f"{k}={v}" for k, v in sorted(hs.settings.items())) or "defaults"
    dry = ", DRY RUN" if hs.dry_run else ""
    return [
        "",
        f"Hotswap reconciler: mode {hs.mode.value}, {hs.replicas} replica(s), namespace {hs.namespace}{dry}",
        f"  image: {image}",
        f"  tuning: {tuning}",
    ]


def render_plan(run: ProgramRun, config: PlatformConfig, objects: list[dict[str, Any]]) -> str:
    out = [
        f"Stack {run.stack!r} (project {config.project}, region {config.region}): "
        f"{len(run.resources)} resources, {len(objects)} Kubernetes objects"
    ]
    if config.cluster.is_existing():
        gcp = sum(1 for r in run.resources if r.type.startswith("gcp:"))
        where = (
            config.cluster.kubeconfig_context or f"{config.cluster.name} in {config.cluster.location or config.region}"
        )
        out.append(
            f"Existing cluster ({where}): {gcp} GCP resources; the TPU capacity below is as described in tpuPools"
        )
    counts = Counter(r.type for r in run.resources)
    out += ["", "Resources by type", text_table(["type", "count"], [[t, n] for t, n in sorted(counts.items())])]
    rows = tpu_capacity_rows(config)
    total = [
        "TOTAL",
        "",
        "",
        "",
        "",
        sum(r[5] for r in rows),
        sum(r[6] for r in rows),
        "",
        sum(r[8] for r in rows),
        sum(r[9] for r in rows),
    ]
    out += [
        "",
        "TPU v6e capacity",
        text_table(
            [
                "group",
                "topology",
                "machine",
                "capacity",
                "zone",
                "slices",
                "node pools",
                "VMs/slice",
                "nodes",
                "chips",
            ],
            [*rows, total],
        ),
    ]
    out += queue_plan(config)
    charts = helm_charts(run.resources)
    if charts:
        out += [
            "",
            "Helm charts (rendered by the Kubernetes provider at deploy time)",
            text_table(
                ["resource", "chart", "version", "namespace"],
                [[c["name"], c["chart"], c["version"], c["namespace"]] for c in charts],
            ),
        ]
    kinds = Counter(f"{o['apiVersion']}/{o['kind']}" for o in objects)
    if kinds:
        out += [
            "",
            "Kubernetes objects",
            text_table(["kind", "count"], [[k, n] for k, n in sorted(kinds.items())]),
        ]
    out += ["", "Outputs: " + ", ".join(sorted(run.outputs))]
    return "\n".join(out)


def write_contract(run: ProgramRun, objects: list[dict[str, Any]], out_dir: Path) -> None:
    tmp = out_dir.with_name(out_dir.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    (tmp / "resources.json").write_text(json.dumps(resources_document(run), indent=2, sort_keys=False) + "\n")
    (tmp / "manifests.yaml").write_text(yaml.safe_dump_all(objects, sort_keys=False) if objects else "")
    # Replace the previous preview only once the new one is complete.
    shutil.rmtree(out_dir, ignore_errors=True)
    tmp.rename(out_dir)


def preview(stack: str, build_dir: Path) -> str:
    raw = load_stack_config(stack)
    if FLEET_CONFIG_PATH in raw:
        fleet = parse_fleet_config(raw[FLEET_CONFIG_PATH], stack_file=True)
        run = fleet_preview.redacted_run(run_program(stack, raw))
        objects = fleet_preview.fleet_objects(run, stack)
        write_contract(run, objects, build_dir / stack)
        return fleet_preview.render_fleet_plan(run, fleet, objects)
    config = parse_platform_config(raw.get(CONFIG_PATH), stack_file=True)
    run = run_program(stack, raw)
    objects = kubernetes_objects(run.resources)
    write_contract(run, objects, build_dir / stack)
    return render_plan(run, config, objects)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.preview",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--stack", default="dev", help="stack name: reads stacks/Pulumi.<stack>.yaml (default: dev)")
    parser.add_argument("--build-dir", type=Path, default=PROJECT_ROOT / "build", help="output directory root")
    args = parser.parse_args(argv)
    try:
        print(preview(args.stack, args.build_dir))
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except (FileNotFoundError, StackFileError, pulumi.RunError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"\nWrote {args.build_dir / args.stack}/resources.json and manifests.yaml")
    return 0


if __name__ == "__main__":
    sys.exit(main())
