"""The reconciler image: given by the stack, or built from hotswap/Dockerfile into the stack's Artifact Registry."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pulumi
import pulumi_docker_build as docker_build
import pulumi_gcp as gcp

from components.config import PlatformConfig

REPO_ROOT = Path(__file__).resolve().parents[2]
REPOSITORY_ID = "hotswap"
IMAGE_NAME = "hotswap-reconciler"


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
        host, "/", config.project, "/", repository.repository_id, "/", IMAGE_NAME, ":", pulumi.get_stack()
    )
    token = gcp.organizations.get_client_config_output().access_token
    args: dict[str, Any] = {
        "context": {"location": str(REPO_ROOT)},
        "dockerfile": {"location": str(REPO_ROOT / "hotswap" / "Dockerfile")},
        "platforms": ["linux/amd64"],
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
