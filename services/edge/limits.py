"""Who may read how much: a per-address token bucket and a cap on open streams, both in Redis.

Validation of the cast id comes first in every handler, so that refused names cost no Redis
command; the bucket comes second.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from aiohttp import web
from redis.asyncio import Redis
from redis.exceptions import RedisError

from castlog import EDGE_SCOPE, EDGE_STREAMS_SCOPE, RateLimiter, is_cast_id
from castlog.slots import Slot, SlotLimiter
from servicekit import client_address

from .config import Config
from .errors import bad_request, not_found, refusal
from .metrics import EdgeMetrics

RATE_SCOPE = EDGE_SCOPE  # rl/edge/<client>: the client's read bucket
STREAMS_SCOPE = EDGE_STREAMS_SCOPE  # rl/edge-streams/<client>: the client's open-stream slots
# A client over its stream cap may retry once one of its streams ends.
STREAMS_RETRY_AFTER_S = 5
BUSY_RETRY_AFTER_S = 5

log = logging.getLogger(__name__)


def cast_id_from(request: web.Request) -> str:
    """The cast id of the route, or a 404 before anything touches Redis."""
    value = request.match_info.get("id", "")
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
    """One per app: the read bucket and the open-stream slots (both in Redis, shared by every
    replica), and this process's own cap on live listeners."""

    def __init__(self, redis: Redis, cfg: Config, metrics: EdgeMetrics) -> None:
        self.limiter = RateLimiter(redis, RATE_SCOPE, cfg.read_rate, cfg.read_burst)
        self.slots = SlotLimiter(redis, STREAMS_SCOPE, cfg.max_streams_per_client, cfg.stream_lease_s)
        self.trusted = cfg.forwarded_allow_ips
        self.max_listeners = cfg.max_listeners
        self.metrics = metrics
        self.held: dict[Slot, None] = {}  # this process's open streams, in opening order
        self._to_release: list[Slot] = []
        self._releaser: asyncio.Task[None] | None = None

    @property
    def total(self) -> int:
        return len(self.held)

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

    @asynccontextmanager
    async def stream_slot(self, request: web.Request) -> AsyncIterator[None]:
        """Hold one of this client's open-stream slots while a live response runs."""
        if self.total >= self.max_listeners:  # this process is full: no Redis command spent
            raise refusal(
                503, "busy", "this edge serves its maximum of live listeners; retry in a moment",
                headers={"Retry-After": str(BUSY_RETRY_AFTER_S)},
            )
        slot, held = await self.slots.acquire(self.client(request))
        if slot is None:
            self.metrics.rate_limited.inc()
            raise refusal(
                429, "too_many_streams",
                f"your address already has {held} live streams open; close one or retry later",
                headers={"Retry-After": str(STREAMS_RETRY_AFTER_S)},
            )
        self.held[slot] = None
        try:
            yield
        finally:
            del self.held[slot]
            self._release_soon(slot)

    def _release_soon(self, slot: Slot) -> None:
        """Give the slot back from a task of its own (a handler being cancelled cannot skip it);
        slots freed while a release is on the wire go together in the next one, so a cast's
        ending, which closes all its streams at once, costs a few commands, not one per stream."""
        self._to_release.append(slot)
        if self._releaser is None:
            self._releaser = asyncio.create_task(self._release_all())

    async def _release_all(self) -> None:
        try:
            while self._to_release:
                slots, self._to_release = self._to_release, []
                try:
                    await self.slots.release(slots)
                except RedisError as exc:  # they lapse with their leases instead
                    log.warning("could not release %d stream slots (%s); they lapse within %.0f s",
                                len(slots), exc, self.slots.lease_ms / 1000)
        finally:
            self._releaser = None

    async def renew_forever(self) -> None:
        """Renew the leases of this process's open streams every third of a lease."""
        every_s = self.slots.lease_ms / 1000 / 3
        while True:
            await asyncio.sleep(every_s)
            slots = list(self.held)
            if not slots:
                continue
            try:
                standing = await self.slots.renew(slots)
            except RedisError as exc:
                log.warning("could not renew %d stream slots (%s); retrying in %.0f s", len(slots), exc, every_s)
                continue
            if standing < len(slots):  # lapsed while Redis was away: streams go on, uncounted
                log.info("%d of %d stream slots had lapsed", len(slots) - standing, len(slots))

    async def drain(self) -> None:
        """Wait for the releases in flight (shutdown)."""
        if self._releaser is not None:
            await self._releaser
