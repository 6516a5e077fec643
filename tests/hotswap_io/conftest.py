"""Fixtures: a fake API server on 127.0.0.1 and real kubernetes_asyncio clients pointed at it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
import yaml
from kubernetes_asyncio import client

from gke_tpu_priority.hotswap.kube.client import new_api_client
from testkit.apiserver import FakeApiServer

ClientFactory = Callable[[str], Awaitable[client.ApiClient]]


@pytest.fixture
async def api() -> AsyncIterator[FakeApiServer]:
    async with FakeApiServer(bookmark_interval=0.1) as server:
        yield server


def write_kubeconfig(path: Path, url: str, token: str) -> Path:
    """A kubeconfig whose user authenticates with ``token`` (the fake server logs it as the identity)."""
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "fake", "cluster": {"server": url}}],
                "users": [{"name": token, "user": {"token": token}}],
                "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": token}}],
                "current-context": "fake",
            }
        )
    )
    return path


@pytest.fixture
async def make_client(api: FakeApiServer, tmp_path: Path) -> AsyncIterator[ClientFactory]:
    """Build API clients through the real kubeconfig loader, one identity (bearer token) each."""
    made: list[client.ApiClient] = []

    async def factory(identity: str = "replica-a") -> client.ApiClient:
        kubeconfig = write_kubeconfig(tmp_path / f"kubeconfig-{identity}", api.url, identity)
        api_client = await new_api_client(str(kubeconfig))
        made.append(api_client)
        return api_client

    yield factory
    for api_client in made:
        await api_client.close()
