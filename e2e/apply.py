"""Apply objects to a real API server one at a time and record the server's verdict on each.

Server-side apply with strict field validation: a field the server does not know is an error, not a silent drop.
What comes back is compared with what was sent, so a field the server keeps under another value (or drops
despite strict validation, as a pruning CRD schema would) is reported too.
"""

from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from e2e.rest import RestClient
from gke_tpu_priority.policies.rules.base import parse_quantity

JsonObj = dict[str, Any]
FIELD_MANAGER = "gke-tpu-priority-e2e"


def _quantity(value: object) -> Decimal | None:
    if not isinstance(value, str | int | float):
        return None
    try:
        return parse_quantity(value)
    except ValueError:
        return None


def differences(sent: object, stored: object, path: str = "") -> list[str]:
    """Paths where the server's object does not hold what was sent (defaults the server adds are fine)."""
    if isinstance(sent, dict):
        if not isinstance(stored, dict):
            return [f"{path or '.'}: sent an object, the server holds {json.dumps(stored)}"]
        out: list[str] = []
        for key, value in sent.items():
            if key not in stored:
                if value in (None, {}, [], False, 0, ""):
                    continue  # the server omits zero values (omitempty); absent and zero are one value to it
                out.append(f"{path}.{key}: dropped by the server")
            else:
                out += differences(value, stored[key], f"{path}.{key}")
        return out
    if isinstance(sent, list):
        if not isinstance(stored, list) or len(sent) != len(stored):
            return [f"{path}: sent {len(sent)} items, the server holds {json.dumps(stored)[:200]}"]
        return [d for i, (a, b) in enumerate(zip(sent, stored, strict=True)) for d in differences(a, b, f"{path}[{i}]")]
    if sent == stored:
        return []
    quantity = _quantity(sent)
    if quantity is not None and quantity == _quantity(stored):
        return []  # 1000m and 1 are one quantity; the server writes its canonical form
    return [f"{path}: sent {json.dumps(sent)}, the server holds {json.dumps(stored)}"]


def describe(obj: JsonObj) -> str:
    meta = obj.get("metadata", {})
    where = f"{meta['namespace']}/" if meta.get("namespace") else ""
    return f"{obj.get('kind')} {where}{meta.get('name')}"


@dataclass
class ApplyOutcome:
    object: str
    accepted: bool
    error: str = ""
    dropped: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def as_json(self) -> JsonObj:
        out: JsonObj = {"object": self.object, "accepted": self.accepted}
        if self.error:
            out["error"] = self.error
        if self.dropped:
            out["dropped"] = self.dropped
        if self.warnings:
            out["warnings"] = self.warnings
        return out


def _as_stored(client: RestClient, sent: JsonObj) -> JsonObj:
    """What the server is documented to keep of `sent`, for comparison: a Secret's write-only stringData lands in
    data (base64), and a cluster-scoped object has no namespace (Helm renders one on the Kueue chart's webhook
    configurations; the server ignores it, as kubectl and Pulumi do)."""
    meta = dict(sent.get("metadata", {}))
    if "namespace" in meta and not client.resource(sent["apiVersion"], sent["kind"]).namespaced:
        meta.pop("namespace")
        sent = {**sent, "metadata": meta}
    if sent.get("kind") == "Secret" and sent.get("apiVersion") == "v1" and "stringData" in sent:
        encoded = {k: base64.b64encode(str(v).encode()).decode() for k, v in sent["stringData"].items()}
        sent = {k: v for k, v in sent.items() if k != "stringData"}
        sent["data"] = {**sent.get("data", {}), **encoded}
    return sent


def apply_one(client: RestClient, obj: JsonObj, dry_run: bool = False, namespace: str | None = None) -> ApplyOutcome:
    """Server-side apply `obj`; `namespace` is where a namespaced object that names none goes."""
    name = describe(obj)
    try:
        response = client.apply(obj, FIELD_MANAGER, dry_run=dry_run, namespace=namespace)
    except LookupError as err:
        return ApplyOutcome(name, False, error=str(err))
    if not response.ok:
        return ApplyOutcome(name, False, error=f"{response.status}: {response.message}", warnings=response.warnings)
    sent = _as_stored(client, {k: v for k, v in obj.items() if k != "status"})
    if namespace and "namespace" in response.body.get("metadata", {}) and "namespace" not in obj.get("metadata", {}):
        sent = {**sent, "metadata": {**sent["metadata"], "namespace": response.body["metadata"]["namespace"]}}
    return ApplyOutcome(name, True, dropped=differences(sent, response.body), warnings=response.warnings)


def apply_all(
    client: RestClient, objects: list[JsonObj], dry_run: bool = False, namespace: str | None = None
) -> list[ApplyOutcome]:
    return [apply_one(client, obj, dry_run, namespace) for obj in objects]


def delete_all(client: RestClient, objects: list[JsonObj], timeout: float = 120) -> list[str]:
    """Delete in reverse order (what depends on something goes first) and wait until every object is gone;
    returns what could not be deleted."""
    left = []
    for obj in reversed(objects):
        try:
            response = client.delete(obj)
        except LookupError:
            continue  # a kind the server does not serve was never applied
        if not response.ok and response.status != 404:
            left.append(f"{describe(obj)}: {response.status}: {response.message}")
    deadline = time.monotonic() + timeout
    for obj in reversed(objects):
        try:
            client.resource(obj["apiVersion"], obj["kind"])
        except LookupError:
            continue
        while client.get(obj).status != 404:
            if time.monotonic() > deadline:
                left.append(f"{describe(obj)}: still there after {timeout:.0f} s")
                break
            time.sleep(0.2)
    return left
