"""List-then-watch cache of one resource kind, resilient to disconnects, 410 Gone and API outages.

The protocol is client-go's reflector: list (paged) to get a consistent set and its resourceVersion,
then watch from that version with bookmarks; on a clean end of the stream re-watch from the last seen
version; on 410 Gone (the version was compacted) re-list; on any other failure (5xx, 429, 403,
timeouts, refused connections, malformed responses) wait with jittered exponential backoff and resume.

The cache holds raw JSON dicts (the API's own shape) keyed by ``namespace/name``; consumers treat them as
read-only. Raw dicts rather than typed models: converting thousands of pods per event into generated
models is slow, and the snapshot layer must tolerate malformed objects anyway.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from hotswap.kube.backoff import Backoff
from hotswap.kube.resources import ResourceKind, list_function
from hotswap.metrics import Metrics

JsonObj = dict[str, Any]
# (event type "ADDED" | "MODIFIED" | "DELETED", new or last-known object)
Listener = Callable[[str, JsonObj], None]

log = logging.getLogger(__name__)

LIST_TIMEOUT = 60.0
# How often to look again for an optional kind the server does not serve or RBAC does not grant.
ABSENT_RETRY = 300.0
PAGE_SIZE = 500


class WatchExpired(Exception):
    """The watch's resourceVersion is gone (HTTP 410): the cache must re-list."""


def object_key(obj: JsonObj) -> str | None:
    """``namespace/name`` (or ``name`` for cluster-scoped objects); None if the object has no name."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
        return None
    namespace = meta.get("namespace")
    return f"{namespace}/{meta['name']}" if isinstance(namespace, str) and namespace else meta["name"]


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
    ) -> None:
        self.kind = kind
        self.namespace = namespace
        self.cache: dict[str, JsonObj] = {}
        self.resource_version: str | None = None
        self.synced = False
        self.healthy = False
        self.relists = 0
        self.listeners: list[Listener] = []
        self._list = list_function(api, kind, namespace)
        self._on_change = on_change
        self._metrics = metrics
        self._watch_timeout = watch_timeout_seconds
        self._backoff = backoff or Backoff()
        self._page_size = page_size
        self._list_timeout = list_timeout
        self._synced_event = asyncio.Event()

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
                delay = self._backoff.next_delay()
                log.warning(
                    "watch failed, retrying",
                    extra={"resource": self.name, "error": _describe(exc), "retry_in_s": round(delay, 3)},
                )
                await asyncio.sleep(delay)

    # ---- list --------------------------------------------------------------------------------------

    async def _relist(self) -> None:
        items: list[JsonObj] = []
        token: str | None = None
        list_rv = ""
        while True:
            kwargs: dict[str, Any] = {"limit": self._page_size, "_request_timeout": self._list_timeout}
            if token:
                kwargs["_continue"] = token
            page = await self._call_json(**kwargs)
            page_items = page.get("items")
            items.extend(i for i in (page_items if isinstance(page_items, list) else []) if isinstance(i, dict))
            meta = page.get("metadata")
            meta = meta if isinstance(meta, dict) else {}
            list_rv = str(meta.get("resourceVersion") or list_rv)
            token = meta.get("continue") or None
            if not token:
                break
        fresh: dict[str, JsonObj] = {}
        for item in items:
            key = object_key(item)
            if key is None:
                log.warning("ignoring listed object without a name", extra={"resource": self.name})
                continue
            fresh[key] = item
        old = self.cache
        self.cache = fresh
        self.resource_version = list_rv or None
        self.relists += 1
        for key, obj in old.items():
            if key not in fresh:
                self._notify("DELETED", obj)
        for key, obj in fresh.items():
            previous = old.get(key)
            if previous is None:
                self._notify("ADDED", obj)
            elif _resource_version(previous) != _resource_version(obj):
                self._notify("MODIFIED", obj)
        self.synced = True
        self._synced_event.set()
        self._set_healthy(True)
        self._backoff.reset()
        self._changed()

    async def _call_json(self, **kwargs: Any) -> JsonObj:
        response = await self._list(label_selector=self.kind.label_selector, _preload_content=False, **kwargs)
        try:
            if response.status >= 300:
                raise ApiException(status=response.status, reason=(await response.text())[:500])
            body = await response.json(content_type=None)
        finally:
            response.release()
        if not isinstance(body, dict):
            raise ValueError(f"list of {self.name} returned {type(body).__name__}, not an object")
        return body

    # ---- watch -------------------------------------------------------------------------------------

    async def _watch_once(self) -> None:
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=10, connect=10, sock_read=self._watch_timeout + 30)
        response = await self._list(
            label_selector=self.kind.label_selector,
            watch=True,
            allow_watch_bookmarks=True,
            resource_version=self.resource_version,
            timeout_seconds=self._watch_timeout,
            _preload_content=False,
            _request_timeout=timeout,
        )
        try:
            if response.status == 410:
                raise WatchExpired()
            if response.status >= 300:
                raise ApiException(status=response.status, reason=(await response.text())[:500])
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
        if kind == "DELETED":
            self.cache.pop(key, None)
            self._notify("DELETED", obj)
        else:
            self.cache[key] = obj
            self._notify(kind, obj)
        self._changed()

    # ---- plumbing ----------------------------------------------------------------------------------

    def _absent(self, status: int) -> None:
        """An optional kind is not served (404) or not granted (403): an empty, synced cache."""
        log.warning(
            "optional resource unavailable; treating it as empty",
            extra={"resource": self.name, "status": status},
        )
        for obj in self.cache.values():
            self._notify("DELETED", obj)
        self.cache = {}
        self.resource_version = None
        self.synced = True
        self._synced_event.set()
        self._set_healthy(True)
        self._changed()

    def _notify(self, kind: str, obj: JsonObj) -> None:
        for listener in self.listeners:
            try:
                listener(kind, obj)
            except Exception:  # a listener bug must not kill the watch
                log.exception("cache listener failed", extra={"resource": self.name})

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


def _describe(exc: BaseException) -> str:
    if isinstance(exc, ApiException):
        return f"HTTP {exc.status}: {str(exc.reason)[:200]}"
    return f"{type(exc).__name__}: {exc}"[:300]
