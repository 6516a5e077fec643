"""Operations HTTP endpoints on one aiohttp app: ``/healthz``, ``/readyz`` and ``/metrics``.

``/healthz`` is liveness and reports only whether the reconcile loop is ticking; it deliberately ignores
API availability, because restarting the pod during a control-plane outage only adds crash loops.
``/readyz`` reports whether every watch cache is synced and healthy (leader and standby alike).
The app listens on the metrics port and the health port (one server, two sockets).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from gke_tpu_priority.hotswap.metrics import Metrics


def make_app(metrics: Metrics, *, alive: Callable[[], bool], ready: Callable[[], bool]) -> web.Application:
    async def healthz(_: web.Request) -> web.Response:
        ok = alive()
        return web.Response(status=200 if ok else 503, text="ok\n" if ok else "reconcile loop stalled\n")

    async def readyz(_: web.Request) -> web.Response:
        ok = ready()
        return web.Response(status=200 if ok else 503, text="ok\n" if ok else "caches not synced\n")

    async def metrics_endpoint(_: web.Request) -> web.Response:
        body = generate_latest(metrics.registry)
        response = web.Response(body=body)
        response.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return response

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics_endpoint)
    return app


class OpsServer:
    """Runs the ops app on the given ports until :meth:`stop`."""

    def __init__(self, app: web.Application, host: str, ports: Iterable[int]) -> None:
        self._runner = web.AppRunner(app, access_log=None)
        self._host = host
        self._ports = sorted(set(ports))
        self.bound: list[int] = []

    async def start(self) -> None:
        await self._runner.setup()
        for port in self._ports:
            site = web.TCPSite(self._runner, self._host, port)
            await site.start()
            sockets = getattr(site._server, "sockets", None) or []
            self.bound.extend(sock.getsockname()[1] for sock in sockets[:1])

    async def stop(self) -> None:
        await self._runner.cleanup()
