"""A rate-limited submit: the client's token taken first (its own step: a bucket and a lane are\ndifferent slots in a cluster), then the submit; a refused client writes nothing but its bucket."""

from __future__ import annotations

import asyncio

import pytest
from jobstreams import read_jobs
from redis.asyncio import Redis

from castlog import (
    CastStore,
    Error,
    LogReader,
    Meta,
    RateLimiter,
    Start,
    SubmitResult,
    cast_key,
    catalog_key,
    client_tag,
    content_id,
)
from castlog.keys import lane_jobs_of
from castlog.ratelimit import RateLimited
from castlog.streams import read_recipe

TEXT, VOICE = "Hello there. This is a test.", "af_heart"
CAST = content_id(TEXT, VOICE)
CLIENT = "203.0.113.7"


def meta() -> Meta:
    return Meta(title="Hello", voice=VOICE, chars=len(TEXT), sentences=2, created_at=1)


async def key_names(redis: Redis) -> set[str]:
    return {k.decode() for k in await redis.keys("*")}


async def lifecycle(store: CastStore, limiter: RateLimiter | None) -> list[SubmitResult]:
    """Submit, resubmit, fail the cast, resubmit twice: the answers along the way."""
    limit = (limiter, CLIENT) if limiter is not None else None
    answers = [await store.submit(CAST, TEXT, VOICE, meta(), limit=limit) for _ in range(2)]
    await store.append(CAST, 1, [Start(attempt=1, resume_from=0, at=0), Error(reason="x", attempts=1)])
    answers += [await store.submit(CAST, TEXT, VOICE, meta(), limit=limit) for _ in range(2)]
    return answers


async def test_allowed_limited_submit_behaves_exactly_like_submit(store: CastStore, redis: Redis) -> None:
    plain = await lifecycle(store, None)
    plain_state = [await redis.xlen(k) for k in (cast_key(CAST), catalog_key(CAST), lane_jobs_of(CAST))]
    plain_log = await LogReader(store.redis).read(CAST)
    await redis.flushall()

    limited = await lifecycle(store, RateLimiter(redis, "t", rate=1, burst=10))
    assert limited == plain == ["new", "existing", "reenqueued", "existing"]
    assert [await redis.xlen(k) for k in (cast_key(CAST), catalog_key(CAST), lane_jobs_of(CAST))] == plain_state == [3, 2, 2]
    assert [e.record for e in await LogReader(store.redis).read(CAST)] == [e.record for e in plain_log]
    recipe = await read_recipe(store.redis, CAST)
    assert recipe is not None and (recipe.text, recipe.voice, recipe.title) == (TEXT, VOICE, "Hello")
    assert await key_names(redis) == {cast_key(CAST), catalog_key(CAST), lane_jobs_of(CAST), f"rl/t/{CLIENT}"}


async def test_limited_submit_writes_nothing_but_the_bucket(store: CastStore, redis: Redis) -> None:
    limiter = RateLimiter(redis, "t", rate=0.5, burst=1)
    assert (await limiter.take(CLIENT)).allowed  # the one token, taken outside the script
    with pytest.raises(RateLimited) as refused:
        await store.submit(CAST, TEXT, VOICE, meta(), limit=(limiter, CLIENT))
    verdict = refused.value.verdict
    assert not verdict.allowed
    assert verdict.retry_after_s == 2 and 1900 <= verdict.retry_after_ms <= 2000
    assert await key_names(redis) == {f"rl/t/{CLIENT}"}  # no cast, no catalog entry, no job


async def test_limited_submit_spends_the_same_bucket_as_take(store: CastStore, redis: Redis) -> None:
    limiter = RateLimiter(redis, "t", rate=0.01, burst=3)
    assert await store.submit(CAST, TEXT, VOICE, meta(), limit=(limiter, CLIENT)) == "new"
    assert await store.submit(CAST, TEXT, VOICE, meta(), limit=(limiter, CLIENT)) == "existing"  # a repeat costs too
    assert (await limiter.take(CLIENT)).allowed
    assert not (await limiter.take(CLIENT)).allowed
    other = content_id("Another text.", VOICE)
    with pytest.raises(RateLimited):
        await store.submit(other, "Another text.", VOICE, meta(), limit=(limiter, CLIENT))
    assert await store.submit(other, "Another text.", VOICE, meta(), limit=(limiter, "198.51.100.1")) == "new"
    assert await redis.xlen(lane_jobs_of(CAST)) + await redis.xlen(lane_jobs_of(other)) == 2


async def test_concurrent_limited_submits_admit_exactly_the_burst(store: CastStore, redis: Redis) -> None:
    limiter = RateLimiter(redis, "t", rate=0.01, burst=10)

    async def attempt() -> SubmitResult | None:
        try:
            return await store.submit(CAST, TEXT, VOICE, meta(), limit=(limiter, CLIENT))
        except RateLimited:
            return None

    results = await asyncio.gather(*(attempt() for _ in range(60)))
    assert results.count("new") == 1 and results.count("existing") == 9 and results.count(None) == 50
    assert await redis.xlen(lane_jobs_of(CAST)) == 1 and await redis.xlen(cast_key(CAST)) == 1


async def test_the_job_names_its_client_for_fair_admission(store: CastStore, redis: Redis) -> None:
    tag = client_tag(CLIENT)
    await store.submit(CAST, TEXT, VOICE, meta(), client=tag)
    await store.append(CAST, 1, [Start(attempt=1, resume_from=0, at=0), Error(reason="x", attempts=1)])
    await store.submit(CAST, TEXT, VOICE, meta(), client=tag)
    jobs = await read_jobs(redis, lane_jobs_of(CAST))
    assert [job.client for job in jobs] == [tag, tag]  # the first job and the one re-enqueued
