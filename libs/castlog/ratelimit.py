"""Per-client token buckets kept in Redis, so that every replica of a service shares them."""

from __future__ import annotations

import math
from dataclasses import dataclass

from redis.asyncio import Redis

from .batching import ScriptBatcher
from .keys import limit_key
from .lua import NOW_MS

# KEYS[1]: the bucket rl/<scope>/<client>
# ARGV[1]: refill rate (tokens per second), ARGV[2]: burst (bucket size), ARGV[3]: cost
# Takes `cost` tokens if the bucket holds them. Returns {1, 0} or {0, ms until enough tokens}.
# Redis's clock, so replicas with skewed clocks agree; the key expires once the bucket is full.
# The bucket as it stands now: `tokens` refilled since `at`, capped at `burst` (TAKE and PEEK).
_REFILL = (
    """
local rate, burst, cost = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
"""
    + NOW_MS
    + """
local b = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens, at = tonumber(b[1]) or burst, tonumber(b[2]) or now
tokens = math.min(burst, tokens + (now - at) * rate / 1000)
"""
)
TAKE = (
    _REFILL
    + """
local ok, wait = 0, 0
if tokens >= cost then
  tokens, ok = tokens - cost, 1
else
  wait = math.ceil((cost - tokens) * 1000 / rate)
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', now)
redis.call('PEXPIRE', KEYS[1], math.ceil((burst - tokens) * 1000 / rate) + 1000)
return {ok, wait}
"""
)


# KEYS[1]: the bucket; ARGV: TAKE's. Whether the bucket holds ``cost`` tokens now, taking none
# and writing nothing: {1, 0} or {0, ms until it would}. A caller checks this before it reads a
# body, then takes the token just before its write (its own step: the client's slot is not the
# cast's key lane).
PEEK = (
    _REFILL
    + """
if tokens >= cost then return {1, 0} end
return {0, math.ceil((cost - tokens) * 1000 / rate)}
"""
)


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    retry_after_s: int  # whole seconds, for a Retry-After header (0 when allowed)
    retry_after_ms: int = 0  # the exact wait, for a caller that remembers it (0 when allowed)

    @classmethod
    def of(cls, ok: int, wait_ms: int) -> Verdict:
        """The verdict of TAKE's answer ``{ok, wait_ms}``."""
        if ok:
            return cls(True, 0, 0)
        wait_ms = int(wait_ms)
        return cls(False, max(1, math.ceil(wait_ms / 1000)), wait_ms)


class RateLimited(Exception):
    """A client's bucket had no token, so nothing was done; it may retry after the verdict's wait."""

    def __init__(self, verdict: Verdict) -> None:
        super().__init__(f"rate limited: retry in {verdict.retry_after_s} s")
        self.verdict = verdict


class RateLimiter:
    """``rate`` requests per second sustained, ``burst`` at once, per client, for one scope."""

    def __init__(self, redis: Redis, scope: str, rate: float, burst: int) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError("a rate limit needs rate > 0 and burst >= 1")
        self.scope, self.rate, self.burst = scope, rate, burst
        # a busy intake takes many tokens at once: those of one loop turn share a round trip
        # (taken one by one, the take cost a submit more than its own script: bench_cluster.py)
        self.takes = ScriptBatcher(redis, TAKE)
        self._peek = redis.register_script(PEEK)

    def key(self, client: str) -> str:
        """The bucket of ``client``: TAKE's KEYS[1]."""
        return limit_key(self.scope, client)

    def args(self, cost: int = 1) -> list[float | int]:
        """TAKE's ARGV: rate, burst, cost (a script that embeds TAKE passes them on)."""
        return [self.rate, self.burst, cost]

    async def peek(self, client: str, cost: int = 1) -> Verdict:
        """Whether ``client`` could take ``cost`` now (nothing taken, nothing written)."""
        ok, wait_ms = await self._peek(keys=[self.key(client)], args=self.args(cost))
        return Verdict.of(ok, wait_ms)

    async def take(self, client: str, cost: int = 1) -> Verdict:
        ok, wait_ms = await self.takes(keys=[self.key(client)], args=self.args(cost))
        return Verdict.of(ok, wait_ms)
