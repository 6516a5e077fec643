"""The JobSet builder's names: the longest it accepts for each shape and slice count are schema-valid, and one
character more, or a first character JobSet's generated Job names cannot start with, is refused with the field
and the limit. That JobSet's own webhook accepts the longest and refuses one more is e2e/test_jobset_webhook.py."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from gke_tpu_priority.components import tpu_shapes
from testkit.jobsets import longest_generated_pod_name, longest_name, workload
from tests.support.crd_validation import assert_valid


@pytest.mark.parametrize("shape", tpu_shapes.SHAPES, ids=lambda s: s.key)
def test_longest_accepted_names_are_also_schema_valid(shape: tpu_shapes.SliceShape) -> None:
    for slices in (1, 256):
        assert_valid(
            workload(
                name=longest_name(shape, slices), topology=shape.topology, machineType=shape.machine_type, slices=slices
            )
        )


@pytest.mark.parametrize("shape", tpu_shapes.SHAPES, ids=lambda s: s.key)
@pytest.mark.parametrize("slices", (1, 10, 256))
def test_builder_refuses_a_name_one_character_too_long(shape: tpu_shapes.SliceShape, slices: int) -> None:
    name = longest_name(shape, slices) + "b"
    longest = longest_generated_pod_name(name, "slice", slices, shape.vms)
    assert len(longest) == 64
    with pytest.raises(ValidationError) as info:
        workload(name=name, topology=shape.topology, machineType=shape.machine_type, slices=slices)
    message = str(info.value)
    assert "name" in message and repr(name) in message and "64 characters" in message and "at most 63" in message
    assert f"at most {len(name) - 1} characters" in message


def test_builder_refuses_names_the_generated_job_names_cannot_start_with() -> None:
    # A DNS-1123 label, but Jobs named "1train-slice-0" are not DNS-1035 labels.
    with pytest.raises(ValidationError, match=r"name\n.*'1train' is not a DNS-1035 label: .* starting with a letter"):
        workload(name="1train")
