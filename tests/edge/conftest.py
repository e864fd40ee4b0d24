"""Edge test fixtures: the real app factory on a loopback TestServer over the session's Redis."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from redis.asyncio import Redis

from edge import Config, create_app
from tests.support.apps import MakeClient, app_clients

# Tests that are not about limits must never meet them.
UNLIMITED = {"read_rate": 100_000.0, "read_burst": 1_000_000, "max_streams_per_client": 100_000}


@pytest.fixture
def edge_config(redis_url: str) -> Config:
    return Config(redis_url=redis_url, redis_connect_attempts=3, **UNLIMITED)  # type: ignore[arg-type]


@pytest.fixture
async def make_edge(edge_config: Config, redis: Redis) -> AsyncIterator[MakeClient]:
    """Start an edge app with the base config changed by keyword arguments (after FLUSHALL)."""
    async with app_clients(create_app, edge_config) as make:
        yield make


@pytest.fixture
async def edge(make_edge: MakeClient) -> TestClient[Any, Any]:
    return await make_edge()
