"""Private clusters: the control plane reaches the Kueue/JobSet webhooks and Kueue's visibility API.

GKE lets the control plane reach private nodes only on 443 and 10250; the webhooks (fail-closed) and the aggregated
visibility API listen elsewhere. The package opens exactly their ports, read here from the pinned charts' Services
and containers and from the manager configuration the package generates, so a chart that moves a port fails a test.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from gke_tpu_priority.components.cluster.firewall import webhook_ports
from gke_tpu_priority.components.config import parse_platform_config
from gke_tpu_priority.components.kueue import jobset_values, kueue_values
from gke_tpu_priority.components.kueue.manager_config import kueue_manager_config
from testkit.mock_runtime import load_stack_config, run_program
from testkit.platform import platform, stack_config
from testkit.resources import ProgramRun, RegisteredResource
from testkit.stacks import CREATED_CLUSTER_STACKS, STACKS, stack_run
from tests.support.upstream_data import JOBSET_CHART, KUEUE_CHART, reference_text

FIREWALL = "gcp:compute/firewall:Firewall"
NODE_POOL = "gcp:container/nodePool:NodePool"


def _container_ports(template: str) -> dict[str, int]:
    """Named containerPorts of a chart's controller template (`- containerPort: N` / `name: x`, either order)."""
    ports: dict[str, int] = {}
    for block in re.split(r"\n\s*- ", template):
        number = re.search(r"containerPort:\s*(\d+)", block)
        name = re.search(r"\bname:\s*([\w-]+)", block)
        if number and name:
            ports[name.group(1)] = int(number.group(1))
    return ports


def chart_webhook_ports() -> dict[str, int]:
    """The ports the pinned charts' webhook and visibility Services send to, resolved to numbers."""
    kueue_defaults = yaml.safe_load(reference_text(f"{KUEUE_CHART}/values.yaml"))
    (kueue_webhook,) = {int(p["targetPort"]) for p in kueue_defaults["webhookService"]["ports"]}
    visibility = reference_text(f"{KUEUE_CHART}/templates/visibility/service.yaml")
    (kueue_visibility,) = {int(p) for p in re.findall(r"targetPort:\s*(\d+)", visibility)}
    kueue_containers = _container_ports(reference_text(f"{KUEUE_CHART}/templates/manager/manager.yaml"))
    # The Services' target ports are ports the manager container actually exposes.
    assert kueue_containers["webhook-server"] == kueue_webhook
    assert kueue_containers["visibility"] == kueue_visibility
    jobset_service = reference_text(f"{JOBSET_CHART}/templates/webhook/service.yaml")
    (target,) = re.findall(r"targetPort:\s*([\w-]+)", jobset_service)
    jobset_containers = _container_ports(reference_text(f"{JOBSET_CHART}/templates/controller/deployment.yaml"))
    jobset_webhook = int(target) if target.isdigit() else jobset_containers[target]
    return {"kueue-webhook": kueue_webhook, "kueue-visibility": kueue_visibility, "jobset-webhook": jobset_webhook}


def _platform(stack: str) -> Any:
    return parse_platform_config(load_stack_config(stack)["gke-tpu-priority:platform"])


@pytest.mark.parametrize("stack", STACKS)
def test_the_webhook_ports_are_the_ones_the_pinned_charts_and_the_manager_config_use(stack: str) -> None:
    config = _platform(stack)
    charts = chart_webhook_ports()
    # The manager listens where the chart's Service sends: the package's Configuration replaces the chart's.
    assert kueue_manager_config(config)["webhook"]["port"] == charts["kueue-webhook"]
    # No value the package passes moves a Service or the JobSet container.
    assert "webhookService" not in kueue_values(config) and "hostNetwork" not in jobset_values(config)["controller"]
    assert webhook_ports(config) == sorted(set(charts.values()))


def firewalls(run: ProgramRun) -> list[RegisteredResource]:
    return [r for r in run.resources if r.type == FIREWALL]


def _check_exact_rule(run: ProgramRun, sources: list[str]) -> None:
    (rule,) = firewalls(run)
    inputs = rule.inputs
    ports = sorted(set(chart_webhook_ports().values()))
    assert inputs["allows"] == [{"protocol": "tcp", "ports": [str(p) for p in ports]}]
    assert inputs["direction"] == "INGRESS"
    assert inputs["sourceRanges"] == sources
    pools = [r for r in run.resources if r.type == NODE_POOL]
    (system,) = [p for p in pools if p.inputs["name"] == "system"]
    # Only the system nodes (which run the controllers) are opened; TPU nodes carry no such tag.
    assert inputs["targetTags"] == system.inputs["nodeConfig"]["tags"]
    for pool in pools:
        if pool is not system:
            assert not set(inputs["targetTags"]) & set(pool.inputs["nodeConfig"].get("tags", []))


def test_a_private_prod_stack_opens_exactly_the_chart_webhook_ports_from_the_control_plane() -> None:
    config = _platform("prod")
    assert config.cluster.private_nodes
    _check_exact_rule(stack_run("prod"), [config.cluster.master_ipv4_cidr_block])


@pytest.mark.parametrize("stack", CREATED_CLUSTER_STACKS)
def test_every_created_cluster_has_the_webhook_rule(stack: str) -> None:
    assert len(firewalls(stack_run(stack))) == 1


@pytest.mark.parametrize(
    ("access", "network", "sources"),
    [
        ("public", {}, ["172.16.0.0/28"]),
        ("private", {}, ["172.16.0.0/28"]),
        # Private Service Connect: the control plane's endpoint takes an address from the node subnet.
        ("dns", {}, ["10.10.0.0/20"]),
        ("dns", {"mode": "existing", "name": "shared", "subnetwork": "shared-east5"}, ["10.128.0.0/20"]),
    ],
)
def test_every_control_plane_access_mode_reaches_the_webhooks(
    access: str, network: dict[str, Any], sources: list[str]
) -> None:
    cluster: dict[str, Any] = {"controlPlaneAccess": access}
    if access != "dns":
        cluster["authorizedNetworks"] = [{"cidrBlock": "203.0.113.0/24"}]
    overrides: dict[str, Any] = {"cluster": cluster}
    if network:
        overrides["network"] = network
    _check_exact_rule(run_program(f"fw-{access}", stack_config(platform(**overrides))), sources)


def test_an_existing_cluster_gets_no_firewall_rule() -> None:
    # The package does not own that cluster's network; README lists the ports its owner must open.
    existing = [s for s in STACKS if s not in CREATED_CLUSTER_STACKS]
    assert existing
    for stack in existing:
        assert firewalls(stack_run(stack)) == []
