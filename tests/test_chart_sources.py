"""`kueue.chart`/`jobset.chart` and the image repositories: mirrored and air-gapped installs, checked up front."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from gke_tpu_priority.components.config import ConfigError, parse_platform_config
from gke_tpu_priority.components.kueue import chart_location, jobset_values, kueue_values
from testkit.platform import platform, tpu_pool

MIRROR = "mirror.example.com:5000"


def _problems(overrides: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as info:
        parse_platform_config(platform(tpu_pool(), **overrides))
    return str(info.value)


def _chart_dir(root: Path, name: str, version: str) -> Path:
    chart = root / name
    chart.mkdir(parents=True)
    (chart / "Chart.yaml").write_text(yaml.safe_dump({"apiVersion": "v2", "name": name, "version": version}))
    return chart


def _chart_tgz(root: Path, name: str, version: str) -> Path:
    data = yaml.safe_dump({"apiVersion": "v2", "name": name, "version": version}).encode()
    archive = root / f"{name}-{version}.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        info = tarfile.TarInfo(f"{name}/Chart.yaml")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return archive


def test_by_default_both_charts_come_from_the_upstream_registry_at_the_pinned_versions() -> None:
    config = parse_platform_config(platform(tpu_pool()))
    assert chart_location(config.kueue) == ("oci://registry.k8s.io/kueue/charts/kueue", "0.19.2")
    assert chart_location(config.jobset) == ("oci://registry.k8s.io/jobset/charts/jobset", "0.12.0")
    assert kueue_values(config)["controllerManager"]["manager"]["image"]["repository"] == "registry.k8s.io/kueue/kueue"
    assert jobset_values(config)["image"]["repository"] == "registry.k8s.io/jobset/jobset"


def test_a_mirror_gives_its_oci_references_and_image_repositories() -> None:
    config = parse_platform_config(
        platform(
            tpu_pool(),
            kueue={"chart": f"oci://{MIRROR}/kueue/charts/kueue", "imageRepository": f"{MIRROR}/kueue/kueue"},
            jobset={"chart": f"oci://{MIRROR}/jobset/charts/jobset", "imageRepository": f"{MIRROR}/jobset/jobset"},
        )
    )  # fmt: skip
    assert chart_location(config.kueue) == (f"oci://{MIRROR}/kueue/charts/kueue", "0.19.2")
    assert kueue_values(config)["controllerManager"]["manager"]["image"] == {
        "repository": f"{MIRROR}/kueue/kueue",
        "tag": "v0.19.2",
        "pullPolicy": "IfNotPresent",
    }
    assert jobset_values(config)["image"]["repository"] == f"{MIRROR}/jobset/jobset"


def test_a_local_chart_directory_or_archive_of_the_pinned_version_is_used_without_a_version(tmp_path: Path) -> None:
    kueue = _chart_dir(tmp_path, "kueue", "0.19.2")
    jobset = _chart_tgz(tmp_path, "jobset", "0.12.0")
    config = parse_platform_config(platform(tpu_pool(), kueue={"chart": str(kueue)}, jobset={"chart": str(jobset)}))
    assert chart_location(config.kueue) == (str(kueue), None)
    assert chart_location(config.jobset) == (str(jobset), None)


def test_a_relative_chart_path_is_read_from_the_project_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _chart_dir(tmp_path / "vendor", "kueue", "0.19.2")
    monkeypatch.chdir(tmp_path)
    config = parse_platform_config(platform(tpu_pool(), kueue={"chart": "vendor/kueue"}))
    assert chart_location(config.kueue) == (str(tmp_path / "vendor" / "kueue"), None)


def test_a_local_chart_of_another_release_is_refused_with_both_ways_out(tmp_path: Path) -> None:
    old = _chart_dir(tmp_path, "kueue", "0.17.0")
    message = _problems({"kueue": {"chart": str(old)}})
    assert "kueue.chart" in message
    assert "kueue chart 0.17.0, but `version` pins 0.19.2" in message
    assert "set `version: 0.17.0`" in message


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"kueue": {"chart": "./no/such/chart"}}, "neither an OCI reference"),
        ({"kueue": {"chart": "oci://registry.k8s.io/kueue/charts/kueue:0.19.2"}}, "no tag: the chart version"),
        ({"jobset": {"chart": "http://mirror.example.com/jobset-0.12.0.tgz"}}, "must be https://"),
        ({"kueue": {"imageRepository": "registry.k8s.io/kueue/kueue:v0.19.2"}}, "carries a tag or digest"),
        ({"jobset": {"imageRepository": "Mirror/JobSet"}}, "not an image repository like `registry.k8s.io/jobset"),
    ],
)  # fmt: skip
def test_bad_chart_and_image_settings_name_the_field_the_value_and_what_is_allowed(
    overrides: dict[str, Any], expected: str
) -> None:
    message = _problems(overrides)
    (section,) = overrides
    (field,) = overrides[section]
    assert f"{section}.{field}" in message
    assert expected in message


def test_a_directory_that_is_another_chart_is_refused(tmp_path: Path) -> None:
    other = _chart_dir(tmp_path, "jobset", "0.19.2")
    assert "is the chart 'jobset', not 'kueue'" in _problems({"kueue": {"chart": str(other)}})


def test_a_directory_without_chart_yaml_is_refused(tmp_path: Path) -> None:
    assert "has no Chart.yaml" in _problems({"kueue": {"chart": str(tmp_path)}})
