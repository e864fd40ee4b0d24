"""Who may read how much: a per-address token bucket and a cap on open streams, both in Redis.

A request's parameters are parsed first (``params.py``), so that refused names cost no Redis
command; then it passes the guard once (:meth:`Guard.take_read`: its read token), and the client
it gets holds an open-stream seat if the response turns out to be a stream (:meth:`Guard.hold_seat`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from aiohttp import web
from redis.asyncio import Redis

from castlog import EDGE_SCOPE, EDGE_STREAMS_SCOPE, RateLimiter
from castlog.slots import SeatLimiter
from servicekit import Refusal, request_client

from .config import Config
from .metrics import EdgeMetrics

# A client over its stream cap may retry once one of its streams ends.
STREAMS_RETRY_AFTER_S = 5
BUSY_RETRY_AFTER_S = 5


class Guard:
    """One per app: the read bucket and the open-stream seats (both in Redis, shared by every
    replica; ``seats`` holds and renews this process's), and this process's own cap on listeners."""

    def __init__(self, redis: Redis, cfg: Config, metrics: EdgeMetrics) -> None:
        self.limiter = RateLimiter(redis, EDGE_SCOPE, cfg.read_rate, cfg.read_burst)  # rl/edge/<client>
        # rl/edge-streams/<client>: the client's open-stream seats
        self.seats = SeatLimiter(redis, EDGE_STREAMS_SCOPE, cfg.max_streams_per_client, cfg.stream_lease_s)
        self.trusted = cfg.forwarded_allow_ips
        self.max_listeners = cfg.max_listeners
        self.metrics = metrics

    async def take_read(self, request: web.Request) -> str:
        """Spend one read token of the request's client (returned), or answer 429 with Retry-After."""
        client = request_client(request, self.trusted)
        verdict = await self.limiter.take(client, 1)
        if not verdict.allowed:
            self.metrics.rate_limited.inc()
            raise Refusal(
                429, "rate_limited", f"too many reads from your address; retry in {verdict.retry_after_s}s",
                headers={"Retry-After": str(verdict.retry_after_s)},
            )
        return client

    @asynccontextmanager
    async def hold_seat(self, client: str) -> AsyncIterator[None]:
        """Hold one of ``client``'s open-stream seats (a client that spent its read token) while its
        response streams (SSE, a growing MP3, a long poll): 503 when this process is full, 429 when
        the client has its maximum of streams open."""
        if len(self.seats.held) >= self.max_listeners:  # this process is full: no Redis command spent
            raise Refusal(
                503, "busy", "this edge serves its maximum of listeners; retry in a moment",
                headers={"Retry-After": str(BUSY_RETRY_AFTER_S)},
            )
        seat, held = await self.seats.acquire(client)
        if seat is None:
            self.metrics.rate_limited.inc()
            raise Refusal(
                429, "too_many_streams",
                f"your address already has {held} streams open; close one or retry later",
                headers={"Retry-After": str(STREAMS_RETRY_AFTER_S)},
            )
        try:
            yield
        finally:
            self.seats.release(seat)  # not waited for: a stream's end waits on no Redis command
