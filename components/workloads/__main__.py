"""Print a TPU v6e JobSet as YAML: `gke-tpu-jobset --name train --topology 4x4 ...`."""

from __future__ import annotations

import argparse
import sys

import yaml
from pydantic import ValidationError

from gke_tpu_priority.components.config.errors import format_validation_error
from gke_tpu_priority.components.workloads.jobset import TpuJobSetSpec, tpu_jobset


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gke-tpu-jobset", description=__doc__)
    parser.add_argument("--name", required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--queue", required=True, help="LocalQueue name")
    parser.add_argument("--priority", required=True, help="priority tier, e.g. training-high")
    parser.add_argument("--topology", required=True, help="v6e topology, e.g. 4x4")
    parser.add_argument("--machine-type", default=None, help="needed for 2x4")
    parser.add_argument("--slices", type=int, default=1)
    parser.add_argument("--image", required=True)
    parser.add_argument("--max-restarts", type=int, default=3)
    parser.add_argument("--fast-fail", action="store_true", help="opt in to hotswap fast-fail")
    parser.add_argument(
        "--no-spot", action="store_true", help="keep the JobSet off spot capacity (Kueue takes the next rung)"
    )
    parser.add_argument("command", nargs="*", help="container command (after --)")
    ns = parser.parse_args(argv)
    raw = {
        "name": ns.name,
        "namespace": ns.namespace,
        "queue": ns.queue,
        "priority": ns.priority,
        "topology": ns.topology,
        "machineType": ns.machine_type,
        "slices": ns.slices,
        "image": ns.image,
        "maxRestarts": ns.max_restarts,
        "fastFail": ns.fast_fail,
        "allowSpot": not ns.no_spot,
        "command": ns.command,
    }
    try:
        spec = TpuJobSetSpec.model_validate(raw)
    except ValidationError as err:
        print(f"error: {format_validation_error('jobset', err, 'workload')}", file=sys.stderr)
        return 2
    sys.stdout.write(yaml.safe_dump(tpu_jobset(spec), sort_keys=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
