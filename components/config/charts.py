"""Where the Kueue and JobSet charts and images come from: the upstream registry, a mirror, or a local copy.

Air-gapped and mirrored GKE platforms cannot pull `oci://registry.k8s.io/...`; they give a mirror's OCI reference or
a chart vendored beside the stack (a directory or a packaged `.tgz`). A local chart is checked here, at validation
time, for what would otherwise surface mid-`pulumi up`: that it exists, is a Helm chart of the expected name, and
is the release the stack's `version` pins (the controller image, the CRDs and the restated webhook rules all assume it).
"""

from __future__ import annotations

import re
import tarfile
from dataclasses import dataclass
from pathlib import Path

import yaml

# Helm's OCI references carry no tag here: the chart version is the separate `version` setting.
_OCI = re.compile(r"^oci://[a-z0-9.-]+(:[0-9]+)?(/[a-z0-9._-]+)+$")
_HTTPS_ARCHIVE = re.compile(r"^https://[^\s]+\.tgz$")
# registry host[:port]/path, lower case, without tag or digest (the tag is `v<version>`).
_IMAGE_REPOSITORY = re.compile(r"^[a-z0-9.-]+(:[0-9]+)?(/[a-z0-9._-]+)+$")


@dataclass(frozen=True)
class ChartSource:
    """A validated chart location: remote ones are fetched by Helm at the pinned version, local ones as they are."""

    location: str
    local: bool


def _chart_yaml(path: Path, expected_name: str) -> dict[str, object]:
    if path.is_dir():
        meta = path / "Chart.yaml"
        if not meta.is_file():
            raise ValueError(f"{path} has no Chart.yaml; give the chart's own directory (the one holding Chart.yaml)")
        text = meta.read_text()
    else:
        try:
            with tarfile.open(path, "r:gz") as archive:
                member = archive.extractfile(f"{expected_name}/Chart.yaml")
                text = member.read().decode() if member is not None else ""
        except (tarfile.TarError, KeyError, OSError):
            raise ValueError(
                f"{path} is not a packaged `{expected_name}` chart (no {expected_name}/Chart.yaml inside); "
                "package it with `helm package` or give the unpacked directory"
            ) from None
    loaded = yaml.safe_load(text)
    return loaded if isinstance(loaded, dict) else {}


def chart_source(value: str, chart_name: str, version: str, base: Path | None = None) -> ChartSource:
    """Check one `chart` setting against the pinned `version`; the message says what to change."""
    if value.startswith("oci://"):
        if not _OCI.match(value):
            raise ValueError(
                f"{value!r} is not an OCI chart reference like `oci://mirror.example.com/kueue/charts/{chart_name}` "
                "(lower case, no tag: the chart version is the separate `version` setting)"
            )
        return ChartSource(value, local=False)
    if value.startswith(("https://", "http://")):
        if not _HTTPS_ARCHIVE.match(value):
            raise ValueError(
                f"{value!r}: a chart URL must be https:// and end in .tgz (a packaged chart); for a Helm repository "
                "mirror give its OCI reference (`oci://…`) instead"
            )
        return ChartSource(value, local=False)
    path = Path(value).expanduser()
    resolved = path if path.is_absolute() else (base or Path.cwd()) / path
    if not resolved.exists():
        raise ValueError(
            f"{value!r} is neither an OCI reference (`oci://…`) nor an existing chart directory or .tgz "
            f"(looked for {resolved}; relative paths are read from the Pulumi project directory)"
        )
    meta = _chart_yaml(resolved, chart_name)
    if meta.get("name") != chart_name:
        raise ValueError(f"{value!r} is the chart {meta.get('name')!r}, not {chart_name!r}")
    if str(meta.get("version")) != version:
        raise ValueError(
            f"{value!r} is {chart_name} chart {meta.get('version')}, but `version` pins {version}; point at the "
            f"{version} chart or set `version: {meta.get('version')}` (the controller image follows `version`)"
        )
    return ChartSource(str(resolved), local=True)


def check_image_repository(value: str, default: str) -> str:
    if "@" in value or ":" in value.rsplit("/", 1)[-1]:
        raise ValueError(
            f"{value!r} carries a tag or digest; give the repository only (e.g. `{default}` or your mirror's path): "
            "the tag is `v<version>`"
        )
    if not _IMAGE_REPOSITORY.match(value):
        raise ValueError(
            f"{value!r} is not an image repository like `{default}` (registry host, then a lower-case path)"
        )
    return value
