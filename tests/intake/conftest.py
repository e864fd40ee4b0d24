"""Intake test fixtures: the real app factory on a loopback TestServer over the session's Redis."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from redis.asyncio import Redis

from intake import Config, create_app
from tests.support.apps import MakeClient, app_clients

# Tests that are not about rate limiting must never meet it.
UNLIMITED = {"rate": 100_000.0, "burst": 1_000_000}


@pytest.fixture
def intake_config(redis_url: str) -> Config:
    return Config(redis_url=redis_url, redis_connect_attempts=3, **UNLIMITED)  # type: ignore[arg-type]


@pytest.fixture
async def make_client(intake_config: Config, redis: Redis) -> AsyncIterator[MakeClient]:
    """Start an intake app with the base config changed by keyword arguments (after FLUSHALL)."""
    async with app_clients(create_app, intake_config) as make:
        yield make


@pytest.fixture
async def client(make_client: MakeClient) -> TestClient[Any, Any]:
    return await make_client()


async def key_names(redis: Redis) -> set[str]:
    return {k.decode() for k in await redis.keys("*")}


async def keys_besides_rate_limits(redis: Redis) -> set[str]:
    return {k for k in await key_names(redis) if not k.startswith("rl/")}
