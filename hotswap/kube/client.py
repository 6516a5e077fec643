"""Build the Kubernetes API client.

Why ``kubernetes_asyncio``: the reconciler is one asyncio process (watches, the reconcile loop, the
lease and the HTTP server share one event loop), and ``kubernetes_asyncio`` is the maintained asyncio
port of the official generated client. It gives typed models for core kinds (Lease, Event), the
generic ``CustomObjectsApi`` for JobSet/Workload/ClusterQueue, aiohttp transport with per-call
``_request_timeout``, and the same in-cluster service-account and kubeconfig loading (including
exec/GKE auth plugins) as the sync client. Alternatives were weighed: the sync ``kubernetes`` client
would need a thread per watch; ``kr8s``/``lightkube`` are smaller ecosystems with no extra benefit
here; kopf brings its own framework and peering model, which is not leader election.

Two deliberate departures from the convenience layers of that library:

* watches and lists use the generated functions with ``_preload_content=False`` and parse JSON
  in this package (see :mod:`hotswap.kube.informer`), because the bundled ``Watch`` helper deserialises every
  event into typed models, creates its own default-configured ``ApiClient``, retries a 410 with the
  same resourceVersion, and reads lines with aiohttp's ``readline`` which rejects lines above 128 KiB;
* leader election is this package's own (:mod:`hotswap.kube.leader`): the library's ``leaderelection`` package is
  a port of the sync one, whose config validation calls ``sys.exit``.
"""

from __future__ import annotations

from kubernetes_asyncio import client, config

from gke_tpu_priority.hotswap.kube.access import ClusterAccess, choose_access

# Timeouts (seconds) for ordinary, non-streaming calls. Every call passes one of these.
REQUEST_TIMEOUT = 10.0


async def new_api_client(kubeconfig: str | None, context: str | None = None) -> client.ApiClient:
    """Return an ApiClient for the credentials :func:`hotswap.kube.access.choose_access` picks."""
    return await api_client_for(choose_access(kubeconfig, context))


async def api_client_for(access: ClusterAccess) -> client.ApiClient:
    if access.kubeconfig is not None:
        # persist_config=False: a CLI run must not rewrite the operator's kubeconfig.
        return await config.new_client_from_config(
            config_file=access.kubeconfig, context=access.context, persist_config=False
        )
    configuration = client.Configuration()
    config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    return client.ApiClient(configuration)
