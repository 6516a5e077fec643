import pytest

from gke_tpu_priority.components import tpu_shapes

# The v6e table from GKE's TPU docs: topology, chips, VMs, machine type.
EXPECTED = [
    ("1x1", 1, 1, "ct6e-standard-1t"),
    ("2x2", 4, 1, "ct6e-standard-4t"),
    ("2x4", 8, 1, "ct6e-standard-8t"),
    ("2x4", 8, 2, "ct6e-standard-4t"),
    ("4x4", 16, 4, "ct6e-standard-4t"),
    ("4x8", 32, 8, "ct6e-standard-4t"),
    ("8x8", 64, 16, "ct6e-standard-4t"),
    ("8x16", 128, 32, "ct6e-standard-4t"),
    ("16x16", 256, 64, "ct6e-standard-4t"),
]


def test_table_is_complete_and_exact() -> None:
    assert [(s.topology, s.chips, s.vms, s.machine_type) for s in tpu_shapes.SHAPES] == EXPECTED


@pytest.mark.parametrize(("topology", "chips", "vms", "machine"), EXPECTED)
def test_chips_equal_vms_times_chips_per_vm(topology: str, chips: int, vms: int, machine: str) -> None:
    shape = tpu_shapes.resolve_shape(topology, machine)
    assert shape.vms * shape.chips_per_vm == chips
    a, b = (int(x) for x in topology.split("x"))
    assert a * b == chips
    assert shape.multi_host == (vms > 1)


def test_2x4_needs_an_explicit_machine_type() -> None:
    with pytest.raises(ValueError, match="needs an explicit machineType"):
        tpu_shapes.resolve_shape("2x4", None)
    assert tpu_shapes.resolve_shape("2x4", "ct6e-standard-8t").vms == 1
    assert tpu_shapes.resolve_shape("2x4", "ct6e-standard-4t").vms == 2


def test_default_machine_type_for_unambiguous_topologies() -> None:
    assert tpu_shapes.resolve_shape("8x8", None).machine_type == "ct6e-standard-4t"
    assert tpu_shapes.resolve_shape("1x1", None).machine_type == "ct6e-standard-1t"


@pytest.mark.parametrize(
    ("topology", "machine", "message"),
    [
        ("3x3", None, "not a TPU v6e topology"),
        ("4x4", "ct6e-standard-8t", "does not fit topology '4x4'; allowed: ct6e-standard-4t"),
        ("1x1", "ct6e-standard-4t", "allowed: ct6e-standard-1t"),
    ],
)
def test_bad_shapes_say_what_is_allowed(topology: str, machine: str | None, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        tpu_shapes.resolve_shape(topology, machine)


def test_shape_keys_are_unique() -> None:
    keys = [s.key for s in tpu_shapes.SHAPES]
    assert len(keys) == len(set(keys))
    assert "2x4-8t" in keys and "2x4-4t" in keys and "4x4" in keys
