"""Kubernetes quantities, as the rules read resource requests and quotas: the package's one parser."""

from __future__ import annotations

import pytest

from gke_tpu_priority.policies.rules.base import parse_quantity


def test_quantities_parse_like_kubernetes() -> None:
    assert parse_quantity("500m") == parse_quantity("0.5")
    assert parse_quantity("1Ki") == 1024 and parse_quantity("1e3") == 1000 and parse_quantity(16) == 16
    with pytest.raises(ValueError, match="not a quantity"):
        parse_quantity("lots")
