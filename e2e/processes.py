"""Local processes the harness starts and, always, stops: each in its own process group, logged to a file."""

from __future__ import annotations

import contextlib
import http.client
import os
import signal
import socket
import ssl
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from e2e.pki import KeyPair


def free_port() -> int:
    """A port on 127.0.0.1 nobody listens on now, so two clusters on one machine never collide."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class Process:
    def __init__(self, name: str, argv: Sequence[str], log_dir: Path, env: dict[str, str] | None = None) -> None:
        self.name = name
        self.argv = list(argv)
        self.log = log_dir / f"{name}.log"
        self.env = env
        self.popen: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as sink:
            self.popen = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env={**os.environ, **(self.env or {})},
            )

    @property
    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def stop(self, grace: float = 15) -> None:
        if self.popen is None or self.popen.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, signal.SIGTERM)
        try:
            self.popen.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(timeout=10)

    def kill(self) -> None:
        """Abrupt end, as a crash or an OOM kill would be."""
        if self.popen is not None and self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(timeout=10)

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return ""


def wait_for(what: str, probe: Callable[[], bool], timeout: float, process: Process | None = None) -> None:
    """Poll `probe` until it holds; fail with the process's last log lines if it died or time ran out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and not process.running:
            raise RuntimeError(f"{process.name} exited while waiting for {what}; its log ends:\n{process.tail()}")
        with contextlib.suppress(OSError, http.client.HTTPException, ssl.SSLError):
            if probe():
                return
        time.sleep(0.25)
    tail = f"; {process.name}'s log ends:\n{process.tail()}" if process else ""
    raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what}{tail}")


def https_ok(port: int, path: str, ca: Path | None, client: KeyPair | None) -> bool:
    context = ssl.create_default_context(cafile=str(ca)) if ca else ssl._create_unverified_context()
    if client:
        context.load_cert_chain(str(client.cert), str(client.key))
    connection = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=5)
    try:
        connection.request("GET", path)
        return connection.getresponse().status == 200
    finally:
        connection.close()


def http_ok(port: int, path: str) -> bool:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        connection.request("GET", path)
        return connection.getresponse().status == 200
    finally:
        connection.close()
