"""The JSON patch that pins a suspended JobSet's TPU pod templates to one capacity (the rung switch, `planner.rungs`).

A JSON patch, not a merge patch: a merge patch replaces `spec.replicatedJobs` whole, which would drop whatever was
written since the read. Its `test` operations make it conditional on what the planner relied on (the same JobSet,
still suspended), so a JobSet that was replaced or resumed meanwhile is refused by the API server as a whole.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

JsonObj = dict[str, Any]


def _pointer(token: str) -> str:
    """One RFC 6901 reference token (`/` and `~` escaped), for label keys such as `gke-tpu-priority.io/capacity`."""
    return token.replace("~", "~0").replace("/", "~1")


def pin_patch(jobset: JsonObj, uid: str, replicated_jobs: Iterable[str], label: str, value: str) -> list[JsonObj] | str:
    """The operations adding `label: value` to the nodeSelector of each named replicated job's pod template; [] when
    every one already has it; a reason string when it cannot be pinned (another value of `label` is already
    selected: a capacity the JobSet's owner chose, or a replicated job is missing)."""
    spec = jobset.get("spec")
    listed = spec.get("replicatedJobs") if isinstance(spec, dict) else None
    found: list[Any] = listed if isinstance(listed, list) else []
    index = {rj.get("name"): i for i, rj in enumerate(found) if isinstance(rj, dict)}
    ops: list[JsonObj] = []
    for name in replicated_jobs:
        i = index.get(name)
        if i is None:
            return f"replicated job {name!r} not found"
        pod_spec = found[i].get("template", {}).get("spec", {}).get("template", {}).get("spec", {})
        selector = pod_spec.get("nodeSelector") if isinstance(pod_spec, dict) else None
        base = f"/spec/replicatedJobs/{i}/template/spec/template/spec/nodeSelector"
        if not isinstance(selector, dict):
            ops.append({"op": "add", "path": base, "value": {label: value}})
        elif selector.get(label) == value:
            continue
        elif label in selector:
            return f"replicated job {name!r} already selects {label}={selector[label]}"
        else:
            ops.append({"op": "add", "path": f"{base}/{_pointer(label)}", "value": value})
    if not ops:
        return []
    return [
        {"op": "test", "path": "/metadata/uid", "value": uid},
        {"op": "test", "path": "/spec/suspend", "value": True},
        *ops,
    ]
