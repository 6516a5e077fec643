"""List-then-watch cache of one resource kind, resilient to disconnects, 410 Gone and API outages.

The protocol is client-go's reflector: list (paged) to get a consistent set and its resourceVersion,
then watch from that version with bookmarks; on a clean end of the stream re-watch from the last seen
version; on 410 Gone (the version was compacted) re-list; on any other failure (5xx, 429, 403,
timeouts, refused connections, malformed responses) wait with jittered exponential backoff and resume.

The cache (:mod:`hotswap.kube.store`) holds, per ``namespace/name``, the raw JSON dict or, given a
``transform``, only what the reconciler reads of it; each page of a list is converted as it arrives, so the raw
objects of a whole list never exist at once. Consumers treat cached values as read-only.

Watches are spread out rather than reconnecting in lockstep: each watch asks for a server timeout drawn between
``watch_timeout_seconds`` and twice that (client-go's 5-10 min), and a 429 or 5xx waits at least the server's
``Retry-After``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from gke_tpu_priority.hotswap.kube.backoff import Backoff
from gke_tpu_priority.hotswap.kube.resources import ResourceKind, list_function
from gke_tpu_priority.hotswap.kube.store import Listener, Store, object_key
from gke_tpu_priority.hotswap.metrics import Metrics

JsonObj = dict[str, Any]

log = logging.getLogger(__name__)

LIST_TIMEOUT = 60.0
# How often to look again for an optional kind the server does not serve or RBAC does not grant.
ABSENT_RETRY = 300.0
PAGE_SIZE = 500


class WatchExpired(Exception):
    """The watch's resourceVersion is gone (HTTP 410): the cache must re-list."""


def _resource_version(obj: JsonObj) -> str | None:
    meta = obj.get("metadata")
    rv = meta.get("resourceVersion") if isinstance(meta, dict) else None
    return rv if isinstance(rv, str) and rv else None


async def _json_lines(response: aiohttp.ClientResponse) -> AsyncIterator[bytes]:
    """Yield newline-delimited lines of any length (aiohttp's readline caps lines at 128 KiB)."""
    buffer = b""
    async for chunk in response.content.iter_any():
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            if line.strip():
                yield line
    if buffer.strip():
        yield buffer


class Informer:
    """Keeps ``cache`` in sync with the API for one kind (optionally one namespace)."""

    def __init__(
        self,
        api: client.ApiClient,
        kind: ResourceKind,
        *,
        namespace: str | None = None,
        on_change: Callable[[str], None] | None = None,
        metrics: Metrics | None = None,
        watch_timeout_seconds: int = 300,
        backoff: Backoff | None = None,
        page_size: int = PAGE_SIZE,
        list_timeout: float = LIST_TIMEOUT,
        transform: Callable[[JsonObj], Any] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.kind = kind
        self.namespace = namespace
        self.store: Store[Any] = Store(f"{kind.name}/{namespace}" if namespace else kind.name, transform)
        self.resource_version: str | None = None
        self.synced = False
        self.healthy = False
        self.relists = 0
        self._rng = rng or random.Random()
        self._list = list_function(api, kind, namespace)
        self._on_change = on_change
        self._metrics = metrics
        self._watch_timeout = watch_timeout_seconds
        self._backoff = backoff or Backoff()
        self._page_size = page_size
        self._list_timeout = list_timeout
        self._synced_event = asyncio.Event()

    @property
    def cache(self) -> dict[str, Any]:
        """``namespace/name`` -> cached value (the raw object, or its transform)."""
        return self.store.items

    @property
    def listeners(self) -> list[Listener]:
        return self.store.listeners

    @property
    def name(self) -> str:
        return f"{self.kind.name}/{self.namespace}" if self.namespace else self.kind.name

    async def wait_synced(self) -> None:
        await self._synced_event.wait()

    async def run(self) -> None:
        """Run until cancelled."""
        need_list = True
        while True:
            try:
                if need_list:
                    await self._relist()
                    need_list = False
                await self._watch_once()
                self._count_restart("end")
            except WatchExpired:
                log.info("watch expired, re-listing", extra={"resource": self.name})
                self._count_restart("relist_410")
                need_list = True
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._set_healthy(False)
                if not isinstance(exc, ApiException | aiohttp.ClientError | TimeoutError | ValueError | OSError):
                    log.exception("unexpected watch failure", extra={"resource": self.name})
                code = getattr(exc, "status", None)
                if self._metrics is not None:
                    self._metrics.api_error("watch" if not need_list else "list", code)
                self._count_restart("error")
                if isinstance(exc, ApiException) and exc.status == 410:
                    need_list = True
                if isinstance(exc, ApiException) and exc.status in (403, 404) and self.kind.optional:
                    self._absent(exc.status)
                    need_list = True
                    await asyncio.sleep(ABSENT_RETRY)
                    continue
                delay = max(self._backoff.next_delay(), retry_after(exc))
                log.warning(
                    "watch failed, retrying",
                    extra={"resource": self.name, "error": _describe(exc), "retry_in_s": round(delay, 3)},
                )
                await asyncio.sleep(delay)

    # ---- list --------------------------------------------------------------------------------------

    async def _relist(self) -> None:
        fresh: dict[str, Any] = {}
        token: str | None = None
        list_rv = ""
        while True:
            kwargs: dict[str, Any] = {"limit": self._page_size, "_request_timeout": self._list_timeout}
            if token:
                kwargs["_continue"] = token
            page = await self._call_json(**kwargs)
            page_items = page.get("items")
            # Converted page by page: only one page of raw objects is alive at a time.
            for item in page_items if isinstance(page_items, list) else []:
                if not isinstance(item, dict):
                    continue
                key = object_key(item)
                if key is None:
                    log.warning("ignoring listed object without a name", extra={"resource": self.name})
                    continue
                value = self.store.convert(item)
                if value is not None:
                    fresh[key] = value
            meta = page.get("metadata")
            meta = meta if isinstance(meta, dict) else {}
            list_rv = str(meta.get("resourceVersion") or list_rv)
            token = meta.get("continue") or None
            del page, page_items
            if not token:
                break
        self.store.replace(fresh)
        self.resource_version = list_rv or None
        self.relists += 1
        self.synced = True
        self._synced_event.set()
        self._set_healthy(True)
        self._backoff.reset()
        self._changed()

    async def _call_json(self, **kwargs: Any) -> JsonObj:
        response = await self._list(label_selector=self.kind.label_selector, _preload_content=False, **kwargs)
        try:
            if response.status >= 300:
                raise api_exception(response.status, (await response.text())[:500], response.headers)
            body = await response.json(content_type=None)
        finally:
            response.release()
        if not isinstance(body, dict):
            raise ValueError(f"list of {self.name} returned {type(body).__name__}, not an object")
        return body

    # ---- watch -------------------------------------------------------------------------------------

    def watch_timeout(self) -> int:
        """This watch's server-side timeout: uniform in [t, 2t] so watches do not all reconnect together."""
        return int(self._rng.uniform(self._watch_timeout, 2 * self._watch_timeout))

    async def _watch_once(self) -> None:
        server_timeout = self.watch_timeout()
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=10, connect=10, sock_read=server_timeout + 30)
        response = await self._list(
            label_selector=self.kind.label_selector,
            watch=True,
            allow_watch_bookmarks=True,
            resource_version=self.resource_version,
            timeout_seconds=server_timeout,
            _preload_content=False,
            _request_timeout=timeout,
        )
        try:
            if response.status == 410:
                raise WatchExpired()
            if response.status >= 300:
                raise api_exception(response.status, (await response.text())[:500], response.headers)
            self._set_healthy(True)
            self._backoff.reset()
            async for line in _json_lines(response):
                self._handle_line(line)
        finally:
            response.release()

    def _handle_line(self, line: bytes) -> None:
        try:
            event = json.loads(line)
        except ValueError:
            log.warning("ignoring undecodable watch line", extra={"resource": self.name})
            return
        if not isinstance(event, dict) or not isinstance(event.get("object"), dict):
            log.warning("ignoring malformed watch event", extra={"resource": self.name})
            return
        kind, obj = event.get("type"), event["object"]
        if kind == "ERROR":
            code = obj.get("code")
            if code == 410:
                raise WatchExpired()
            raise ApiException(status=code if isinstance(code, int) else 500, reason=str(obj.get("message")))
        rv = _resource_version(obj)
        if kind == "BOOKMARK":
            if rv:
                self.resource_version = rv
            return
        key = object_key(obj)
        if key is None or kind not in ("ADDED", "MODIFIED", "DELETED"):
            log.warning(
                "ignoring watch event without object name or with unknown type",
                extra={"resource": self.name, "event_type": str(kind)},
            )
            return
        if rv:
            self.resource_version = rv
        if self.store.apply(kind, key, obj):
            self._changed()

    # ---- plumbing ----------------------------------------------------------------------------------

    def _absent(self, status: int) -> None:
        """An optional kind is not served (404) or not granted (403): an empty, synced cache."""
        log.warning(
            "optional resource unavailable; treating it as empty",
            extra={"resource": self.name, "status": status},
        )
        self.store.clear()
        self.resource_version = None
        self.synced = True
        self._synced_event.set()
        self._set_healthy(True)
        self._changed()

    def _changed(self) -> None:
        if self._on_change is not None:
            self._on_change(self.kind.name)

    def _set_healthy(self, healthy: bool) -> None:
        self.healthy = healthy
        if self._metrics is not None:
            self._metrics.cache_synced.labels(resource=self.name).set(1 if healthy and self.synced else 0)

    def _count_restart(self, cause: str) -> None:
        if self._metrics is not None:
            self._metrics.watch_restarts.labels(resource=self.name, cause=cause).inc()


def api_exception(status: int, reason: str, headers: Any) -> ApiException:
    """An ApiException that keeps the response headers (``Retry-After``)."""
    exc = ApiException(status=status, reason=reason)
    exc.headers = headers
    return exc


def retry_after(exc: BaseException, cap: float = 600.0) -> float:
    """Seconds the server asked the client to wait (``Retry-After`` on a 429 or 5xx, in seconds), else 0."""
    headers = getattr(exc, "headers", None)
    value = headers.get("Retry-After") if headers is not None else None
    try:
        return min(cap, max(0.0, float(value))) if value is not None else 0.0
    except (TypeError, ValueError):
        return 0.0  # an HTTP date: rare from the apiserver (it sends seconds); the backoff applies


def _describe(exc: BaseException) -> str:
    if isinstance(exc, ApiException):
        return f"HTTP {exc.status}: {str(exc.reason)[:200]}"
    return f"{type(exc).__name__}: {exc}"[:300]
