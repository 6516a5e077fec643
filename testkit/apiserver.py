"""A small fake Kubernetes API server over real HTTP on 127.0.0.1, for offline tests.

Why it stays beside the real server of `make e2e`: it injects faults on cue (409, 5xx, 410 Gone, delays, per
verb, resource and client identity), which no real API server can be made to do, and it needs no Go build.

Why not kmock: kmock 0.8 has no resourceVersions, ignores label and field
selectors, has no PUT, never answers 409 on a stale resourceVersion, and its watch ignores
``resourceVersion``. Every one of those is load-bearing for a controller that caches with list+watch
and writes with optimistic concurrency, so wrapping kmock would mean re-implementing the storage layer
under it anyway. This module is that storage layer plus a thin aiohttp router, which is simpler and
closer to the real apiserver contract:

* one global resourceVersion counter; every write bumps it and is recorded in a watch history;
* list with label/field selectors and ``limit``/``continue`` paging, returning the list resourceVersion;
* watch from a resourceVersion (replay + live), ``allowWatchBookmarks``, ``timeoutSeconds``, and
  410 Gone (as a watch ERROR event) when the requested version was compacted away;
* get, create (409 AlreadyExists), PUT/replace (409 Conflict on a stale resourceVersion; status is
  preserved because every resource here has a status subresource), merge patch and JSON patch (a
  ``metadata.resourceVersion`` in a merge patch is a precondition, as on the real apiserver), delete,
  and the ``/status`` subresource;
* fault injection (:class:`Fault`): an HTTP status N times (409, 5xx, 403...), delays for timeouts,
  410 on watch, scoped to a verb/resource/name/client identity;
* a request log (:class:`RequestRecord`), where the client identity is the bearer token.

Tests drive the store directly (``put``, ``patch``, ``delete``, ``get``) to play Kueue, the kubelet
or GKE. Not modelled: admission, defaulting, validation, finalizers, strategic-merge list semantics
(strategic merge patches are applied as JSON merge patches).
"""

from __future__ import annotations

import asyncio
import copy
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

JsonObj = dict[str, Any]


@dataclass(frozen=True)
class Resource:
    """One served resource type."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


DEFAULT_RESOURCES: tuple[Resource, ...] = (
    Resource("", "v1", "nodes", "Node", namespaced=False),
    Resource("", "v1", "pods", "Pod", namespaced=True),
    Resource("", "v1", "events", "Event", namespaced=True),
    Resource("", "v1", "namespaces", "Namespace", namespaced=False),
    Resource("events.k8s.io", "v1", "events", "Event", namespaced=True),
    Resource("coordination.k8s.io", "v1", "leases", "Lease", namespaced=True),
    Resource("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet", namespaced=True),
    Resource("kueue.x-k8s.io", "v1beta2", "workloads", "Workload", namespaced=True),
    Resource("kueue.x-k8s.io", "v1beta2", "clusterqueues", "ClusterQueue", namespaced=False),
    Resource("kueue.x-k8s.io", "v1beta2", "resourceflavors", "ResourceFlavor", namespaced=False),
    Resource("kueue.x-k8s.io", "v1beta2", "topologies", "Topology", namespaced=False),
    Resource("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", namespaced=False),
)


@dataclass
class Fault:
    """An injected failure. Matches requests by verb/resource/name/identity; ``None`` matches anything.

    ``status`` answers with that HTTP status (a Kubernetes ``Status`` body); ``delay`` sleeps before
    handling (use it to trigger client timeouts); ``gone`` makes a watch answer a 410 ERROR event.
    ``times`` is how many requests it affects (``None``: until removed).
    """

    verb: str | None = None
    resource: str | None = None
    name: str | None = None
    identity: str | None = None
    status: int | None = None
    delay: float = 0.0
    gone: bool = False
    times: int | None = 1
    hits: int = 0
    headers: dict[str, str] | None = None
    """Response headers of the injected status (e.g. ``Retry-After`` on a 429)."""

    def matches(self, verb: str, resource: str, name: str | None, identity: str) -> bool:
        if self.times is not None and self.hits >= self.times:
            return False
        return (
            (self.verb is None or self.verb == verb)
            and (self.resource is None or self.resource == resource)
            and (self.name is None or self.name == name)
            and (self.identity is None or self.identity == identity)
        )


@dataclass(frozen=True)
class RequestRecord:
    """One request as the fake server saw it."""

    method: str
    verb: str
    resource: str
    namespace: str | None
    name: str | None
    subresource: str | None
    query: dict[str, str]
    body: Any
    status: int
    identity: str
    content_type: str


@dataclass(frozen=True)
class WatchEvent:
    rv: int
    resource: str
    type: str
    obj: JsonObj
    old: JsonObj | None


class ApiError(Exception):
    """Raised inside handlers; turned into a Kubernetes Status response."""

    def __init__(self, code: int, reason: str, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.headers = headers


def status_body(code: int, reason: str, message: str) -> JsonObj:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


_REASONS = {
    400: "BadRequest",
    403: "Forbidden",
    404: "NotFound",
    409: "Conflict",
    410: "Expired",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise ApiError(422, "Invalid", f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _container(doc: Any, parts: list[str]) -> Any:
    for part in parts:
        if isinstance(doc, list):
            doc = doc[int(part)]
        elif isinstance(doc, dict) and part in doc:
            doc = doc[part]
        else:
            raise ApiError(422, "Invalid", f"path segment {part!r} not found")
    return doc


def json_patch(doc: Any, ops: list[JsonObj]) -> Any:
    """RFC 6902 JSON patch (add, remove, replace, test). A failed ``test`` answers 422, like the apiserver."""
    doc = copy.deepcopy(doc)
    for op in ops:
        parts = _pointer(op["path"])
        kind = op["op"]
        if kind == "test":
            try:
                current = _container(doc, parts)
            except (ApiError, IndexError, ValueError):
                current = object()
            if current != op.get("value"):
                raise ApiError(422, "Invalid", f"test operation for path {op['path']} failed")
            continue
        parent = _container(doc, parts[:-1])
        last = parts[-1]
        if kind in ("add", "replace"):
            if isinstance(parent, list):
                index = len(parent) if last == "-" else int(last)
                if kind == "add":
                    parent.insert(index, op["value"])
                else:
                    parent[index] = op["value"]
            else:
                if kind == "replace" and last not in parent:
                    raise ApiError(422, "Invalid", f"replace of missing path {op['path']}")
                parent[last] = op["value"]
        elif kind == "remove":
            try:
                if isinstance(parent, list):
                    parent.pop(int(last))
                else:
                    del parent[last]
            except (KeyError, IndexError) as exc:
                raise ApiError(422, "Invalid", f"remove of missing path {op['path']}") from exc
        else:
            raise ApiError(422, "Invalid", f"unsupported JSON patch op {kind!r}")
    return doc


def _parse_label_selector(selector: str) -> list[Callable[[dict[str, str]], bool]]:
    """Parse the equality- and set-based label selector grammar into predicates."""
    terms: list[str] = []
    depth = 0
    current = ""
    for char in selector:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            terms.append(current.strip())
            current = ""
        else:
            current += char
    if current.strip():
        terms.append(current.strip())

    return [_label_predicate(term) for term in terms]


def _label_predicate(term: str) -> Callable[[dict[str, str]], bool]:
    words = term.split()
    if len(words) >= 3 and words[1] in ("in", "notin"):
        key, negate = words[0], words[1] == "notin"
        values = {v.strip() for v in " ".join(words[2:]).strip("()").split(",")}
        return lambda labels: (labels.get(key) in values) != negate
    if "!=" in term:
        key, value = (part.strip() for part in term.split("!=", 1))
        return lambda labels: labels.get(key) != value
    if "=" in term:
        key, value = (part.strip() for part in term.replace("==", "=").split("=", 1))
        return lambda labels: labels.get(key) == value
    if term.startswith("!"):
        missing = term[1:].strip()
        return lambda labels: missing not in labels
    return lambda labels: term in labels


_FIELD_PATHS = {
    "metadata.name": ("metadata", "name"),
    "metadata.namespace": ("metadata", "namespace"),
    "spec.nodeName": ("spec", "nodeName"),
    "status.phase": ("status", "phase"),
}


def _field_value(obj: JsonObj, path: tuple[str, ...]) -> str:
    value: Any = obj
    for part in path:
        value = value.get(part) if isinstance(value, dict) else None
    return "" if value is None else str(value)


def make_filter(
    namespace: str | None, label_selector: str | None, field_selector: str | None
) -> Callable[[JsonObj], bool]:
    """Build the predicate a list or watch applies to each object."""
    label_predicates = _parse_label_selector(label_selector) if label_selector else []
    field_terms: list[tuple[tuple[str, ...], str, bool]] = []
    for term in (field_selector or "").split(","):
        if not term.strip():
            continue
        negate = "!=" in term
        key, value = term.split("!=" if negate else "=", 1)
        key = key.strip().rstrip("=")
        if key not in _FIELD_PATHS:
            raise ApiError(400, "BadRequest", f'field label not supported: "{key}"')
        field_terms.append((_FIELD_PATHS[key], value.strip().lstrip("="), negate))

    def accept(obj: JsonObj) -> bool:
        meta = obj.get("metadata") or {}
        if namespace is not None and meta.get("namespace") != namespace:
            return False
        labels = meta.get("labels") or {}
        if not all(p(labels) for p in label_predicates):
            return False
        return all((_field_value(obj, path) == value) != negate for path, value, negate in field_terms)

    return accept


@dataclass
class _Route:
    resource: Resource
    namespace: str | None
    name: str | None
    subresource: str | None


class FakeApiServer:
    """In-memory Kubernetes API server on 127.0.0.1. Use as ``async with FakeApiServer() as api:``."""

    def __init__(
        self,
        resources: tuple[Resource, ...] = DEFAULT_RESOURCES,
        bookmark_interval: float = 0.2,
    ) -> None:
        self.resources = resources
        self.bookmark_interval = bookmark_interval
        self.objects: dict[str, dict[tuple[str, str], JsonObj]] = {self._key(r): {} for r in resources}
        self.history: list[WatchEvent] = []
        self.compacted_rv = 0
        self.rv = 1000
        self.faults: list[Fault] = []
        self.requests: list[RequestRecord] = []
        self.write_hooks: list[Callable[[FakeApiServer, str, str, JsonObj], None]] = []
        self._changed = asyncio.Event()
        self._pages: dict[str, tuple[int, list[JsonObj]]] = {}
        self._watch_tasks: set[asyncio.Task[Any]] = set()
        self._kill_watches = 0
        self._runner: web.AppRunner | None = None
        self.url = ""

    # ---- lifecycle -------------------------------------------------------------------------------------

    async def __aenter__(self) -> FakeApiServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, shutdown_timeout=0.5, handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None
        port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
        self.url = f"http://127.0.0.1:{port}"

    async def stop(self) -> None:
        self.kill_watches()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # ---- direct store access for tests --------------------------------------------------------------

    @staticmethod
    def _key(resource: Resource) -> str:
        return f"{resource.plural}.{resource.group}" if resource.group else resource.plural

    def resource(self, key: str) -> Resource:
        """Look up a resource by ``plural`` (core) or ``plural.group``."""
        for res in self.resources:
            if self._key(res) == key:
                return res
        raise KeyError(key)

    def get(self, key: str, name: str, namespace: str = "") -> JsonObj | None:
        obj = self.objects[key].get((namespace, name))
        return copy.deepcopy(obj) if obj is not None else None

    def list_objects(self, key: str) -> list[JsonObj]:
        return [copy.deepcopy(o) for _, o in sorted(self.objects[key].items())]

    def put(self, key: str, obj: JsonObj) -> JsonObj:
        """Create or overwrite an object, bypassing resourceVersion checks (setup, "other controllers")."""
        res = self.resource(key)
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        if not res.namespaced:
            meta.pop("namespace", None)
        ident = (meta.get("namespace", ""), meta["name"])
        old = self.objects[key].get(ident)
        obj.setdefault("apiVersion", res.api_version)
        obj.setdefault("kind", res.kind)
        if old is None:
            meta.setdefault("uid", str(uuid.uuid4()))
            meta.setdefault("creationTimestamp", _now())
        else:
            meta["uid"] = old["metadata"]["uid"]
            meta["creationTimestamp"] = old["metadata"]["creationTimestamp"]
        return self._store(key, obj, old)

    def patch(self, key: str, name: str, patch: JsonObj, namespace: str = "") -> JsonObj:
        """Merge-patch an object directly (spec and status alike)."""
        old = self.objects[key][(namespace, name)]
        new = merge_patch(old, patch)
        new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
        return self._store(key, new, old)

    def delete(self, key: str, name: str, namespace: str = "") -> None:
        old = self.objects[key].pop((namespace, name))
        self.rv += 1
        gone = copy.deepcopy(old)
        gone["metadata"]["resourceVersion"] = str(self.rv)
        self._record(key, "DELETED", gone, old)

    def inject(self, fault: Fault) -> Fault:
        self.faults.append(fault)
        return fault

    def compact(self) -> None:
        """Forget the watch history, so any watch resuming from an older resourceVersion gets 410 Gone."""
        self.compacted_rv = self.rv
        self.history.clear()

    def kill_watches(self) -> None:
        """Drop every open watch connection (a network blip); clients must resume."""
        self._kill_watches += 1
        for task in list(self._watch_tasks):
            task.cancel()

    def requests_for(self, verb: str | None = None, resource: str | None = None) -> list[RequestRecord]:
        return [
            r
            for r in self.requests
            if (verb is None or r.verb == verb) and (resource is None or r.resource == resource)
        ]

    def writes(self, identity: str | None = None) -> list[RequestRecord]:
        """Successful mutating requests, optionally from one client identity."""
        return [
            r
            for r in self.requests
            if r.verb in ("create", "update", "patch", "delete")
            and 200 <= r.status < 300
            and (identity is None or r.identity == identity)
        ]

    # ---- storage internals ------------------------------------------------------------------------

    def _store(self, key: str, obj: JsonObj, old: JsonObj | None) -> JsonObj:
        self.rv += 1
        meta = obj["metadata"]
        meta["resourceVersion"] = str(self.rv)
        if old is None:
            meta["generation"] = 1
        elif obj.get("spec") != old.get("spec"):
            meta["generation"] = int(old["metadata"].get("generation", 1)) + 1
        ident = (meta.get("namespace", ""), meta["name"])
        self.objects[key][ident] = obj
        self._record(key, "ADDED" if old is None else "MODIFIED", obj, old)
        for hook in list(self.write_hooks):
            hook(self, key, "ADDED" if old is None else "MODIFIED", copy.deepcopy(obj))
        return copy.deepcopy(obj)

    def _record(self, key: str, kind: str, obj: JsonObj, old: JsonObj | None) -> None:
        self.history.append(WatchEvent(self.rv, key, kind, copy.deepcopy(obj), old))
        # Wake every watcher waiting on the current generation; later waiters get a fresh event.
        self._changed.set()
        self._changed = asyncio.Event()

    # ---- HTTP ---------------------------------------------------------------------------------------

    def _route(self, path: str) -> _Route:
        parts = [p for p in path.split("/") if p]
        if parts[:2] == ["api", "v1"]:
            group, version, rest = "", "v1", parts[2:]
        elif len(parts) >= 3 and parts[0] == "apis":
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise ApiError(404, "NotFound", f"the server could not find the requested resource {path}")
        namespace: str | None = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        if not rest:
            raise ApiError(404, "NotFound", f"no resource in {path}")
        for res in self.resources:
            if (res.group, res.version, res.plural) == (group, version, rest[0]):
                name = rest[1] if len(rest) > 1 else None
                sub = rest[2] if len(rest) > 2 else None
                return _Route(res, namespace, name, sub)
        raise ApiError(404, "NotFound", f"the server could not find the requested resource {path}")

    @staticmethod
    def _verb(method: str, route: _Route, query: dict[str, str]) -> str:
        if method == "GET":
            if route.name is not None:
                return "get"
            return "watch" if query.get("watch") in ("true", "1", "True") else "list"
        return {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(method, method)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        query = dict(request.query)
        identity = request.headers.get("Authorization", "").removeprefix("Bearer ").strip() or "anonymous"
        content_type = request.headers.get("Content-Type", "")
        body: Any = None
        if request.can_read_body:
            raw = await request.read()
            body = json.loads(raw) if raw else None
        discovery = self._discovery(request.path)
        if discovery is not None:
            return web.json_response(discovery)
        verb, resource, route = "unknown", "", None
        status = 500

        def log_request() -> None:
            self.requests.append(
                RequestRecord(
                    method=request.method,
                    verb=verb,
                    resource=resource,
                    namespace=route.namespace if route else None,
                    name=route.name if route else None,
                    subresource=route.subresource if route else None,
                    query=query,
                    body=body,
                    status=status,
                    identity=identity,
                    content_type=content_type,
                )
            )

        try:
            route = self._route(request.path)
            verb = self._verb(request.method, route, query)
            resource = self._key(route.resource)
            fault = self._match_fault(verb, resource, route.name, identity)
            if fault is not None:
                fault.hits += 1
                if fault.delay:
                    await asyncio.sleep(fault.delay)
                if fault.gone and verb == "watch":
                    status = 200
                    log_request()
                    return await self._gone_watch(request)
                if fault.status is not None:
                    reason = _REASONS.get(fault.status, "Unknown")
                    raise ApiError(fault.status, reason, "injected fault", fault.headers)
            if verb == "watch":
                # Logged when the stream opens: a watch may outlive the test that started it.
                status = 200
                log_request()
                return await self._watch(request, route, query)
            result = self._dispatch(verb, route, query, body, content_type)
            status = 201 if verb == "create" else 200
            log_request()
            return web.json_response(result, status=status)
        except ApiError as err:
            status = err.code
            log_request()
            return web.json_response(
                status_body(err.code, err.reason, err.message), status=err.code, headers=err.headers
            )

    def _match_fault(self, verb: str, resource: str, name: str | None, identity: str) -> Fault | None:
        for fault in self.faults:
            if fault.matches(verb, resource, name, identity):
                return fault
        return None

    def _discovery(self, path: str) -> JsonObj | None:
        if path == "/version":
            return {"major": "1", "minor": "33", "gitVersion": "v1.33.0-fake"}
        if path == "/api":
            return {"kind": "APIVersions", "versions": ["v1"]}
        if path == "/apis":
            groups: dict[str, list[str]] = {}
            for res in self.resources:
                if res.group:
                    groups.setdefault(res.group, []).append(res.version)
            return {
                "kind": "APIGroupList",
                "apiVersion": "v1",
                "groups": [
                    {
                        "name": g,
                        "versions": [{"groupVersion": f"{g}/{v}", "version": v} for v in sorted(set(vs))],
                        "preferredVersion": {"groupVersion": f"{g}/{vs[0]}", "version": vs[0]},
                    }
                    for g, vs in groups.items()
                ],
            }
        for res in self.resources:
            prefix = f"/apis/{res.group}/{res.version}" if res.group else "/api/v1"
            if path == prefix:
                return {
                    "kind": "APIResourceList",
                    "apiVersion": "v1",
                    "groupVersion": res.api_version,
                    "resources": [
                        {
                            "name": r.plural,
                            "singularName": r.kind.lower(),
                            "namespaced": r.namespaced,
                            "kind": r.kind,
                            "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
                        }
                        for r in self.resources
                        if (r.group, r.version) == (res.group, res.version)
                    ],
                }
        return None

    def _dispatch(self, verb: str, route: _Route, query: dict[str, str], body: Any, content_type: str) -> JsonObj:
        key = self._key(route.resource)
        namespace = route.namespace or ""
        if verb == "list":
            return self._list(route, query)
        if verb == "create":
            return self._create(key, route, body)
        assert route.name is not None
        current = self.objects[key].get((namespace, route.name))
        if current is None:
            raise ApiError(404, "NotFound", f'{route.resource.plural} "{route.name}" not found')
        if verb == "get":
            return copy.deepcopy(current)
        if verb == "delete":
            preconditions = (body or {}).get("preconditions") or {}
            if preconditions.get("uid") not in (None, current["metadata"]["uid"]):
                raise ApiError(409, "Conflict", "Precondition failed: UID in precondition mismatch")
            self.delete(key, route.name, namespace)
            return status_body(200, "", "deleted") | {"status": "Success"}
        if verb == "update":
            return self._update(key, route, current, body)
        if verb == "patch":
            return self._patch(key, route, current, body, content_type)
        raise ApiError(405, "MethodNotAllowed", f"verb {verb} not supported")

    def _list(self, route: _Route, query: dict[str, str]) -> JsonObj:
        key = self._key(route.resource)
        token = query.get("continue")
        if token:
            if token not in self._pages:
                raise ApiError(410, "Expired", "the provided continue parameter is too old")
            list_rv, items = self._pages.pop(token)
        else:
            accept = make_filter(route.namespace, query.get("labelSelector"), query.get("fieldSelector"))
            items = [copy.deepcopy(o) for _, o in sorted(self.objects[key].items()) if accept(o)]
            list_rv = self.rv
        limit = int(query.get("limit") or 0)
        meta: JsonObj = {"resourceVersion": str(list_rv)}
        if limit and len(items) > limit:
            next_token = uuid.uuid4().hex
            self._pages[next_token] = (list_rv, items[limit:])
            items = items[:limit]
            meta["continue"] = next_token
        return {
            "kind": f"{route.resource.kind}List",
            "apiVersion": route.resource.api_version,
            "metadata": meta,
            "items": items,
        }

    def _create(self, key: str, route: _Route, body: Any) -> JsonObj:
        if not isinstance(body, dict) or not (body.get("metadata") or {}).get("name"):
            if isinstance(body, dict) and (body.get("metadata") or {}).get("generateName"):
                body["metadata"]["name"] = body["metadata"]["generateName"] + uuid.uuid4().hex[:5]
            else:
                raise ApiError(422, "Invalid", "metadata.name: Required value")
        meta = body["metadata"]
        if route.resource.namespaced:
            meta["namespace"] = route.namespace or meta.get("namespace") or "default"
        if (meta.get("namespace", ""), meta["name"]) in self.objects[key]:
            raise ApiError(409, "AlreadyExists", f'{route.resource.plural} "{meta["name"]}" already exists')
        meta.pop("resourceVersion", None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = _now()
        return self._store(key, body, None)

    def _check_rv(self, route: _Route, current: JsonObj, wanted: Any) -> None:
        if wanted not in (None, "") and str(wanted) != current["metadata"]["resourceVersion"]:
            raise ApiError(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on {route.resource.plural} "{route.name}": the object has '
                "been modified; please apply your changes to the latest version and try again",
            )

    def _update(self, key: str, route: _Route, current: JsonObj, body: Any) -> JsonObj:
        if not isinstance(body, dict):
            raise ApiError(400, "BadRequest", "body must be an object")
        self._check_rv(route, current, (body.get("metadata") or {}).get("resourceVersion"))
        new = copy.deepcopy(body)
        self._keep_identity(new, current)
        if route.subresource == "status":
            new = copy.deepcopy(current) | {"status": new.get("status")}
        else:
            new["status"] = copy.deepcopy(current.get("status"))
            if new["status"] is None:
                new.pop("status")
        return self._store(key, new, current)

    def _patch(self, key: str, route: _Route, current: JsonObj, body: Any, content_type: str) -> JsonObj:
        if content_type.startswith("application/json-patch+json"):
            if not isinstance(body, list):
                raise ApiError(400, "BadRequest", "JSON patch body must be a list")
            new = json_patch(current, body)
        elif content_type.split(";")[0] in (
            "application/merge-patch+json",
            "application/strategic-merge-patch+json",
        ):
            if not isinstance(body, dict):
                raise ApiError(400, "BadRequest", "merge patch body must be an object")
            self._check_rv(route, current, (body.get("metadata") or {}).get("resourceVersion"))
            new = merge_patch(current, body)
        else:
            raise ApiError(415, "UnsupportedMediaType", f"unsupported patch content type {content_type!r}")
        self._check_rv(route, current, new["metadata"].get("resourceVersion"))
        self._keep_identity(new, current)
        if route.subresource == "status":
            new = copy.deepcopy(current) | {"status": new.get("status")}
        elif "status" in current:
            new["status"] = copy.deepcopy(current["status"])
        else:
            new.pop("status", None)
        return self._store(key, new, current)

    @staticmethod
    def _keep_identity(new: JsonObj, current: JsonObj) -> None:
        meta = new.setdefault("metadata", {})
        for field_name in ("uid", "creationTimestamp", "name", "namespace", "generation"):
            if field_name in current["metadata"]:
                meta[field_name] = current["metadata"][field_name]
        meta["resourceVersion"] = current["metadata"]["resourceVersion"]
        new.setdefault("apiVersion", current.get("apiVersion"))
        new.setdefault("kind", current.get("kind"))

    def _pending(self, key: str, position: int) -> bool:
        return any(e.resource == key for e in self.history if e.rv > position)

    async def _gone_watch(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        error = status_body(410, "Expired", "too old resource version")
        await response.write((json.dumps({"type": "ERROR", "object": error}) + "\n").encode())
        await response.write_eof()
        return response

    async def _watch(self, request: web.Request, route: _Route, query: dict[str, str]) -> web.StreamResponse:
        key = self._key(route.resource)
        accept = make_filter(route.namespace, query.get("labelSelector"), query.get("fieldSelector"))
        bookmarks = query.get("allowWatchBookmarks") in ("true", "1", "True")
        timeout = float(query["timeoutSeconds"]) if query.get("timeoutSeconds") else None
        start_rv = query.get("resourceVersion") or ""
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)

        async def send(kind: str, obj: JsonObj) -> None:
            await response.write((json.dumps({"type": kind, "object": obj}) + "\n").encode())

        if start_rv in ("", "0"):
            for obj in [o for _, o in sorted(self.objects[key].items()) if accept(o)]:
                await send("ADDED", copy.deepcopy(obj))
            position = self.rv
        else:
            position = int(start_rv)
            if position < self.compacted_rv:
                await send("ERROR", status_body(410, "Expired", f"too old resource version: {start_rv}"))
                await response.write_eof()
                return response

        task = asyncio.current_task()
        assert task is not None
        self._watch_tasks.add(task)
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            while deadline is None or time.monotonic() < deadline:
                for event in [e for e in self.history if e.rv > position and e.resource == key]:
                    position = event.rv
                    now_match = accept(event.obj)
                    old_match = event.old is not None and accept(event.old)
                    if event.type == "DELETED" and old_match:
                        await send("DELETED", event.obj)
                    elif event.type != "DELETED" and now_match:
                        await send("ADDED" if event.type == "ADDED" or not old_match else "MODIFIED", event.obj)
                    elif event.type == "MODIFIED" and old_match:
                        await send("DELETED", event.obj)
                wait = self.bookmark_interval
                if deadline is not None:
                    wait = min(wait, max(deadline - time.monotonic(), 0.0))
                # Grab the event before checking: a write after the check sets exactly this event.
                changed = self._changed
                try:
                    if not self._pending(key, position):
                        await asyncio.wait_for(changed.wait(), timeout=wait)
                except TimeoutError:
                    if bookmarks and not self._pending(key, position):
                        position = self.rv
                        await send(
                            "BOOKMARK",
                            {
                                "kind": route.resource.kind,
                                "apiVersion": route.resource.api_version,
                                "metadata": {"resourceVersion": str(position)},
                            },
                        )
            await response.write_eof()
        except (asyncio.CancelledError, ConnectionResetError):
            # Killed on purpose or the client went away: just drop the connection.
            if request.transport is not None:
                request.transport.close()
        finally:
            self._watch_tasks.discard(task)
        return response


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
