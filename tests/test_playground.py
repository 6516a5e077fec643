"""The playground's pure parts, offline: which stacks it runs, the fake nodes a stack's pools make, the repair of
deleted hosts, what it prints, and how `make cluster` / `python -m e2e.cluster` read their arguments."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e import cluster, playground
from e2e.playground import (
    FakePool,
    PlaygroundError,
    Ready,
    choose_stack,
    due_repairs,
    fake_pools,
    fleet_summary,
    playground_stacks,
    pool_nodes,
    ready_message,
    served_locally,
    skipped_pools,
    system_node_labels,
)
from gke_tpu_priority.components.config import parse_platform_config
from gke_tpu_priority.components.config.platform import PlatformConfig
from gke_tpu_priority.components.tpu_shapes import NODEPOOL_LABEL, TOPOLOGY_LABEL, TPU_RESOURCE
from gke_tpu_priority.components.workloads import __main__ as jobset_cli
from testkit.mock_runtime import PROJECT_ROOT, load_stack_config
from tests.conftest import stack_run
from tools.manifests import kubernetes_objects

JsonObj = dict[str, Any]
CONFIGS = {name: load_stack_config(name) for name in playground.stack_names(PROJECT_ROOT)}


def _config(stack: str) -> PlatformConfig:
    return parse_platform_config(choose_stack(stack, CONFIGS))


def _platform(**pools: JsonObj) -> PlatformConfig:
    return parse_platform_config(
        {
            "project": "my-tpu-project",
            "region": "us-east5",
            "tpuPools": [{"name": name, "zone": "us-east5-b", **pool} for name, pool in pools.items()],
        }
    )


# ---- choosing a stack --------------------------------------------------------------------------------------------


def test_every_single_platform_stack_is_offered_and_the_fleet_is_not() -> None:
    assert playground_stacks(CONFIGS) == ["dev", "existing", "gke-sample", "ladder", "prod"]


def test_an_unknown_stack_is_refused_naming_the_stacks_there_are() -> None:
    with pytest.raises(PlaygroundError) as err:
        choose_stack("staging", CONFIGS)
    assert str(err.value) == (
        "STACK='staging': no stack file stacks/Pulumi.staging.yaml; the playground runs one of: "
        "dev, existing, gke-sample, ladder, prod"
    )


def test_a_fleet_stack_is_refused_as_several_clusters() -> None:
    with pytest.raises(PlaygroundError, match=r"STACK='fleet' is a fleet \(several clusters\).*one of: dev, "):
        choose_stack("fleet", CONFIGS)


def test_a_chosen_stack_gives_its_platform_configuration() -> None:
    assert choose_stack("dev", CONFIGS)["cluster"]["name"] == "tpu-dev"


def test_the_command_line_refuses_a_bad_stack_with_exit_code_2_and_no_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cluster.main(["--stack", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: STACK='nope': no stack file") and "Traceback" not in err


def test_make_cluster_passes_the_stack_and_an_empty_stack_gives_the_bare_control_plane() -> None:
    def recipe(*variables: str) -> str:
        done = subprocess.run(
            ["make", "-n", "-s", "-C", str(PROJECT_ROOT), "cluster", *variables, "BIN=bin"],
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout.strip().splitlines()[-1]

    assert recipe() == "bin/python -m e2e.cluster --stack dev"
    assert recipe("STACK=prod") == "bin/python -m e2e.cluster --stack prod"
    assert recipe("STACK=") == "bin/python -m e2e.cluster"


# ---- the fake fleet ----------------------------------------------------------------------------------------------


def test_the_dev_stack_makes_a_pool_of_two_single_host_slices_and_one_four_host_slice() -> None:
    pools = fake_pools(_config("dev"))
    assert [(p.name, p.hosts, p.slices, p.shape.topology) for p in pools] == [
        ("dev-2x2", 2, 2, "2x2"),
        ("dev-4x4-0", 4, 1, "4x4"),
    ]
    assert [p.node_names() for p in pools] == [
        ["dev-2x2-0", "dev-2x2-1"],
        ["dev-4x4-0-0", "dev-4x4-0-1", "dev-4x4-0-2", "dev-4x4-0-3"],
    ]
    assert fleet_summary(pools) == "6 TPU v6e hosts in 3 slices (dev-2x2: 2 x 2x2; dev-4x4: 1 x 4x4)"


def test_each_multi_host_slice_is_a_pool_of_its_own() -> None:
    pools = fake_pools(_config("prod"))
    assert len(pools) == 12 and all(p.hosts == 4 and p.slices == 1 for p in pools)
    assert pools[0].name == "resv-4x4-0" and pools[-1].name == "spot-4x4-3"


def test_queued_provisioning_pools_get_no_nodes() -> None:
    config = _config("ladder")
    assert skipped_pools(config) == ["dws-4x4", "dws-2x2"]
    assert not {p.group for p in fake_pools(config)} & {"dws-4x4", "dws-2x2"}


def test_a_node_carries_what_the_stacks_flavors_and_the_reconciler_read() -> None:
    pool = fake_pools(_config("dev"))[0]
    (node, _) = pool_nodes(pool)
    labels = node["metadata"]["labels"]
    assert labels[NODEPOOL_LABEL] == "dev-2x2"
    assert labels[TOPOLOGY_LABEL] == "2x2"
    assert labels["gke-tpu-priority.io/pool-group"] == "dev-2x2"
    assert labels["gke-tpu-priority.io/capacity"] == "spot"
    assert labels["cloud.google.com/gke-spot"] == "true"
    assert labels["topology.kubernetes.io/zone"] == "us-east5-b"
    assert node["status"]["capacity"][TPU_RESOURCE] == "4"
    assert node["spec"]["taints"] == [{"key": "google.com/tpu", "value": "present", "effect": "NoSchedule"}]


def test_a_pools_own_labels_and_taints_are_on_its_nodes() -> None:
    config = _platform(
        big={
            "topology": "4x4",
            "slices": 1,
            "capacity": {"mode": "on-demand"},
            "labels": {"team": "a"},
            "taints": [{"key": "dedicated", "value": "a", "effect": "NO_EXECUTE"}],
        }
    )
    (pool,) = fake_pools(config)
    nodes = pool_nodes(pool)
    assert len(nodes) == 4
    assert all(n["metadata"]["labels"]["team"] == "a" for n in nodes)
    assert "cloud.google.com/gke-spot" not in nodes[0]["metadata"]["labels"]
    assert nodes[0]["spec"]["taints"][1] == {"key": "dedicated", "value": "a", "effect": "NoExecute"}


def test_the_system_node_matches_where_the_stack_pins_its_controllers() -> None:
    assert system_node_labels(_config("dev"))["gke-tpu-priority.io/system"] == "true"
    existing = system_node_labels(_config("existing"))
    assert existing[NODEPOOL_LABEL] == "cpu-np" and "gke-tpu-priority.io/system" not in existing


def test_objects_only_gke_serves_are_left_out() -> None:
    assert not served_locally({"apiVersion": "monitoring.googleapis.com/v1", "kind": "PodMonitoring"})
    assert served_locally({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue"})


# ---- the repair of deleted hosts --------------------------------------------------------------------------------


def test_a_deleted_host_is_repaired_only_after_the_delay() -> None:
    missing: dict[str, float] = {}
    expected = ["a-0", "a-1"]
    assert due_repairs(expected, {"a-0"}, missing, now=100.0, after=90.0) == []
    assert missing == {"a-1": 100.0}
    assert due_repairs(expected, {"a-0"}, missing, now=189.0, after=90.0) == []
    assert due_repairs(expected, {"a-0"}, missing, now=190.0, after=90.0) == ["a-1"]
    assert missing == {}


def test_a_host_back_before_the_delay_is_forgotten() -> None:
    missing = {"a-1": 100.0}
    assert due_repairs(["a-0", "a-1"], {"a-0", "a-1"}, missing, now=150.0, after=90.0) == []
    assert missing == {}


# ---- what it prints ----------------------------------------------------------------------------------------------


def test_the_ready_message_says_how_to_reach_the_cluster() -> None:
    ready = Ready(
        stack="dev",
        seconds=61.4,
        kubeconfig=Path("/k/kubeconfig"),
        tool_dirs=(Path("/bin/a"), Path("/bin/b")),
        local_queues=("tpu-training/training",),
        tiers=("training-high", "training-low"),
        logs=Path("/k/logs"),
    )
    text = ready_message(ready)
    assert "stack dev is up on 127.0.0.1 after 61 s" in text
    assert "    export KUBECONFIG=/k/kubeconfig" in text.splitlines()
    assert '    export PATH="/bin/a:/bin/b:$PATH"' in text.splitlines()
    assert "LocalQueues tpu-training/training; priority tiers training-high, training-low" in text
    assert "created again 90 s later" in text


def test_a_single_host_pool_counts_one_slice_per_host() -> None:
    shape = fake_pools(_config("dev"))[0].shape
    assert FakePool("p", "p", shape, 3).slices == 3


# ---- the walkthrough ---------------------------------------------------------------------------------------------

WALKTHROUGH = PROJECT_ROOT / "docs" / "playground.md"


def test_the_walkthrough_s_links_resolve() -> None:
    for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", WALKTHROUGH.read_text()):
        assert (WALKTHROUGH.parent / target).exists(), target


def test_the_walkthrough_names_the_stacks_the_playground_runs() -> None:
    text = WALKTHROUGH.read_text()
    assert ", ".join(f"`{s}`" for s in playground_stacks(CONFIGS)) in text


def test_the_walkthrough_s_jobsets_go_to_a_queue_and_tiers_the_dev_stack_has(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Every `gke-tpu-jobset ... | kubectl apply -f -` of the page builds a JobSet for the dev stack's LocalQueue and
    one of its tiers, on a topology its pools have."""
    config = _config("dev")
    commands = re.findall(r"gke-tpu-jobset ((?:[^|\\]|\\\n)+)\|\s*kubectl apply -f -", WALKTHROUGH.read_text())
    assert len(commands) == 2
    objects = kubernetes_objects(stack_run("dev").resources)
    queues = {(o["metadata"]["namespace"], o["metadata"]["name"]) for o in objects if o["kind"] == "LocalQueue"}
    assert queues
    for command in commands:
        assert jobset_cli.main(shlex.split(command.replace("\\\n", " "))) == 0
        jobset = yaml.safe_load(capsys.readouterr().out)
        labels = jobset["metadata"]["labels"]
        assert (jobset["metadata"]["namespace"], labels["kueue.x-k8s.io/queue-name"]) in queues
        assert labels["kueue.x-k8s.io/priority-class"] in {t.name for t in config.priorities}
        selector = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["nodeSelector"]
        assert selector[TOPOLOGY_LABEL] in {p.shape.topology for p in fake_pools(config)}
