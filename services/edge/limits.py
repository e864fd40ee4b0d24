"""Who may read how much: a per-address token bucket in Redis and a cap on open streams.

Validation of the cast id comes first in every handler, so that refused names cost no Redis
command; the bucket comes second.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from aiohttp import web
from redis.asyncio import Redis

from castlog import RateLimiter, client_address, is_cast_id

from .config import Config
from .errors import bad_request, not_found, refusal
from .metrics import EdgeMetrics

RATE_SCOPE = "edge"
# A client over its stream cap may retry once one of its streams ends.
STREAMS_RETRY_AFTER_S = 5
BUSY_RETRY_AFTER_S = 5


def cast_id_from(request: web.Request, raw: str | None = None) -> str:
    """The cast id of the route (or ``raw``), or a 404 before anything touches Redis."""
    value = request.match_info.get("id", "") if raw is None else raw
    if not is_cast_id(value):
        raise not_found("no such cast: a cast id is 12 URL-safe base64 characters")
    return value


def int_param(request: web.Request, name: str, default: int, low: int, high: int | None = None) -> int:
    raw = request.query.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise bad_request(f"{name} must be an integer, not {raw[:32]!r}") from None
    if value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise bad_request(f"{name} must be {bound}, not {value}")
    return value


def float_param(request: web.Request, name: str, default: float, low: float, high: float) -> float:
    raw = request.query.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise bad_request(f"{name} must be a number of seconds, not {raw[:32]!r}") from None
    if not low <= value <= high:
        raise bad_request(f"{name} must be between {low:g} and {high:g} seconds, not {value:g}")
    return value


class Guard:
    """One per app: the read bucket (shared by replicas) and the open-stream counts (this process)."""

    def __init__(self, redis: Redis, cfg: Config, metrics: EdgeMetrics) -> None:
        self.limiter = RateLimiter(redis, RATE_SCOPE, cfg.read_rate, cfg.read_burst)
        self.trusted = cfg.forwarded_allow_ips
        self.max_streams = cfg.max_streams_per_client
        self.max_listeners = cfg.max_listeners
        self.metrics = metrics
        self.open: dict[str, int] = {}
        self.total = 0

    def client(self, request: web.Request) -> str:
        return client_address(request.remote, request.headers.get("X-Forwarded-For"), self.trusted)

    async def take(self, request: web.Request, cost: int = 1) -> None:
        """Spend ``cost`` read tokens of this client, or answer 429 with Retry-After."""
        verdict = await self.limiter.take(self.client(request), cost)
        if not verdict.allowed:
            self.metrics.rate_limited.inc()
            raise refusal(
                429, "rate_limited", f"too many reads from your address; retry in {verdict.retry_after_s}s",
                headers={"Retry-After": str(verdict.retry_after_s)},
            )

    @contextmanager
    def stream_slot(self, request: web.Request) -> Iterator[None]:
        """Hold one of this client's open-stream slots while a live response runs."""
        client = self.client(request)
        held = self.open.get(client, 0)
        if held >= self.max_streams:
            self.metrics.rate_limited.inc()
            raise refusal(
                429, "too_many_streams",
                f"your address already has {held} live streams open; close one or retry later",
                headers={"Retry-After": str(STREAMS_RETRY_AFTER_S)},
            )
        if self.total >= self.max_listeners:
            raise refusal(
                503, "busy", "this edge serves its maximum of live listeners; retry in a moment",
                headers={"Retry-After": str(BUSY_RETRY_AFTER_S)},
            )
        self.open[client] = held + 1
        self.total += 1
        try:
            yield
        finally:
            self.total -= 1
            left = self.open[client] - 1
            if left:
                self.open[client] = left
            else:
                del self.open[client]  # the dict holds only clients with open streams
