"""A two-rung ClusterQueue for the flavor tests: spot first, then a reservation (ResourceFlavors whose nodeLabels
carry the platform's capacity label), one priority tier and a LocalQueue, each test module in its own namespace.
Admission is by quota alone (no TAS), so no node is needed."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from e2e.apply import apply_all, delete_all
from e2e.conftest import Target
from gke_tpu_priority.components.config.tpu import CAPACITY_LABEL

JsonObj = dict[str, Any]
KUEUE = "kueue.x-k8s.io/v1beta2"
TPU = "google.com/tpu"
QUEUE = "training"


@dataclass(frozen=True)
class SpotLadder:
    """Names of one module's objects, all derived from its namespace."""

    namespace: str

    @property
    def tier(self) -> str:
        return f"{self.namespace}-top"

    @property
    def spot(self) -> str:
        return f"{self.namespace}-spot"

    @property
    def reserved(self) -> str:
        return f"{self.namespace}-reserved"

    def objects(self) -> list[JsonObj]:
        def flavor(name: str, capacity: str) -> JsonObj:
            return {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": name},
                    "spec": {"nodeLabels": {CAPACITY_LABEL: capacity}}}  # fmt: skip

        def quota(name: str) -> JsonObj:
            return {"name": name, "resources": [{"name": TPU, "nominalQuota": "256"}]}

        ns = self.namespace
        return [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
            {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": self.tier},
             "value": 900000, "preemptionPolicy": "Never"},
            {"apiVersion": KUEUE, "kind": "WorkloadPriorityClass", "metadata": {"name": self.tier}, "value": 900000},
            flavor(self.spot, "spot"),
            flavor(self.reserved, "reservation"),
            {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": ns},
             "spec": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
                      "resourceGroups": [{"coveredResources": [TPU],
                                          "flavors": [quota(self.spot), quota(self.reserved)]}]}},
            {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": QUEUE, "namespace": ns},
             "spec": {"clusterQueue": ns}},
        ]  # fmt: skip


@contextmanager
def applied(target: Target, ladder: SpotLadder) -> Iterator[None]:
    """The ladder's objects exist on the real API server for the block, and are gone after it."""
    objects = ladder.objects()
    try:
        assert [o.as_json() for o in apply_all(target.rest, objects) if not o.accepted] == []
        yield
    finally:
        left = delete_all(target.rest, objects)
    assert not left, left
