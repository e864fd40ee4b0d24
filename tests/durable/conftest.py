"""Durable streams fixtures: intake and edge through their real app factories behind the real
front proxy (one origin, as ``streamtts up`` serves it), over the session's Redis. No model:
the general ``/v1/stream`` namespace needs none."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from aiohttp.test_utils import TestServer
from redis.asyncio import Redis

import edge
import intake
from streamtts.proxy import Upstreams, create_app
from tests.support.proxylimits import proxy_limits

# The suite waits out some long-polls: a short one keeps it quick (the default is 15 s).
LONG_POLL_S = 3.0
# One client (the suite) making hundreds of requests a second: no read limits in its way.
UNLIMITED = {"read_rate": 100_000.0, "read_burst": 1_000_000, "max_streams_per_client": 100_000}

Origin = Callable[..., Any]


@asynccontextmanager
async def serving_origin(redis: Redis, redis_url: str, *, edge_changes: dict[str, Any] | None = None,
                         intake_changes: dict[str, Any] | None = None) -> AsyncIterator[str]:
    """The base URL of intake + edge behind the proxy."""
    edge_cfg = edge.Config(redis_url=redis_url, redis_connect_attempts=3, ds_long_poll_s=LONG_POLL_S,
                           **{**UNLIMITED, **(edge_changes or {})})
    intake_cfg = intake.Config(redis_url=redis_url, redis_connect_attempts=3, **(intake_changes or {}))
    servers = [TestServer(intake.create_app(intake_cfg), host="127.0.0.1"),
               TestServer(edge.create_app(edge_cfg), host="127.0.0.1")]
    for server in servers:
        await server.start_server()
    upstreams = Upstreams(str(servers[0].make_url("")).rstrip("/"), str(servers[1].make_url("")).rstrip("/"))
    proxy = TestServer(create_app(redis, upstreams, proxy_limits(intake=intake_cfg)), host="127.0.0.1")
    await proxy.start_server()
    try:
        yield str(proxy.make_url("")).rstrip("/")
    finally:
        for server in (proxy, *servers):
            await server.close()


@pytest.fixture
async def origin(redis: Redis, redis_url: str) -> AsyncIterator[str]:
    async with serving_origin(redis, redis_url) as base:
        yield base
