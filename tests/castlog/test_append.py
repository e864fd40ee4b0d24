from __future__ import annotations

import asyncio

import pytest
from redis.asyncio import Redis

from castlog import Audio, CastStore, Eos, LogReader, Meta, SeqMismatch, Start, cast_key
from castlog.records import encode_fields

CAST = "pHanHO6047OT"
META = Meta(title="t", voice="v", chars=1, sentences=1, created_at=0)


@pytest.mark.rule("seq-entry-id")
async def test_append_writes_explicit_ids_and_returns_new_tail(store: CastStore, redis: Redis) -> None:
    assert await store.append(CAST, 0, [META]) == 1
    assert await store.append(CAST, 1, [Start(attempt=1, resume_from=0, at=0)]) == 2
    ids = [entry_id for entry_id, _ in await redis.xrange(cast_key(CAST))]
    assert ids == [b"0-1", b"0-2"]


@pytest.mark.rule("append-conditional")
async def test_append_at_stale_seq_num_fails_and_reports_real_tail(store: CastStore, redis: Redis) -> None:
    await store.append(CAST, 0, [META, Start(attempt=1, resume_from=0, at=0)])
    with pytest.raises(SeqMismatch) as caught:
        await store.append(CAST, 1, [Eos(sentences=0, audio_ms=0, attempts=1)])
    assert caught.value.tail == 2 and caught.value.expected == 1
    assert await redis.xlen(cast_key(CAST)) == 2  # nothing was written


@pytest.mark.rule("append-conditional")
async def test_append_ahead_of_tail_fails_too(store: CastStore) -> None:
    with pytest.raises(SeqMismatch) as caught:
        await store.append(CAST, 3, [META])
    assert caught.value.tail == 0


@pytest.mark.rule("append-conditional")
async def test_batch_append_is_all_or_nothing(store: CastStore, redis: Redis) -> None:
    batch = [Audio(i=i, t=f"s{i}", d=10, o=10 * i, body=b"x") for i in range(20)]
    await store.append(CAST, 0, [META])
    with pytest.raises(SeqMismatch):
        await store.append(CAST, 0, batch)
    assert await redis.xlen(cast_key(CAST)) == 1
    assert await store.append(CAST, 1, batch) == 21
    assert [e.record for e in await LogReader(store.redis).read(CAST, 1)] == batch


@pytest.mark.rule("append-conditional")
async def test_only_one_of_many_concurrent_appends_at_one_seq_wins(store: CastStore) -> None:
    async def attempt(n: int) -> bool:
        try:
            await store.append(CAST, 0, [Start(attempt=n, resume_from=0, at=0)])
            return True
        except SeqMismatch:
            return False

    wins = await asyncio.gather(*(attempt(n) for n in range(100)))
    assert sum(wins) == 1
    assert await LogReader(store.redis).tail(CAST) == 1


async def test_entries_carry_the_redis_clock(store: CastStore, redis: Redis) -> None:
    await store.append(CAST, 0, [META])
    (entry,) = await LogReader(store.redis).read(CAST)
    seconds, micros = await redis.time()
    assert abs(entry.ts - (seconds * 1000 + micros // 1000)) < 5_000


@pytest.mark.rule("append-answers-stamp")
async def test_a_stamped_append_answers_the_stamp_its_records_got(store: CastStore) -> None:
    await store.append(CAST, 0, [META])
    stamped = await store.append_stamped(CAST, 1, [Start(attempt=1, resume_from=0, at=0), Audio(i=0, t="a", d=10, o=0)])
    entries = await LogReader(store.redis).read(CAST, 1)
    assert stamped.tail == 3 and stamped.ts > 0
    assert [e.ts for e in entries] == [stamped.ts, stamped.ts]  # one append, one stamp


async def test_a_resent_append_whose_reply_was_lost_answers_as_the_first_did(store: CastStore, redis: Redis) -> None:
    batch = [META, Start(attempt=1, resume_from=0, at=5), Audio(i=0, t="a", d=10, o=0, body=b"mp3")]
    first = await store.append_stamped(CAST, 0, batch)
    assert first.tail == 3
    await asyncio.sleep(0.01)  # a later clock: the answer is the stamp the records stand with
    assert await store.append_stamped(CAST, 0, batch) == first  # the client's retry of the same call
    assert await store.append(CAST, 0, batch) == 3
    assert await redis.xlen(cast_key(CAST)) == 3


async def test_other_records_at_that_position_are_still_a_mismatch(store: CastStore) -> None:
    await store.append(CAST, 0, [META, Start(attempt=1, resume_from=0, at=5)])
    with pytest.raises(SeqMismatch) as caught:
        await store.append(CAST, 0, [META, Start(attempt=2, resume_from=0, at=5)])
    assert caught.value.tail == 2
    await store.append(CAST, 2, [Eos(sentences=0, audio_ms=0, attempts=1)])
    with pytest.raises(SeqMismatch):  # the same records, but the log has moved on past them
        await store.append(CAST, 0, [META, Start(attempt=1, resume_from=0, at=5)])


@pytest.mark.rule("append-names-predecessor")
async def test_each_record_carries_its_predecessors_stamp_across_calls_and_within_one(
    store: CastStore, redis: Redis
) -> None:
    await store.append(CAST, 0, [META])
    await store.append(CAST, 1, [Start(attempt=1, resume_from=0, at=0)])
    await store.append(CAST, 2, [Audio(i=i, t=f"s{i}", d=10, o=10 * i, body=b"x") for i in range(3)])
    rows = await redis.xrange(cast_key(CAST))
    assert len(rows) == 5
    assert b"p" not in rows[0][1]  # the first record has no predecessor
    for (_, before), (_, after) in zip(rows, rows[1:]):
        assert after[b"p"] == before[b"ts"]


@pytest.mark.rule("append-names-predecessor")
async def test_a_predecessor_without_a_stamp_gives_no_p_and_readers_ignore_p(
    store: CastStore, redis: Redis
) -> None:
    kind, headers, _ = encode_fields(META)
    await redis.xadd(cast_key(CAST), {"e": kind, "h": headers}, id="0-1")  # written before `p` and `ts`
    await store.append(CAST, 1, [Start(attempt=1, resume_from=0, at=0), Eos(sentences=0, audio_ms=0, attempts=1)])
    rows = await redis.xrange(cast_key(CAST))
    assert b"p" not in rows[1][1] and rows[2][1][b"p"] == rows[1][1][b"ts"]
    entries = await LogReader(store.redis).read(CAST, 1)
    assert [e.record for e in entries] == [Start(attempt=1, resume_from=0, at=0),
                                          Eos(sentences=0, audio_ms=0, attempts=1)]
