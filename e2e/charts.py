"""Render the Kueue and JobSet charts with a stack's values, as Pulumi's helm.v4.Chart would.

The charts come from the very Go modules the controllers are built from (same release, complete: the Kueue chart's
CRD templates, with their conversion webhooks, are part of it, as in the published chart). Both this and Chart v4
run Helm's template engine, CRDs included; the package's values come from the same functions its KueueJobSet
component calls (components.kueue), and the one transform it applies (the JobSet controller's PriorityClass) is
applied here too, by the component's own transform function.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pulumi
import yaml

from gke_tpu_priority.components.config import PlatformConfig
from gke_tpu_priority.components.kueue import jobset_controller_priority, jobset_values, kueue_values
from tools import toolchain

JsonObj = dict[str, Any]


def helm_template(chart: Path, release: str, namespace: str, values: JsonObj, kube_version: str) -> list[JsonObj]:
    with tempfile.NamedTemporaryFile("w", suffix=".json") as values_file:
        json.dump(values, values_file)
        values_file.flush()
        done = subprocess.run(
            [
                str(toolchain.binary("helm")),
                "template",
                release,
                str(chart),
                f"--namespace={namespace}",
                f"--values={values_file.name}",
                f"--kube-version={kube_version}",
                "--include-crds",
            ],
            capture_output=True,
            text=True,
        )
    if done.returncode != 0:
        raise RuntimeError(f"helm template {chart.name} failed: {done.stderr.strip()}")
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def _transform(obj: JsonObj) -> JsonObj:
    group_version = obj["apiVersion"] if "/" in obj["apiVersion"] else f"core/{obj['apiVersion']}"
    args = pulumi.ResourceTransformArgs(
        custom=True,
        type_=f"kubernetes:{group_version}:{obj['kind']}",
        name=obj["metadata"]["name"],
        props=obj,
        opts=pulumi.ResourceOptions(),
    )
    result = jobset_controller_priority(args)
    return dict(result.props) if result is not None else obj


def chart_objects(config: PlatformConfig, kube_version: str) -> dict[str, list[JsonObj]]:
    """What each chart renders for this stack, keyed by the namespace it installs into."""
    jobset_chart = toolchain.module_source("jobset", "sigs.k8s.io/jobset") / "charts" / "jobset"
    kueue_chart = toolchain.module_source("kueue", "sigs.k8s.io/kueue") / "charts" / "kueue"
    jobset = helm_template(jobset_chart, "jobset", config.jobset.namespace, jobset_values(config), kube_version)
    kueue = helm_template(kueue_chart, "kueue", config.kueue.namespace, kueue_values(config), kube_version)
    return {config.jobset.namespace: [_transform(o) for o in jobset], config.kueue.namespace: kueue}
