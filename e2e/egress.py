"""The API server's way out to in-cluster backends: an HTTP CONNECT proxy on a Unix socket.

kube-apiserver dials admission webhooks, CRD conversion webhooks and aggregated APIs at their Service's ClusterIP.
Here no pod network exists and nothing may leave loopback, so the API server's egress selector sends that
"cluster" traffic to this proxy, which connects a Service's ClusterIP and port to the local process that serves it
(on 127.0.0.1) and refuses everything else. The charts' Services and webhook configurations stay as they are.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from pathlib import Path

# (ClusterIP, port) -> local port on 127.0.0.1, or None when nothing local serves it.
Resolver = Callable[[str, int], int | None]


class EgressProxy:
    def __init__(self, socket_path: Path, resolve: Resolver) -> None:
        self.socket_path = socket_path
        self._resolve = resolve
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="egress-proxy", daemon=True)
        self._server: asyncio.AbstractServer | None = None
        self.refused: list[str] = []

    def start(self) -> None:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._listen(), self._loop).result(timeout=10)

    def stop(self) -> None:
        async def close() -> None:
            if self._server is not None:
                self._server.close()
                await self._server.wait_closed()

        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(close(), self._loop).result(timeout=10)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()

    async def _listen(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()
        self._server = await asyncio.start_unix_server(self._handle, path=str(self.socket_path))

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=10)
            method, target, _ = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
            host, _, port_text = target.rpartition(":")
            local = self._resolve(host.strip("[]"), int(port_text)) if method == "CONNECT" else None
            if local is None:
                self.refused.append(target)
                writer.write(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n")
                await writer.drain()
                return
            upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", local)
        except (OSError, ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            writer.close()
            return
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await writer.drain()
        await asyncio.gather(_pipe(reader, upstream_writer), _pipe(upstream_reader, writer))


async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    try:
        while chunk := await source.read(65536):
            sink.write(chunk)
            await sink.drain()
    except (OSError, asyncio.IncompleteReadError):
        pass
    finally:
        with contextlib.suppress(OSError):
            sink.close()
