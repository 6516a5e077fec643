"""The cache behind one informer: raw API objects in, only what the reconciler reads kept.

A store applies watch events and relists to a dict keyed by ``namespace/name``. With a ``transform`` it keeps
the transform's value instead of the object (client-go's ``SetTransform``): the reconciler converts each Node,
pod, JobSet and Workload to its typed model once, when it changes, and drops the JSON (managedFields, env,
volumes...), so the caches hold a few hundred bytes per object instead of ~10 KB, and a pass assembles its
snapshot from ready values instead of converting every object again. A transform that returns None filters the
object out (e.g. pods that neither belong to a JobSet nor use TPU chips).

Listeners see each change with the cached value (the transformed one when there is a transform); a deletion
passes the object's last state.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

JsonObj = dict[str, Any]
V = TypeVar("V")
# (event type "ADDED" | "MODIFIED" | "DELETED", cached value)
Listener = Callable[[str, Any], None]

log = logging.getLogger(__name__)


def object_key(obj: JsonObj) -> str | None:
    """``namespace/name`` (or ``name`` for cluster-scoped objects); None if the object has no name."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
        return None
    namespace = meta.get("namespace")
    return f"{namespace}/{meta['name']}" if isinstance(namespace, str) and namespace else meta["name"]


class Store(Generic[V]):
    """Keyed cache of one kind: ``items`` maps ``namespace/name`` to the object or its transform."""

    def __init__(self, name: str, transform: Callable[[JsonObj], V | None] | None = None) -> None:
        self.name = name
        self.items: dict[str, Any] = {}
        self.listeners: list[Listener] = []
        self._transform = transform

    def convert(self, obj: JsonObj) -> Any | None:
        """The value to cache for ``obj``; None filters it out. A transform error skips the object (F21)."""
        if self._transform is None:
            return obj
        try:
            return self._transform(obj)
        except Exception:  # never let one odd object stop the reconciler
            log.exception("cannot convert object, ignoring it", extra={"resource": self.name})
            return None

    def apply(self, event_type: str, key: str, obj: JsonObj) -> bool:
        """Apply one watch event; True when the cache changed."""
        if event_type == "DELETED":
            old = self.items.pop(key, None)
            gone = self.convert(obj)
            last = gone if gone is not None else old
            if last is not None:
                self._notify("DELETED", last)
            return old is not None
        value = self.convert(obj)
        if value is None:
            # Filtered out (or unconvertible) now: it no longer counts, but it did not go away either.
            return self.items.pop(key, None) is not None
        self.items[key] = value
        self._notify(event_type, value)
        return True

    def replace(self, fresh: dict[str, Any]) -> None:
        """Swap in a relisted cache (already converted), telling listeners what went, came and changed."""
        old = self.items
        self.items = fresh
        for key, value in old.items():
            if key not in fresh:
                self._notify("DELETED", value)
        for key, value in fresh.items():
            previous = old.get(key)
            if previous is None:
                self._notify("ADDED", value)
            elif previous != value:
                self._notify("MODIFIED", value)

    def clear(self) -> None:
        """Everything went (an optional kind that is not served): each cached value is reported deleted."""
        for value in self.items.values():
            self._notify("DELETED", value)
        self.items = {}

    def values(self) -> Iterable[Any]:
        return self.items.values()

    def _notify(self, event_type: str, value: Any) -> None:
        for listener in self.listeners:
            try:
                listener(event_type, value)
            except Exception:  # a listener bug must not kill the watch
                log.exception("cache listener failed", extra={"resource": self.name})
