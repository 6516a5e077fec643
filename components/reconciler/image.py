"""The reconciler image: given by the stack, or built from hotswap/Dockerfile into the stack's Artifact Registry."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path
from typing import Any

import pulumi
import pulumi_docker_build as docker_build
import pulumi_gcp as gcp

from gke_tpu_priority.components.config import PlatformConfig

REPO_ROOT = Path(__file__).resolve().parents[2]
REPOSITORY_ID = "hotswap"
IMAGE_NAME = "hotswap-reconciler"
BASE_IMAGE_LOCK = REPO_ROOT / "hotswap" / "base-image.lock"


def image_tag() -> str:
    """The package version (`project.version`): the image, the package and the CHANGELOG name one release."""
    return importlib.metadata.version("gke-tpu-priority")


def base_image() -> str:
    """The base the Dockerfile builds on, as hotswap/base-image.lock records it (the Dockerfile refuses one without
    a digest, with the command that records it)."""
    if not BASE_IMAGE_LOCK.is_file():
        raise ValueError(
            "hotswap.image is unset and this installation has no hotswap/ sources to build the image from; build "
            "and push it from a checkout (docs/operations.md, Building the reconciler image) and set hotswap.image"
        )
    lines = [ln.strip() for ln in BASE_IMAGE_LOCK.read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    return lines[0]


def registry_host(region: str) -> str:
    return f"{region}-docker.pkg.dev"


def build_image(name: str, config: PlatformConfig, parent: pulumi.Resource) -> pulumi.Output[str]:
    """Create the repository, build and push the image; return `repo/image:tag@sha256:…` (pinned by digest)."""
    opts = pulumi.ResourceOptions(parent=parent)
    repository = gcp.artifactregistry.Repository(
        f"{name}-registry",
        project=config.project,
        location=config.region,
        repository_id=REPOSITORY_ID,
        format="DOCKER",
        description="Images of the gke-tpu-priority hotswap reconciler.",
        labels=config.labels,
        opts=opts,
    )
    host = registry_host(config.region)
    tag = pulumi.Output.concat(
        host, "/", config.project, "/", repository.repository_id, "/", IMAGE_NAME, ":", image_tag()
    )
    token = gcp.organizations.get_client_config_output().access_token
    base = base_image()
    if "@sha256:" not in base:
        pulumi.log.warn(
            f"hotswap/base-image.lock names {base} without a digest: `pulumi up` will stop at the image build until "
            "`python -m tools.reconciler_image pin-base` records it (on a machine with Docker)",
            resource=parent,
        )
    args: dict[str, Any] = {
        "context": {"location": str(REPO_ROOT)},
        "dockerfile": {"location": str(REPO_ROOT / "hotswap" / "Dockerfile")},
        "platforms": ["linux/amd64"],
        "build_args": {"PYTHON_IMAGE": base},
        "tags": [tag],
        "push": True,
        # Previews stay fast and work without a Docker daemon; `pulumi up` builds.
        "build_on_preview": False,
        "registries": [{"address": host, "username": "oauth2accesstoken", "password": token}],
    }
    image = docker_build.Image(
        f"{name}-image", opts=pulumi.ResourceOptions(parent=parent, depends_on=[repository]), **args
    )
    ref: pulumi.Output[str] = image.ref
    return ref
