"""A least-privilege node service account instead of the Compute Engine default (CIS GKE 5.2.1)."""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

# GKE documents roles/container.defaultNodeServiceAccount as the minimum for a custom node service account (logs,
# metrics, autoscaling metadata; "Configure GKE node service accounts", CIS GKE 2.0 5.2.1). Artifact Registry
# reader lets nodes pull the reconciler image the stack pushes to its own repository.
NODE_ROLES = (
    "roles/container.defaultNodeServiceAccount",
    "roles/artifactregistry.reader",
)


def build_node_service_account(
    name: str, project: pulumi.Input[str], account_id: str, parent: pulumi.Resource
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
