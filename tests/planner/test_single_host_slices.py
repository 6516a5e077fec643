"""A GKE pool of single-host shapes holds one slice per VM; multi-host pools are one slice each."""

from __future__ import annotations

from datetime import timedelta

from hotswap.model import TaintEffect
from hotswap.slices import SliceHealth, classify_slices, slice_key
from tests.planner.builders import T0, NodeBuilder, slice_nodes


def test_single_host_pool_nodes_are_separate_slices() -> None:
    nodes = [NodeBuilder(f"small-{i}").pool("small").tpu("2x2").obj() for i in range(3)]
    assert [slice_key(n) for n in nodes] == ["small/small-0", "small/small-1", "small/small-2"]
    eight = NodeBuilder("wide-0").pool("wide").tpu("2x4", "ct6e-standard-8t").obj()
    assert slice_key(eight) == "wide/wide-0"


def test_multi_host_pool_is_one_slice() -> None:
    nodes = [b.obj() for b in slice_nodes("big", "4x4")]
    assert {slice_key(n) for n in nodes} == {"big"}
    two_vm = [b.obj() for b in slice_nodes("pair", "2x4", "ct6e-standard-4t")]
    assert len(two_vm) == 2 and {slice_key(n) for n in two_vm} == {"pair"}


def test_one_bad_single_host_vm_does_not_take_its_pool_mates_down() -> None:
    bad_since = T0 - timedelta(minutes=5)
    nodes = [NodeBuilder(f"small-{i}").pool("small").tpu("2x2") for i in range(3)]
    nodes[1].unreachable(bad_since)
    slices = classify_slices(
        [n.obj() for n in nodes], T0, timedelta(seconds=20), timedelta(seconds=120), ["google.com/tpu"]
    )
    assert {k: s.health for k, s in slices.items()} == {
        "small/small-0": SliceHealth.HEALTHY,
        "small/small-1": SliceHealth.UNHEALTHY,
        "small/small-2": SliceHealth.HEALTHY,
    }
    assert all(s.expected_hosts == 1 for s in slices.values())


def test_one_bad_host_takes_a_whole_multi_host_slice_down() -> None:
    builders = slice_nodes("big", "4x4")
    builders[2].taint("example.com/broken", TaintEffect.NO_SCHEDULE)
    slices = classify_slices(
        [b.obj() for b in builders], T0, timedelta(seconds=20), timedelta(seconds=120), ["google.com/tpu"]
    )
    assert list(slices) == ["big"] and slices["big"].health is SliceHealth.UNHEALTHY
