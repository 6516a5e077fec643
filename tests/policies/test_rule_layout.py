"""The rule set's layout: one family per rule, one pack policy per rule, the v6e table in step with components."""

from __future__ import annotations

from gke_tpu_priority.components import tpu_shapes
from gke_tpu_priority.policies import rules
from gke_tpu_priority.policies.rules import v6e


def test_policies_v6e_table_is_the_components_table() -> None:
    ours = [(s.topology, s.chips, s.vms, s.machine_type, s.chips_per_vm) for s in v6e.SHAPES]
    theirs = [(s.topology, s.chips, s.vms, s.machine_type, s.chips_per_vm) for s in tpu_shapes.SHAPES]
    assert ours == theirs
    assert v6e.ACCELERATOR == tpu_shapes.ACCELERATOR


def test_every_rule_has_one_family_and_one_pack_policy() -> None:
    names = [r.name for r in rules.RULES]
    assert len(names) == len(set(names))
    assert {r.family for r in rules.RULES} == {
        "priority tiers",
        "Kueue objects",
        "Kueue admission checks",
        "TPU workloads",
        "GKE",
        "reconciler hardening",
        "multi-tenancy",
    }
    assert [p.name for p in rules.ALL] == [
        *(r.name for r in rules.RULES if not isinstance(r, rules.PictureRule)),
        *(r.name for r in rules.PICTURE_RULES),
    ]


def test_every_tpu_workload_and_tenancy_rule_has_an_in_cluster_form() -> None:
    workload = {r.name for r in rules.RULES if r.family in ("TPU workloads", "multi-tenancy")}
    assert workload == {r.name for r in rules.ADMISSION_RULES}
    assert len(workload) == 12


def test_the_pack_loads_the_way_the_policy_host_loads_it() -> None:
    """Only policies/ on the path, rules/ a top-level package: nothing from components/ or policies.* is imported."""
    import subprocess
    import sys
    from pathlib import Path

    pack_dir = Path(rules.__file__).resolve().parents[1]
    script = (
        "import sys; sys.path.insert(0, sys.argv[1]); import rules; "
        "print(len(rules.ALL), sorted({m.split('.')[0] for m in sys.modules} & {'components', 'policies'}))"
    )
    proc = subprocess.run(
        [sys.executable, "-I", "-c", script, str(pack_dir)], capture_output=True, text=True, check=False, cwd=pack_dir
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"{len(rules.RULES)} []"
