"""Chart values contract: every value a stack passes to the Kueue and JobSet charts is one their templates read,
has the type of the chart's default, and the controller images resolve to the official registry."""

from __future__ import annotations

import functools
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest
import yaml

from gke_tpu_priority.components import kueue as kueue_component
from gke_tpu_priority.components.config import parse_platform_config
from gke_tpu_priority.components.config.fleet import FLEET_CONFIG_PATH
from gke_tpu_priority.components.kueue import CONTROLLERS_PRIORITY_CLASS, jobset_values
from gke_tpu_priority.components.kueue.crds import CRD_TYPE, KeepCrds
from testkit.mock_runtime import load_stack_config, run_program
from testkit.stacks import FLEET_STACKS, STACKS, stack_run
from tests.support import chart_values as cv
from tests.support.upstream_data import JOBSET_CHART, KUEUE_CHART, reference_file, reference_files
from tools.manifests import unwrap_secrets

OFFICIAL_REGISTRY = "registry.k8s.io"
CHARTS = {"jobset": JOBSET_CHART, "kueue": KUEUE_CHART}
CONTROLLER_TEMPLATES = {"jobset": "templates/controller/deployment.yaml", "kueue": "templates/manager/manager.yaml"}
EXPECTED_IMAGES = {"jobset": "registry.k8s.io/jobset/jobset:v0.12.0", "kueue": "registry.k8s.io/kueue/kueue:v0.19.2"}


@functools.cache
def chart_reads(chart: str) -> cv.ChartReads:
    root = CHARTS[chart]
    return cv.scan_templates(reference_file(f"{root}/Chart.yaml").parent, reference_files(f"{root}/templates"))


def stack_values(stack: str, chart: str) -> dict[str, Any]:
    (resource,) = [
        r
        for r in stack_run(stack).resources
        if r.type == "kubernetes:helm.sh/v4:Chart" and r.name.endswith(f"-{chart}")
    ]
    values: dict[str, Any] = unwrap_secrets(resource.inputs["values"])
    return values


@pytest.mark.parametrize("chart", sorted(CHARTS))
@pytest.mark.parametrize("stack", STACKS)
def test_every_value_a_stack_passes_is_read_by_the_chart(stack: str, chart: str) -> None:
    values = stack_values(stack, chart)
    reads = chart_reads(chart)
    assert cv.unread_values(values, reads) == [], f"{chart} chart ignores these values from stack {stack}"
    assert cv.type_mismatches(values, reads) == []


@pytest.mark.parametrize("chart", sorted(CHARTS))
@pytest.mark.parametrize("stack", STACKS)
def test_controller_images_come_from_the_official_registry(stack: str, chart: str) -> None:
    template = reference_file(f"{CHARTS[chart]}/{CONTROLLER_TEMPLATES[chart]}")
    images = cv.rendered_images(template, stack_values(stack, chart), chart_reads(chart))
    assert images == [EXPECTED_IMAGES[chart]]
    assert cv.image_registry(images[0]) == OFFICIAL_REGISTRY


def fleet_chart_values(stack: str) -> dict[str, tuple[str, dict[str, Any]]]:
    """Every Helm chart a fleet stack installs (manager's and each worker's): resource name -> (chart, values)."""
    out: dict[str, tuple[str, dict[str, Any]]] = {}
    for r in stack_run(stack).resources:
        if r.type == "kubernetes:helm.sh/v4:Chart":
            chart = str(r.inputs["chart"]).rsplit("/", 1)[-1]
            out[r.name] = (chart, unwrap_secrets(r.inputs["values"]))
    return out


@pytest.mark.parametrize("stack", FLEET_STACKS)
def test_every_value_a_fleet_passes_to_any_cluster_is_read_by_the_chart(stack: str) -> None:
    charts = fleet_chart_values(stack)
    # The manager's own Kueue and JobSet (components/fleet/manager.py install_kueue), then each worker's.
    assert {f"{stack}-manager-kueue", f"{stack}-manager-jobset"} <= set(charts)
    assert len(charts) == 2 * (1 + len(load_stack_config(stack)[FLEET_CONFIG_PATH]["workers"]))
    for name, (chart, values) in charts.items():
        reads = chart_reads(chart)
        assert cv.unread_values(values, reads) == [], f"{chart} chart ignores these values of {name}"
        assert cv.type_mismatches(values, reads) == [], name
        template = reference_file(f"{CHARTS[chart]}/{CONTROLLER_TEMPLATES[chart]}")
        assert cv.rendered_images(template, values, reads) == [EXPECTED_IMAGES[chart]], name


@pytest.mark.parametrize("stack", FLEET_STACKS)
def test_the_fleet_manager_kueue_values_carry_the_multikueue_configuration(stack: str) -> None:
    _, values = fleet_chart_values(stack)[f"{stack}-manager-kueue"]
    config = yaml.safe_load(values["managerConfig"]["controllerManagerConfigYaml"])
    raw = load_stack_config(stack)[FLEET_CONFIG_PATH]
    assert (
        config["multiKueue"]["dispatcherName"]
        == f"kueue.x-k8s.io/multikueue-dispatcher-{raw['multiKueue']['dispatcher'].lower()}"
    )
    assert config["multiKueue"]["workerLostTimeout"] == raw["multiKueue"]["workerLostTimeout"]
    assert "jobset.x-k8s.io/jobset" in config["integrations"]["frameworks"]
    assert "waitForPodsReady" not in config  # no pod runs on the manager
    # Autopilot has no system pool label to select.
    assert values["controllerManager"]["nodeSelector"] == {}
    _, jobset = fleet_chart_values(stack)[f"{stack}-manager-jobset"]
    assert jobset["controller"]["nodeSelector"] == {}


def test_values_the_jobset_chart_does_not_have_are_caught() -> None:
    """The JobSet values a stack must not pass: `image.registry` is not a value of this chart (the image would be
    Docker Hub's)."""
    old = {
        "image": {"registry": "registry.k8s.io", "repository": "jobset/jobset", "tag": "v0.12.0"},
        "controller": {"nodeSelector": {"a": "b"}},
        "prometheus": {"enable": False},
    }
    reads = chart_reads("jobset")
    assert cv.unread_values(old, reads) == ["image.registry"]
    template = reference_file(f"{JOBSET_CHART}/templates/controller/deployment.yaml")
    (image,) = cv.rendered_images(template, old, reads)
    assert image == "jobset/jobset:v0.12.0" and cv.image_registry(image) == "docker.io"


def test_the_scanner_sees_leaf_and_subtree_reads() -> None:
    jobset, kueue = chart_reads("jobset"), chart_reads("kueue")
    assert ("image", "repository") in jobset.leaf and ("controller", "nodeSelector") in jobset.subtree
    assert ("controllerManager", "manager", "priorityClassName") in kueue.leaf
    assert ("controllerManager", "manager", "resources") in kueue.subtree
    assert kueue.is_read(("controllerManager", "manager", "resources", "limits", "cpu"))
    # A leaf read does not make the keys below it read, and the JobSet chart has no priorityClassName at all.
    assert not kueue.is_read(("controllerManager", "replicas", "max"))
    assert cv.unread_values({"controller": {"priorityClassName": "x"}}, jobset) == ["controller.priorityClassName"]
    assert cv.type_mismatches({"controller": {"replicas": "2"}}, jobset) == [
        "controller.replicas: the stack passes a string, the chart's default is a number"
    ]


# --- the JobSet controller's priority ---------------------------------------------------------------------


def _deployment(type_: str = "kubernetes:apps/v1:Deployment") -> pulumi.ResourceTransformArgs:
    props = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "jobset-controller-manager", "namespace": "jobset-system"},
        "spec": {"template": {"spec": {"containers": [{"name": "controller"}], "nodeSelector": {"a": "b"}}}},
    }
    return pulumi.ResourceTransformArgs(
        custom=True, type_=type_, name="jobset-controller", props=props, opts=pulumi.ResourceOptions()
    )


def test_transform_gives_the_jobset_controller_the_controllers_priority_class() -> None:
    result = kueue_component.jobset_controller_priority(_deployment())
    assert result is not None
    pod = result.props["spec"]["template"]["spec"]
    assert pod["priorityClassName"] == CONTROLLERS_PRIORITY_CLASS
    assert pod["nodeSelector"] == {"a": "b"} and pod["containers"] == [{"name": "controller"}]
    assert kueue_component.jobset_controller_priority(_deployment("kubernetes:core/v1:Service")) is None


def test_the_jobset_chart_carries_the_transform_and_waits_for_the_priority_class(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: dict[str, pulumi.ResourceOptions] = {}
    real_chart = k8s.helm.v4.Chart

    def recording_chart(name: str, *args: Any, **kwargs: Any) -> Any:
        seen[name] = kwargs["opts"]
        return real_chart(name, *args, **kwargs)

    monkeypatch.setattr(kueue_component.k8s.helm.v4, "Chart", recording_chart)
    run = run_program("dev")
    (jobset_name,) = [n for n in seen if n.endswith("-jobset")]
    assert seen[jobset_name].transforms == [kueue_component.jobset_controller_priority, KeepCrds(protect=False)]
    chart = next(r for r in run.resources if r.name == jobset_name)
    priority_class = next(r for r in run.resources if r.name.endswith("-controllers-pc"))
    assert priority_class.urn in chart.dependencies


def test_jobset_values_pin_the_official_image() -> None:
    config = parse_platform_config(load_stack_config("dev")["gke-tpu-priority:platform"])
    assert jobset_values(config)["image"] == {
        "repository": "registry.k8s.io/jobset/jobset",
        "tag": f"v{config.jobset.version}",
        "pullPolicy": "IfNotPresent",
    }


# --- the charts' CRDs outlive the charts ----------------------------------------------------------------


def _crd_args(type_: str = CRD_TYPE) -> pulumi.ResourceTransformArgs:
    props = {"metadata": {"name": "workloads.kueue.x-k8s.io"}, "spec": {"group": "kueue.x-k8s.io"}}
    return pulumi.ResourceTransformArgs(
        custom=True, type_=type_, name="workloads", props=props, opts=pulumi.ResourceOptions(parent=None)
    )


@pytest.mark.parametrize("protect", [False, True])
def test_chart_crds_are_retained_on_delete_and_protected_with_protect(protect: bool) -> None:
    result = KeepCrds(protect)(_crd_args())
    assert result is not None
    # Deleting or replacing a chart must not delete the CRDs, and with them every JobSet and Workload.
    assert result.opts is not None and result.opts.retain_on_delete is True
    assert result.opts.protect is (True if protect else None)
    assert result.props == _crd_args().props
    assert KeepCrds(protect)(_crd_args("kubernetes:apps/v1:Deployment")) is None


@pytest.mark.parametrize(("stack", "protect"), [("dev", False), ("prod", True), ("fleet", False)])
def test_every_chart_keeps_its_crds(stack: str, protect: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, pulumi.ResourceOptions] = {}
    real_chart = k8s.helm.v4.Chart

    def recording_chart(name: str, *args: Any, **kwargs: Any) -> Any:
        seen[name] = kwargs["opts"]
        return real_chart(name, *args, **kwargs)

    monkeypatch.setattr(k8s.helm.v4, "Chart", recording_chart)
    run_program(stack)
    assert len(seen) >= 2
    for name, opts in seen.items():
        assert KeepCrds(protect) in (opts.transforms or []), name
