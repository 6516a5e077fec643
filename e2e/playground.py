"""The playground's decisions, apart from I/O: which stacks it can bring up, the fake TPU v6e nodes a stack's pools
make, what it prints.

The playground (`make cluster STACK=<stack>`, e2e/playground_run.py) is the local control plane with the platform on
it: Kueue and JobSet from their pinned charts, the stack's own objects, the hotswap reconciler, and one fake node per
TPU host the stack's pools would have on GKE, all of them at their full size (a scale-to-zero pool as if scaled up).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from e2e.nodes import SYSTEM_POOL, ZONE, SliceSpec, tpu_nodes
from gke_tpu_priority.components.cluster.node_pools import POOL_GROUP_LABEL, system_node_selector
from gke_tpu_priority.components.config import CapacityMode, PlatformConfig, TpuPoolGroup
from gke_tpu_priority.components.config.tpu import CAPACITY_LABEL, GKE_FLEX_START_LABEL
from gke_tpu_priority.components.tpu_shapes import NODEPOOL_LABEL, SliceShape

JsonObj = dict[str, Any]
PLATFORM_KEY = "gke-tpu-priority:platform"
FLEET_KEY = "gke-tpu-priority:fleet"
DEFAULT_STACK = "dev"
# Kinds whose CRDs GKE itself installs (Managed Service for Prometheus): no local source serves them.
GKE_ONLY_GROUPS = ("monitoring.googleapis.com/",)
# The labels GKE itself puts on the nodes of a pool by capacity mode (the package selects its own CAPACITY_LABEL,
# the JobSet template's no-spot affinity excludes GKE's spot label too).
GKE_CAPACITY_LABELS: dict[CapacityMode, dict[str, str]] = {
    CapacityMode.SPOT: {"cloud.google.com/gke-spot": "true"},
    CapacityMode.FLEX_START: {GKE_FLEX_START_LABEL: "true"},
}


class PlaygroundError(ValueError):
    """Input the playground cannot start with; the message says what is wrong and what is allowed."""


def stack_names(root: Path) -> list[str]:
    """The stacks of a project directory: stacks/Pulumi.<stack>.yaml."""
    return sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in (root / "stacks").glob("Pulumi.*.yaml"))


def playground_stacks(configs: Mapping[str, JsonObj]) -> list[str]:
    """The stacks the playground can bring up: one platform on one cluster (a fleet stack holds several)."""
    return sorted(name for name, config in configs.items() if PLATFORM_KEY in config and FLEET_KEY not in config)


def choose_stack(name: str, configs: Mapping[str, JsonObj]) -> JsonObj:
    """The platform configuration of stack `name`, or a PlaygroundError naming the stacks there are."""
    usable = playground_stacks(configs)
    choices = f"one of: {', '.join(usable)}" if usable else "none found under stacks/"
    if name not in configs:
        raise PlaygroundError(f"STACK={name!r}: no stack file stacks/Pulumi.{name}.yaml; the playground runs {choices}")
    if name not in usable:
        why = "a fleet (several clusters)" if FLEET_KEY in configs[name] else f"a stack without {PLATFORM_KEY}"
        raise PlaygroundError(f"STACK={name!r} is {why}; the playground runs one platform on one cluster: {choices}")
    platform: JsonObj = configs[name][PLATFORM_KEY]
    return platform


# ---- the fake fleet ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FakePool:
    """One GKE node pool of the stack, as fake nodes: a multi-host slice, or a pool of single-host slices."""

    name: str
    group: str
    shape: SliceShape
    hosts: int
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[JsonObj, ...] = ()

    @property
    def slices(self) -> int:
        return 1 if self.shape.multi_host else self.hosts

    def node_names(self) -> list[str]:
        return self.spec().node_names()

    def spec(self) -> SliceSpec:
        return SliceSpec(self.name, self.shape, self.hosts)


def _group_labels(group: TpuPoolGroup) -> dict[str, str]:
    """What the package's node pool puts on every node (components/cluster/node_pools.py) and GKE's own labels."""
    return {
        **group.labels,
        "topology.kubernetes.io/zone": group.zone,
        "topology.kubernetes.io/region": group.zone.rsplit("-", 1)[0],
        POOL_GROUP_LABEL: group.name,
        CAPACITY_LABEL: group.capacity.capacity_class,
        **GKE_CAPACITY_LABELS.get(group.capacity.mode, {}),
    }


def fake_pools(config: PlatformConfig) -> list[FakePool]:
    """Every TPU node pool of the stack at its full size, but queued-provisioning pools: their nodes come only
    through a ProvisioningRequest, which nothing serves locally (GKE's autoscaler does), so they stay empty."""
    pools: list[FakePool] = []
    for group in config.tpu_pools:
        if group.capacity.queued_provisioning:
            continue
        labels = _group_labels(group)
        taints = tuple({"key": t.key, "value": t.value, "effect": _effect(t.effect.value)} for t in group.taints)
        if group.shape.multi_host:
            names = group.node_pool_names()
            pools += [FakePool(name, group.name, group.shape, group.shape.vms, labels, taints) for name in names]
        else:
            pools.append(FakePool(group.name, group.name, group.shape, group.slices, labels, taints))
    return pools


def _effect(gke: str) -> str:
    """GKE's NO_SCHEDULE spelling as Kubernetes' NoSchedule."""
    return "".join(word.capitalize() for word in gke.split("_"))


def skipped_pools(config: PlatformConfig) -> list[str]:
    return [g.name for g in config.tpu_pools if g.capacity.queued_provisioning]


def pool_nodes(pool: FakePool) -> list[JsonObj]:
    """The pool's fake nodes: GKE's TPU labels, taint and capacity (e2e/nodes.py) plus the stack's labels/taints."""
    nodes = tpu_nodes(pool.spec())
    for node in nodes:
        node["metadata"]["labels"].update(pool.labels)
        node["spec"]["taints"] = [*node["spec"]["taints"], *copy.deepcopy(list(pool.taints))]
    return nodes


def tpu_node_objects(pools: Sequence[FakePool]) -> list[JsonObj]:
    return [node for pool in pools for node in pool_nodes(pool)]


def system_node_labels(config: PlatformConfig) -> dict[str, str]:
    """The system node's labels: where the stack pins its controllers and the reconciler."""
    return {
        NODEPOOL_LABEL: SYSTEM_POOL,
        "topology.kubernetes.io/zone": ZONE,
        "topology.kubernetes.io/region": ZONE.rsplit("-", 1)[0],
        **system_node_selector(config),
    }


def fleet_summary(pools: Sequence[FakePool]) -> str:
    """`6 TPU v6e hosts in 3 slices (dev-2x2: 2 x 2x2; dev-4x4: 1 x 4x4)`, by pool group: a group of multi-host
    slices is a node pool per slice, hundreds of them in a large fleet."""
    hosts = sum(p.hosts for p in pools)
    slices = sum(p.slices for p in pools)
    groups: dict[str, list[FakePool]] = {}
    for pool in pools:
        groups.setdefault(pool.group, []).append(pool)
    parts = "; ".join(
        f"{group}: {sum(p.slices for p in members)} x {members[0].shape.topology}" for group, members in groups.items()
    )
    return f"{hosts} TPU v6e hosts in {slices} slices ({parts})"


def served_locally(obj: JsonObj) -> bool:
    return not str(obj.get("apiVersion", "")).startswith(GKE_ONLY_GROUPS)


# ---- the repair of deleted hosts ---------------------------------------------------------------------------------

REPAIR_AFTER_SECONDS = 90.0
"""GKE replaces a deleted or failed TPU host in minutes (up to about ten); the playground re-creates a deleted fake
host after this long. It is past the 40 s kube-controller-manager's pod garbage collector waits before it fails the
pods of a deleted node: a node back sooner would find them still bound to it."""


def due_repairs(
    expected: Sequence[str], present: set[str], missing_since: dict[str, float], now: float, after: float
) -> list[str]:
    """The fake hosts to create again now; `missing_since` (updated in place) remembers when each went missing."""
    for name in list(missing_since):
        if name in present:
            del missing_since[name]
    due = []
    for name in expected:
        if name in present:
            continue
        since = missing_since.setdefault(name, now)
        if now - since >= after:
            due.append(name)
            del missing_since[name]
    return due


# ---- what it prints --------------------------------------------------------------------------------------------


def step_line(index: int, total: int, what: str) -> str:
    return f"playground: [{index}/{total}] {what} ..."


def step_done(seconds: float, detail: str = "") -> str:
    return f" {detail + ', ' if detail else ''}{seconds:.1f} s"


@dataclass(frozen=True)
class Ready:
    """What the user needs once the playground is up."""

    stack: str
    seconds: float
    kubeconfig: Path
    tool_dirs: tuple[Path, ...]
    """Directories holding kubectl and the package's commands (kubectl-hotswap, gke-tpu-jobset)."""
    local_queues: tuple[str, ...]
    """namespace/name of each LocalQueue."""
    tiers: tuple[str, ...]
    logs: Path
    repair_after: float = REPAIR_AFTER_SECONDS


def ready_message(ready: Ready) -> str:
    path = ":".join(str(d) for d in ready.tool_dirs)
    queues = ", ".join(ready.local_queues) or "none"
    return "\n".join(
        (
            f"playground: stack {ready.stack} is up on 127.0.0.1 after {ready.seconds:.0f} s. In another shell:",
            "",
            f"    export KUBECONFIG={ready.kubeconfig}",
            f'    export PATH="{path}:$PATH"',
            "    kubectl get nodes,clusterqueues,localqueues -A",
            "",
            f"playground: LocalQueues {queues}; priority tiers {', '.join(ready.tiers)}",
            f"playground: logs of every process in {ready.logs}",
            f"playground: a deleted TPU node is created again {ready.repair_after:.0f} s later, as GKE repairs a host",
            "playground: Ctrl-C stops every process this command started",
        )
    )
