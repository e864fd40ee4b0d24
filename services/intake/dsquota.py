"""Durable Streams' writes per client while no API key is asked for (``STREAMTTS_API_KEYS`` unset).

With keys set only their holders write; without, anyone who reaches the origin could fill Redis
with streams of INTAKE_DS_MAX_STREAM_BYTES each. So each client has two buckets, refilled over
an hour and shared by the replicas: the streams it creates (INTAKE_DS_STREAMS_PER_CLIENT; 429
``streams_quota`` beyond) and the bytes it writes, creates and appends together
(INTAKE_DS_BYTES_PER_CLIENT; 413 ``bytes_quota`` beyond). Each is peeked before the body is read
(nothing taken) and taken in its own step once the request has passed its checks, just before
the stream's script: a Redis Cluster keeps the buckets and the stream in different slots.
"""

from __future__ import annotations

from redis.asyncio import Redis

from castlog import RateLimiter, Verdict

from .validate import Refusal

# rl/<scope>/<client>: under intake's rl/intake-* (the Redis ACL's pattern)
DS_STREAMS_SCOPE = "intake-ds-streams"
DS_BYTES_SCOPE = "intake-ds-bytes"
HOUR_S = 3600


class DurableQuota:
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
