"""Intake test fixtures: the real app factory on a loopback TestServer over the session's Redis."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from redis.asyncio import Redis

from intake import Config, create_app

# Tests that are not about rate limiting must never meet it.
UNLIMITED = {"rate": 100_000.0, "burst": 1_000_000}

MakeClient = Callable[..., Awaitable[TestClient[Any, Any]]]


@pytest.fixture
def intake_config(redis_url: str) -> Config:
    return Config(redis_url=redis_url, redis_connect_attempts=3, **UNLIMITED)  # type: ignore[arg-type]


@pytest.fixture
async def make_client(intake_config: Config, redis: Redis) -> AsyncIterator[MakeClient]:
    """Start an intake app with the base config changed by keyword arguments (after FLUSHALL)."""
    clients: list[TestClient[Any, Any]] = []

    async def make(**changes: Any) -> TestClient[Any, Any]:
        app = create_app(dataclasses.replace(intake_config, **changes))
        client: TestClient[Any, Any] = TestClient(TestServer(app, host="127.0.0.1"))
        await client.start_server()
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.close()


@pytest.fixture
async def client(make_client: MakeClient) -> TestClient[Any, Any]:
    return await make_client()


async def key_names(redis: Redis) -> set[str]:
    return {k.decode() for k in await redis.keys("*")}


async def keys_besides_rate_limits(redis: Redis) -> set[str]:
    return {k for k in await key_names(redis) if not k.startswith("rl/")}
