"""Script calls made at one moment share a round trip, and each still gets its own answer."""

from __future__ import annotations

import asyncio

import pytest
from jobstreams import read_jobs
from redis.asyncio import Redis
from redis.exceptions import ConnectionError, ResponseError

from castlog import CastStore, Meta, RateLimited, RateLimiter, cast_key, content_id
from castlog.batching import NotReplicated, ScriptBatcher
from servicekit import client_for
from streamtts.redisserver import free_port

# Echoes its argument; fails for "boom"; counts its runs in KEYS[1].
ECHO = """
redis.call('INCR', KEYS[1])
if ARGV[1] == 'boom' then return redis.error_reply('boom asked for') end
return ARGV[1]
"""


def meta(text: str) -> Meta:
    return Meta(title="t", voice="af_heart", chars=len(text), sentences=1, created_at=1)


async def test_concurrent_calls_share_round_trips_and_each_gets_its_own_answer(redis: Redis) -> None:
    echo = ScriptBatcher(redis, ECHO)
    answers = await asyncio.gather(*(echo(keys=["runs"], args=[f"call-{i}"]) for i in range(100)))
    assert answers == [f"call-{i}".encode() for i in range(100)]
    assert int(await redis.get("runs")) == 100  # every call ran exactly once
    assert echo.calls == 100 and echo.round_trips < 10


async def test_a_batch_holds_at_most_its_limit(redis: Redis) -> None:
    echo = ScriptBatcher(redis, ECHO, max_batch=3)
    await asyncio.gather(*(echo(keys=["runs"], args=[str(i)]) for i in range(10)))
    assert echo.round_trips == 4  # 3 + 3 + 3 + 1
    with pytest.raises(ValueError):
        ScriptBatcher(redis, ECHO, max_batch=0)


async def test_a_lone_call_goes_alone_and_calls_later_form_new_batches(redis: Redis) -> None:
    echo = ScriptBatcher(redis, ECHO)
    assert await echo(keys=["runs"], args=["one"]) == b"one"
    assert await echo(keys=["runs"], args=["two"]) == b"two"
    assert (echo.calls, echo.round_trips) == (2, 2)


async def test_one_calls_error_is_that_calls_alone(redis: Redis) -> None:
    echo = ScriptBatcher(redis, ECHO)
    answers = await asyncio.gather(
        *(echo(keys=["runs"], args=["boom" if i == 5 else str(i)]) for i in range(10)), return_exceptions=True
    )
    assert isinstance(answers[5], ResponseError) and "boom asked for" in str(answers[5])
    assert [a for i, a in enumerate(answers) if i != 5] == [str(i).encode() for i in range(10) if i != 5]
    assert echo.round_trips == 1


async def test_a_flushed_script_cache_is_reloaded_inside_a_batch(redis: Redis) -> None:
    echo = ScriptBatcher(redis, ECHO)
    await echo(keys=["runs"], args=["warm"])
    await redis.script_flush()  # what a Redis restart does to the script cache
    answers = await asyncio.gather(*(echo(keys=["runs"], args=[str(i)]) for i in range(20)))
    assert answers == [str(i).encode() for i in range(20)]
    assert int(await redis.get("runs")) == 21


async def test_a_cancelled_caller_leaves_the_others_answered(redis: Redis) -> None:
    echo = ScriptBatcher(redis, ECHO)
    calls = [asyncio.ensure_future(echo(keys=["runs"], args=[str(i)])) for i in range(10)]
    await asyncio.sleep(0)  # every call is queued
    calls[3].cancel()
    answers = await asyncio.gather(*calls, return_exceptions=True)
    assert isinstance(answers[3], asyncio.CancelledError)
    assert [a for i, a in enumerate(answers) if i != 3] == [str(i).encode() for i in range(10) if i != 3]
    assert await echo(keys=["runs"], args=["after"]) == b"after"


async def test_when_redis_is_gone_every_call_fails_and_the_batcher_recovers() -> None:
    dead = client_for(f"redis://127.0.0.1:{free_port()}/0")  # nobody listens there
    try:
        echo = ScriptBatcher(dead, ECHO)
        answers = await asyncio.gather(*(echo(keys=["runs"], args=[str(i)]) for i in range(5)), return_exceptions=True)
        assert all(isinstance(a, ConnectionError) for a in answers)
        with pytest.raises(ConnectionError):  # a later call is sent again, not stuck behind the failure
            await echo(keys=["runs"], args=["again"])
    finally:
        await dead.aclose()


async def test_batched_submits_keep_the_claim_exact(store: CastStore, redis: Redis) -> None:
    """Many casts submitted at once, each several times, some clients out of tokens: every
    cast is claimed once, with one job, and every caller hears its own result."""
    limiter = RateLimiter(redis, "submit", rate=0.001, burst=3)
    texts = [f"Cast number {i}." for i in range(20)]
    ids = [content_id(t, "af_heart") for t in texts]

    async def submit(i: int, client: str) -> str:
        try:
            return await store.submit(ids[i], texts[i], "af_heart", meta(texts[i]), limit=(limiter, client))
        except RateLimited:
            return "limited"

    results = await asyncio.gather(*(submit(i % 20, f"client-{k % 25}") for k, i in enumerate(range(100))))
    # 25 clients, 4 requests each, a burst of 3: exactly one refusal per client
    assert results.count("limited") == 25
    accepted = [i % 20 for i, r in enumerate(results) if r != "limited"]
    for cast in set(accepted):
        mine = [r for i, r in enumerate(results) if r != "limited" and i % 20 == cast]
        assert mine.count("new") == 1 and mine.count("existing") == len(mine) - 1
    assert len(await read_jobs(redis)) == len(set(accepted))
    for cast in set(accepted):
        assert await redis.xlen(cast_key(ids[cast])) == 1


@pytest.mark.rule("ack-replicated")
async def test_a_submit_waiting_for_a_replica_that_is_not_there_is_not_acknowledged(redis: Redis) -> None:
    """INTAKE_WAIT_REPLICAS on a Redis with no replica: the script ran, WAIT saw 0 of 1, so the
    caller hears NotReplicated (intake answers 503); the write stands and a retry is the same cast."""
    text = "Waiting for a replica."
    cast_id = content_id(text, "af_heart")
    store = CastStore(redis, replicas=1, wait_ms=20)
    with pytest.raises(NotReplicated) as refused:
        await store.submit(cast_id, text, "af_heart", meta(text))
    assert refused.value.answer == b"new" and (refused.value.replicas, refused.value.wanted) == (0, 1)
    assert await CastStore(redis).submit(cast_id, text, "af_heart", meta(text)) == "existing"
    assert len(await read_jobs(redis)) == 1


async def test_a_batch_that_fails_after_its_send_fails_its_calls_and_never_hangs(redis: Redis) -> None:
    batcher = ScriptBatcher(redis, "return 1", replicas=1, wait_ms=1)

    def broken(*_: object) -> list[int]:
        raise RuntimeError("reading the WAIT replies failed")

    batcher._acked = broken  # type: ignore[method-assign]  # a failure past the pipeline's own try
    calls = [asyncio.ensure_future(batcher(keys=["k"])) for _ in range(3)]
    done, pending = await asyncio.wait(calls, timeout=30)  # a guard against the hang, not a timing
    assert not pending
    assert all(isinstance(call.exception(), RuntimeError) for call in done)
