"""Every resource's address (its URN: type token, parent chain and name) in each example stack, as recorded.

A stack's state is keyed by these addresses: one that changes is a delete and a create on the next `pulumi up`, which
for a cluster, a node pool or a queue means a replacement. A change here must be deliberate: rename with Pulumi
aliases so existing stacks keep their resources, then record the new addresses
(`python -m tests.test_state_addresses record`).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from testkit.stacks import ALL_STACKS, stack_run

RECORDED = Path(__file__).parent / "data" / "urns"


def _addresses(stack: str) -> list[str]:
    return sorted(resource.urn for resource in stack_run(stack).resources)


@pytest.mark.parametrize("stack", ALL_STACKS)
def test_every_resource_keeps_its_recorded_address(stack: str) -> None:
    recorded = (RECORDED / f"{stack}.txt").read_text().splitlines()
    current = _addresses(stack)
    assert sorted(set(recorded) - set(current)) == [], "addresses gone: existing stacks would delete these"
    assert sorted(set(current) - set(recorded)) == [], "new addresses: record them if they are meant"


def test_every_example_stack_has_a_record() -> None:
    assert sorted(p.stem for p in RECORDED.glob("*.txt")) == ALL_STACKS


if __name__ == "__main__" and sys.argv[1:] == ["record"]:
    for name in ALL_STACKS:
        (RECORDED / f"{name}.txt").write_text("\n".join(_addresses(name)) + "\n")
        print(f"recorded {RECORDED / f'{name}.txt'}")
