"""Edge test fixtures: the real app factory on a loopback TestServer over the session's Redis."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from redis.asyncio import Redis

from edge import Config, create_app

# The test modules import their helpers (edge_helpers.py) from this folder.
sys.path.insert(0, str(Path(__file__).resolve().parent))

# Tests that are not about limits must never meet them.
UNLIMITED = {"read_rate": 100_000.0, "read_burst": 1_000_000, "max_streams_per_client": 100_000}

MakeEdge = Callable[..., Awaitable[TestClient[Any, Any]]]


@pytest.fixture
def edge_config(redis_url: str) -> Config:
    return Config(redis_url=redis_url, redis_connect_attempts=3, **UNLIMITED)  # type: ignore[arg-type]


@pytest.fixture
async def make_edge(edge_config: Config, redis: Redis) -> AsyncIterator[MakeEdge]:
    """Start an edge app with the base config changed by keyword arguments (after FLUSHALL)."""
    clients: list[TestClient[Any, Any]] = []

    async def make(**changes: Any) -> TestClient[Any, Any]:
        app = create_app(dataclasses.replace(edge_config, **changes))
        client: TestClient[Any, Any] = TestClient(TestServer(app, host="127.0.0.1"))
        await client.start_server()
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.close()


@pytest.fixture
async def edge(make_edge: MakeEdge) -> TestClient[Any, Any]:
    return await make_edge()
