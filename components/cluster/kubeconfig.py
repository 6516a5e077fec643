"""A kubeconfig that authenticates with gke-gcloud-auth-plugin (no long-lived token stored in state)."""

from __future__ import annotations

import json

from gke_tpu_priority.components.config.cluster import KubernetesAuth

AUTH_PLUGIN = "gke-gcloud-auth-plugin"
# Without this flag the plugin uses the active gcloud account, which a CI runner with only Application Default
# Credentials (a key file, Workload Identity Federation, the metadata server) does not have.
ADC_FLAG = "--use_application_default_credentials"


def exec_kubeconfig(
    cluster_name: str, server: str, ca_certificate: str | None, auth: KubernetesAuth = KubernetesAuth.ADC
) -> str:
    cluster: dict[str, object] = {"server": server}
    if ca_certificate:
        cluster["certificate-authority-data"] = ca_certificate
    plugin: dict[str, object] = {
        "apiVersion": "client.authentication.k8s.io/v1beta1",
        "command": AUTH_PLUGIN,
        "installHint": (
            "Install gke-gcloud-auth-plugin: `gcloud components install gke-gcloud-auth-plugin` "
            "(https://cloud.google.com/kubernetes-engine/docs/how-to/cluster-access-for-kubectl)"
        ),
        "provideClusterInfo": True,
        "interactiveMode": "Never",
    }
    if auth is KubernetesAuth.ADC:
        plugin["args"] = [ADC_FLAG]
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster_name, "cluster": cluster}],
        "contexts": [{"name": cluster_name, "context": {"cluster": cluster_name, "user": cluster_name}}],
        "current-context": cluster_name,
        "users": [{"name": cluster_name, "user": {"exec": plugin}}],
    }
    return json.dumps(config, indent=2)
