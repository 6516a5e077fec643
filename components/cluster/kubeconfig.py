"""A kubeconfig that authenticates with gke-gcloud-auth-plugin (no long-lived token stored in state)."""

from __future__ import annotations

import json


def exec_kubeconfig(cluster_name: str, server: str, ca_certificate: str | None) -> str:
    cluster: dict[str, object] = {"server": server}
    if ca_certificate:
        cluster["certificate-authority-data"] = ca_certificate
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster_name, "cluster": cluster}],
        "contexts": [{"name": cluster_name, "context": {"cluster": cluster_name, "user": cluster_name}}],
        "current-context": cluster_name,
        "users": [
            {
                "name": cluster_name,
                "user": {
                    "exec": {
                        "apiVersion": "client.authentication.k8s.io/v1beta1",
                        "command": "gke-gcloud-auth-plugin",
                        "installHint": (
                            "Install gke-gcloud-auth-plugin: `gcloud components install gke-gcloud-auth-plugin` "
                            "(https://cloud.google.com/kubernetes-engine/docs/how-to/cluster-access-for-kubectl)"
                        ),
                        "provideClusterInfo": True,
                        "interactiveMode": "Never",
                    }
                },
            }
        ],
    }
    return json.dumps(config, indent=2)
