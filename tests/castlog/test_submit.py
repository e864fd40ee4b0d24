from __future__ import annotations

import asyncio

import pytest
from jobstreams import read_jobs
from redis.asyncio import Redis

from castlog import CastStore, Eos, Error, LogReader, Meta, Start, cast_key, catalog_key, content_id
from castlog.streams import read_recipe

TEXT, VOICE = "Hello there. This is a test.", "af_heart"
CAST = content_id(TEXT, VOICE)


def meta() -> Meta:
    return Meta(title="Hello", voice=VOICE, chars=len(TEXT), sentences=2, created_at=1)


@pytest.mark.rule("claim-once")
async def test_first_submit_claims_writes_recipe_meta_and_one_job(store: CastStore, redis: Redis) -> None:
    assert await store.submit(CAST, TEXT, VOICE, meta()) == "new"
    (entry,) = await LogReader(store.redis).read(CAST)
    assert entry.seq_num == 0 and entry.record == meta()
    recipe = await read_recipe(store.redis, CAST)
    assert recipe is not None and (recipe.text, recipe.voice, recipe.title) == (TEXT, VOICE, "Hello")
    (job,) = await read_jobs(redis)
    assert job.id == CAST and job.voice == VOICE and job.enqueued_at > 0


@pytest.mark.rule("claim-once")
async def test_200_concurrent_submits_make_one_job_and_one_meta(store: CastStore, redis: Redis) -> None:
    results = await asyncio.gather(*(store.submit(CAST, TEXT, VOICE, meta()) for _ in range(200)))
    assert results.count("new") == 1 and results.count("existing") == 199
    assert len(await read_jobs(redis)) == 1
    assert await redis.xlen(cast_key(CAST)) == 1
    assert await redis.xlen(catalog_key(CAST)) == 1


@pytest.mark.rule("repeat-is-cache-hit")
async def test_resubmit_of_finished_cast_enqueues_nothing(store: CastStore, redis: Redis) -> None:
    await store.submit(CAST, TEXT, VOICE, meta())
    await store.append(CAST, 1, [Start(attempt=1, resume_from=0, at=0), Eos(sentences=0, audio_ms=0, attempts=1)])
    assert await store.submit(CAST, TEXT, VOICE, meta()) == "existing"
    assert len(await read_jobs(redis)) == 1


@pytest.mark.rule("error-is-retried")
async def test_resubmit_of_errored_cast_enqueues_one_job_however_many_race(store: CastStore, redis: Redis) -> None:
    await store.submit(CAST, TEXT, VOICE, meta())
    await store.append(CAST, 1, [Start(attempt=1, resume_from=0, at=0), Error(reason="x", attempts=3)])
    results = await asyncio.gather(*(store.submit(CAST, TEXT, VOICE, meta()) for _ in range(50)))
    assert results.count("reenqueued") == 1 and results.count("existing") == 49
    assert len(await read_jobs(redis)) == 2
    # the recipe stays the first catalog entry
    recipe = await read_recipe(store.redis, CAST)
    assert recipe is not None and recipe.text == TEXT


async def test_a_second_error_can_be_retried_again(store: CastStore, redis: Redis) -> None:
    await store.submit(CAST, TEXT, VOICE, meta())
    await store.append(CAST, 1, [Start(attempt=1, resume_from=0, at=0), Error(reason="x", attempts=1)])
    assert await store.submit(CAST, TEXT, VOICE, meta()) == "reenqueued"
    await store.append(CAST, 3, [Start(attempt=2, resume_from=0, at=0), Error(reason="y", attempts=2)])
    assert await store.submit(CAST, TEXT, VOICE, meta()) == "reenqueued"
    assert len(await read_jobs(redis)) == 3


async def test_resubmit_while_generating_is_existing(store: CastStore, redis: Redis) -> None:
    await store.submit(CAST, TEXT, VOICE, meta())
    await store.append(CAST, 1, [Start(attempt=1, resume_from=0, at=0)])
    assert await store.submit(CAST, TEXT, VOICE, meta()) == "existing"
    assert len(await read_jobs(redis)) == 1
