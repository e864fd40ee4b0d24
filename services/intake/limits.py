"""intake's own limits, beside castlog's per-client buckets (``RateLimiter``) and leased seats
(``SeatLimiter``) that they use: the in-flight gate, the cooldowns of refused clients, refused
credentials, and Durable Streams' hourly quota. Each keeps its name, setting and refusal.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import OrderedDict
from collections.abc import Callable

from redis.asyncio import Redis

from castlog import INTAKE_AUTH_SCOPE, RateLimiter, Verdict

from .metrics import Metrics
from .validate import Refusal

# Seconds a request shed by the gate is told to wait before trying again.
BUSY_RETRY_S = 1
# Refused clients remembered (about 150 bytes each); past this the oldest refusal is forgotten,
# which costs that client one more trip to Redis and nothing else.
MAX_CLIENTS = 10_000
# rl/<scope>/<client>: under intake's rl/intake-* (the Redis ACL's pattern)
DS_STREAMS_SCOPE = "intake-ds-streams"
DS_BYTES_SCOPE = "intake-ds-bytes"
HOUR_S = 3600


class InflightGate:
    """At most ``limit`` submits use Redis at once, at most ``waiting`` more wait; past that, shed
    with 503. castlog's connection pool makes callers wait for a free connection, but
    any number of them: under overload that queue (and the requests behind it) would grow without
    bound. The gate sits before the body is read, so a waiting request holds no body in memory,
    and answers clearly when the queue is full."""

    def __init__(self, limit: int, waiting: int) -> None:
        self.max_waiting = waiting
        self.active = 0
        self.waiting = 0
        self._permits = asyncio.Semaphore(limit)

    async def acquire(self) -> None:
        """Take a permit, waiting for one while fewer than ``max_waiting`` wait; else 503 busy."""
        if self._permits.locked() and self.waiting >= self.max_waiting:
            raise Refusal(503, "busy", "intake is overloaded; retry in a second", {"Retry-After": str(BUSY_RETRY_S)})
        self.waiting += 1
        try:
            await self._permits.acquire()
        finally:
            self.waiting -= 1
        self.active += 1

    def release(self) -> None:
        self.active -= 1
        self._permits.release()


class Cooldowns:
    """Clients a rate limiter just refused, remembered until their bucket can hold a token again.

    The token is taken in the submit script, after the body is read and checked. A client told to
    wait is refused here instead, before its body is read, until that wait is over: a flood from a
    limited client costs no body reads, no planning and no Redis round trips. Replicas share the
    bucket and can only empty it sooner, so this never refuses a request that Redis would allow.
    """

    def __init__(self, size: int = MAX_CLIENTS, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._size = size
        self._until: OrderedDict[str, float] = OrderedDict()

    def __len__(self) -> int:
        return len(self._until)

    def wait_s(self, client: str) -> int:
        """Whole seconds ``client`` must still wait; 0 when it may try."""
        until = self._until.get(client)
        if until is None:
            return 0
        left = until - self.clock()
        if left <= 0:
            del self._until[client]
            return 0
        return max(1, math.ceil(left))

    def refused(self, client: str, asked_at: float, verdict: Verdict) -> None:
        """Remember a refusal of a request sent to Redis at ``asked_at`` (this clock): Redis
        decided later than that, so its wait counted from then ends no later than Redis's."""
        self._until[client] = asked_at + verdict.retry_after_ms / 1000
        self._until.move_to_end(client)
        while len(self._until) > self._size:
            self._until.popitem(last=False)


def too_many_failures(wait_s: int) -> Refusal:
    return Refusal(429, "too_many_failures", f"too many refused credentials from your address; retry in {wait_s} s",
                   {"Retry-After": str(wait_s)})


class AuthFailures:
    """Failed credentials, limited and counted: API keys, write tokens and the admin token.

    Each failure of a client takes a token from its bucket ``rl/intake-auth/<client>`` (shared by
    the replicas) and is counted in ``streamtts_intake_auth_failures_total``; once the bucket is
    empty the client is refused 429 ``too_many_failures`` before any credential of its is compared
    again (this process remembers the wait, as for submits: :class:`Cooldowns`), so guessing a key
    or a cast's write token runs at INTAKE_AUTH_FAILURES_PER_MIN at most.
    """

    def __init__(self, redis: Redis, metrics: Metrics, per_min: int) -> None:
        self.limiter = RateLimiter(redis, INTAKE_AUTH_SCOPE, per_min / 60, per_min)
        self.cooldowns = Cooldowns()
        self.metrics = metrics

    def check(self, client: str) -> None:
        """Before a credential is compared: 429 while ``client`` must wait."""
        wait = self.cooldowns.wait_s(client)
        if wait:
            raise too_many_failures(wait)

    async def failed(self, client: str, credential: str) -> None:
        """Count a refused credential; 429 (instead of the caller's 401) once the bucket is empty."""
        self.metrics.auth_failures.labels(credential).inc()
        asked_at = self.cooldowns.clock()
        verdict = await self.limiter.take(client)
        if not verdict.allowed:
            self.cooldowns.refused(client, asked_at, verdict)
            raise too_many_failures(verdict.retry_after_s)


class DurableQuota:
    """Durable Streams' writes per client while no API key is asked for (``STREAMTTS_API_KEYS`` unset).

    With keys set only their holders write; without, anyone who reaches the origin could fill Redis
    with streams of INTAKE_DS_MAX_STREAM_BYTES each. So each client has two buckets, refilled over
    an hour and shared by the replicas: the streams it creates (INTAKE_DS_STREAMS_PER_CLIENT; 429
    ``streams_quota`` beyond) and the bytes it writes, creates and appends together
    (INTAKE_DS_BYTES_PER_CLIENT; 413 ``bytes_quota`` beyond). Each is peeked before the body is read
    (nothing taken) and taken in its own step once the request has passed its checks, just before
    the stream's script: a Redis Cluster keeps the buckets and the stream in different slots.
    """

    def __init__(self, redis: Redis, streams_per_hour: int, bytes_per_hour: int) -> None:
        self.streams = RateLimiter(redis, DS_STREAMS_SCOPE, streams_per_hour / HOUR_S, streams_per_hour)
        self.bytes = RateLimiter(redis, DS_BYTES_SCOPE, bytes_per_hour / HOUR_S, bytes_per_hour)

    async def peek(self, client: str, *, creating: bool, declared_bytes: int | None) -> None:
        """Before the body is read: refused now if the client's buckets could not pay for it."""
        if creating:
            self._check_streams(await self.streams.peek(client))
        if declared_bytes:
            self._check_bytes(await self.bytes.peek(client, min(declared_bytes, self.bytes.burst)))

    async def take(self, client: str, *, creating: bool, size: int) -> None:
        """The request passed its checks: one stream (a create) and ``size`` bytes, or a refusal."""
        if creating:
            self._check_streams(await self.streams.take(client))
        if size:
            self._check_bytes(await self.bytes.take(client, size))

    def _check_streams(self, verdict: Verdict) -> None:
        if not verdict.allowed:
            raise Refusal(429, "streams_quota", f"your address has created {self.streams.burst} durable streams "
                          f"within the hour (INTAKE_DS_STREAMS_PER_CLIENT); retry in {verdict.retry_after_s} s",
                          {"Retry-After": str(verdict.retry_after_s)})

    def _check_bytes(self, verdict: Verdict) -> None:
        if not verdict.allowed:
            raise Refusal(413, "bytes_quota", f"your address has written {self.bytes.burst} bytes to durable "
                          f"streams within the hour (INTAKE_DS_BYTES_PER_CLIENT); retry in "
                          f"{verdict.retry_after_s} s", {"Retry-After": str(verdict.retry_after_s)})
