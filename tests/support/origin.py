"""The whole system on one origin, in this test's event loop: intake, edge and synth (a stand-in
synthesizer: no model load) from their app factories on loopback ports, behind the launcher's
front proxy, on the session's Redis. For clients that need real HTTP: the CLI, the browser."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from aiohttp import web
from aiohttp.test_utils import TestServer
from redis.asyncio import Redis

import edge
import intake
from streamtts import proxy
from synth.app import create_app as create_synth
from synth.context import SYNTH
from tests.support.proxylimits import proxy_limits
from tests.synth.support import StandIn, config, wait_until


@dataclass
class Origin:
    url: str
    intake: str = ""  # the services' own origins, behind the proxy (for a front door of one's own)
    edge: str = ""


async def _serve(app: web.Application) -> TestServer:
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    return server


@asynccontextmanager
async def running_origin(redis: Redis, redis_url: str, api_keys: frozenset[str] = frozenset()) -> AsyncIterator[Origin]:
    """Serve the system until the block ends; intake wants one of ``api_keys`` when given."""
    synth_app = create_synth(config(redis_url=redis_url), load=lambda _cfg: StandIn())
    servers = [await _serve(synth_app)]
    try:
        await wait_until(lambda: synth_app[SYNTH].service.phase == "running", 10)
        servers.append(await _serve(intake.create_app(intake.Config(
            redis_url=redis_url, redis_connect_attempts=3, api_keys=api_keys))))
        servers.append(await _serve(edge.create_app(edge.Config(redis_url=redis_url, redis_connect_attempts=3))))
        upstreams = proxy.Upstreams(*(f"http://127.0.0.1:{s.port}" for s in servers[1:]))
        servers.append(await _serve(proxy.create_app(redis, upstreams, proxy_limits())))
        yield Origin(f"http://127.0.0.1:{servers[-1].port}", upstreams.intake, upstreams.edge)
    finally:
        for server in reversed(servers):
            await server.close()
