from __future__ import annotations

import asyncio

from redis.asyncio import Redis

from castlog import RateLimiter


async def test_token_bucket_allows_burst_then_refuses_with_retry_after(redis: Redis) -> None:
    limiter = RateLimiter(redis, "t", rate=0.5, burst=3)
    verdicts = [await limiter.take("1.2.3.4") for _ in range(4)]
    assert [v.allowed for v in verdicts] == [True, True, True, False]
    assert verdicts[-1].retry_after_s == 2
    assert (await limiter.take("5.6.7.8")).allowed  # buckets are per client
    assert await redis.pttl("rl/t/1.2.3.4") > 0  # counters expire on their own


async def test_token_bucket_refills_over_time(redis: Redis) -> None:
    limiter = RateLimiter(redis, "t", rate=20, burst=1)
    assert (await limiter.take("c")).allowed
    assert not (await limiter.take("c")).allowed
    await asyncio.sleep(0.12)
    assert (await limiter.take("c")).allowed
