"""JobSets built the way users build them (`tpu_jobset`), and the names JobSet derives from them: the workload
template for every v6e shape and slice count, judged offline and by the real webhooks in e2e."""

from __future__ import annotations

from typing import Any

from gke_tpu_priority.components import tpu_shapes
from gke_tpu_priority.components.workloads import TpuJobSetSpec, tpu_jobset

POD_NAME_SUFFIX = "-abcde"
"""The five random characters the API server appends to a generated pod name (generateName)."""


def gen_pod_name(jobset: str, replicated_job: str, job_index: str, pod_index: str) -> str:
    """JobSet's pod name before the suffix (pkg/util/placement.GenPodName)."""
    return f"{jobset}-{replicated_job}-{job_index}-{pod_index}"


MAX_SLICES = TpuJobSetSpec.model_fields["slices"].metadata[1].le  # 256: the model's maximum
DNS1035_LABEL_MAX = 63


def longest_generated_pod_name(name: str, rjob: str, slices: int, completions: int) -> str:
    return gen_pod_name(name, rjob, str(slices - 1), str(completions - 1)) + POD_NAME_SUFFIX


def workload(**overrides: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "name": "train",
        "namespace": "team-a",
        "queue": "training",
        "priority": "training-high",
        "topology": "4x4",
        "slices": 2,
        "image": "us-docker.pkg.dev/p/r/train:1",
    }
    raw.update(overrides)
    return tpu_jobset(TpuJobSetSpec.model_validate(raw))


def longest_name(shape: tpu_shapes.SliceShape, slices: int) -> str:
    """The longest JobSet name the builder accepts for this shape and slice count."""
    spare = DNS1035_LABEL_MAX - len(longest_generated_pod_name("", "slice", slices, shape.vms))
    return ("a" * spare)[:DNS1035_LABEL_MAX]
