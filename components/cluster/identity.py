"""A least-privilege node service account instead of the Compute Engine default (CIS GKE 5.2.1)."""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

# Roles GKE nodes need to ship logs and metrics and to pull images (GKE hardening guide).
NODE_ROLES = (
    "roles/logging.logWriter",
    "roles/monitoring.metricWriter",
    "roles/monitoring.viewer",
    "roles/stackdriver.resourceMetadata.writer",
    "roles/artifactregistry.reader",
)


def build_node_service_account(
    name: str, project: str, account_id: str, parent: pulumi.Resource
) -> tuple[gcp.serviceaccount.Account, list[gcp.projects.IAMMember]]:
    opts = pulumi.ResourceOptions(parent=parent)
    account = gcp.serviceaccount.Account(
        f"{name}-nodes-sa",
        account_id=account_id,
        project=project,
        display_name="GKE TPU platform nodes (least privilege)",
        opts=opts,
    )
    members = [
        gcp.projects.IAMMember(
            f"{name}-nodes-{role.split('/')[-1].replace('.', '-').lower()}",
            project=project,
            role=role,
            member=account.email.apply(lambda email: f"serviceAccount:{email}"),
            opts=opts,
        )
        for role in NODE_ROLES
    ]
    return account, members
