"""A small synchronous Kubernetes REST client for the suite's bulk work (hundreds of applies and dry runs).

kubectl stays the client for everything an operator would type; this one exists because a process per object
costs half a second on a busy 2-core machine, and because it reports exactly what the server said about each
object: the status code, the Status message, and the `Warning` headers.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import ssl
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import yaml

JsonObj = dict[str, Any]


@dataclass(frozen=True)
class Resource:
    group: str
    version: str
    plural: str
    namespaced: bool

    def path(self, namespace: str | None, name: str | None = None) -> str:
        base = f"/api/{self.version}" if not self.group else f"/apis/{self.group}/{self.version}"
        if self.namespaced:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        return f"{base}/{name}" if name else base


@dataclass
class Response:
    status: int
    body: JsonObj
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def message(self) -> str:
        return str(self.body.get("message", "")) if not self.ok else ""


def _data_or_file(entry: dict[str, Any], key: str, directory: Path) -> str | None:
    if entry.get(f"{key}-data"):
        path = directory / key
        path.write_bytes(base64.b64decode(entry[f"{key}-data"]))
        return str(path)
    value = entry.get(key)
    return str(value) if value else None


class RestClient:
    def __init__(self, kubeconfig: Path, context: str | None = None) -> None:
        config = yaml.safe_load(kubeconfig.read_text())
        context_name = context or config["current-context"]
        ctx = next(c["context"] for c in config["contexts"] if c["name"] == context_name)
        cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == ctx["cluster"])
        user: dict[str, Any] = next((u["user"] for u in config.get("users", []) if u["name"] == ctx.get("user")), {})
        self._files = tempfile.TemporaryDirectory(prefix="e2e-rest-")
        files = Path(self._files.name)
        url = urlsplit(cluster["server"])
        self.host, self.port = url.hostname or "127.0.0.1", url.port or 443
        ca = _data_or_file(cluster, "certificate-authority", files)
        self.context = ssl.create_default_context(cafile=ca)
        cert, key = _data_or_file(user, "client-certificate", files), _data_or_file(user, "client-key", files)
        if cert and key:
            self.context.load_cert_chain(cert, key)
        self.token: str | None = user.get("token")
        if not self.token and "exec" in user:
            self.token = _exec_token(user["exec"])
        self._local = threading.local()
        self._resources: dict[tuple[str, str], Resource] | None = None

    def _connection(self) -> http.client.HTTPSConnection:
        conn: http.client.HTTPSConnection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = http.client.HTTPSConnection(self.host, self.port, context=self.context, timeout=60)
            self._local.conn = conn
        return conn

    def request(
        self,
        method: str,
        path: str,
        body: object = None,
        query: dict[str, str] | None = None,
        content_type: str = "application/json",
    ) -> Response:
        headers = {"Accept": "application/json", "Content-Type": content_type}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        payload = None if body is None else json.dumps(body).encode()
        target = f"{path}?{urlencode(query)}" if query else path
        for attempt in range(2):
            conn = self._connection()
            try:
                conn.request(method, target, body=payload, headers=headers)
                raw = conn.getresponse()
                data = raw.read()
                break
            except (http.client.HTTPException, ConnectionError, ssl.SSLError):
                conn.close()
                self._local.conn = None
                if attempt:
                    raise
        warnings = [w.split('"', 1)[-1].rstrip('"') for w in raw.headers.get_all("Warning") or []]
        try:
            decoded = json.loads(data) if data else {}
        except json.JSONDecodeError:
            decoded = {"message": data.decode(errors="replace")}
        return Response(raw.status, decoded if isinstance(decoded, dict) else {"items": decoded}, warnings)

    # ---- discovery -------------------------------------------------------------------------------------------
    def resource(self, api_version: str, kind: str) -> Resource:
        if self._resources is None or (api_version, kind) not in self._resources:
            self._resources = self._discover()
        try:
            return self._resources[(api_version, kind)]
        except KeyError:
            raise LookupError(f"the server does not serve {kind} in {api_version}") from None

    def _discover(self) -> dict[tuple[str, str], Resource]:
        table: dict[tuple[str, str], Resource] = {}
        group_versions = ["v1"]
        groups = self.request("GET", "/apis").body
        group_versions += [v["groupVersion"] for g in groups.get("groups", []) for v in g["versions"]]
        for gv in group_versions:
            listing = self.request("GET", "/api/v1" if gv == "v1" else f"/apis/{gv}").body
            group, _, version = gv.rpartition("/")
            for res in listing.get("resources", []):
                if "/" in res["name"]:
                    continue
                table[(gv, res["kind"])] = Resource(group, version, res["name"], res["namespaced"])
        return table

    # ---- verbs -----------------------------------------------------------------------------------------------
    def apply(self, obj: JsonObj, field_manager: str, dry_run: bool = False, namespace: str | None = None) -> Response:
        """Server-side apply with strict field validation; a namespaced object without a namespace goes to
        `namespace`, as Helm and Pulumi's Chart place chart templates that name none."""
        res = self.resource(obj["apiVersion"], obj["kind"])
        meta = obj.get("metadata", {})
        ns = meta.get("namespace") or namespace or "default"
        if res.namespaced and not meta.get("namespace"):
            obj = {**obj, "metadata": {**meta, "namespace": ns}}
        query = {"fieldManager": field_manager, "force": "true", "fieldValidation": "Strict"}
        if dry_run:
            query["dryRun"] = "All"
        return self.request(
            "PATCH", res.path(ns, meta["name"]), obj, query, content_type="application/apply-patch+yaml"
        )

    def create(self, obj: JsonObj, dry_run: bool = False) -> Response:
        res = self.resource(obj["apiVersion"], obj["kind"])
        query = {"fieldValidation": "Strict", **({"dryRun": "All"} if dry_run else {})}
        return self.request("POST", res.path(obj["metadata"].get("namespace", "default")), obj, query)

    def delete(self, obj: JsonObj) -> Response:
        res = self.resource(obj["apiVersion"], obj["kind"])
        meta = obj["metadata"]
        return self.request(
            "DELETE", res.path(meta.get("namespace", "default"), meta["name"]), {"propagationPolicy": "Foreground"}
        )

    def get(self, obj: JsonObj) -> Response:
        res = self.resource(obj["apiVersion"], obj["kind"])
        meta = obj["metadata"]
        return self.request("GET", res.path(meta.get("namespace", "default"), meta["name"]))


def _exec_token(spec: dict[str, Any]) -> str | None:
    """A credential plugin's token (gke-gcloud-auth-plugin and the like), as client-go runs it."""
    env = {e["name"]: e["value"] for e in spec.get("env") or []}
    done = subprocess.run(
        [spec["command"], *(spec.get("args") or [])], capture_output=True, text=True, env={**os.environ, **env}
    )
    if done.returncode != 0:
        raise RuntimeError(f"kubeconfig credential plugin {spec['command']} failed: {done.stderr.strip()}")
    token = json.loads(done.stdout).get("status", {}).get("token")
    return str(token) if token else None
