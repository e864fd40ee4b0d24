"""castlog.RowCache: N readers of one log cost Redis about one read of it, bounded by bytes, and a
log rewritten under the cache is read again (checked on use, [R:views-checked-on-use])."""

from __future__ import annotations

import asyncio

import pytest
from redis.asyncio import Redis

from castlog import Audio, CastStore, LogReader, Meta, RowCache, Start, cast_key
from castlog.keys import entry_id
from castlog.records import decode_entry

CAST = "rowcacheAAAA"
BODY = 1_000


def audio(i: int, fill: int = 0) -> Audio:
    return Audio(i=i, t=f"s{i}", d=100, o=100 * i, body=bytes([(i + fill) % 251]) * BODY)


async def write(store: CastStore, n: int, fill: int = 0) -> None:
    head = [Meta(title="t", voice="v", chars=1, sentences=n, created_at=0), Start(attempt=1, resume_from=0, at=0)]
    await store.append(CAST, 0, head + [audio(i, fill) for i in range(n)])


class Counted(LogReader):
    """A reader that counts the rows it fetches from Redis for the cache."""

    fetched = 0

    async def _fetch(self, cast_id: str, first: int, high: str, count: int):  # type: ignore[no-untyped-def]
        rows, keep = await super()._fetch(cast_id, first, high, count)
        self.fetched += len(rows)
        return rows, keep


def bodies(rows: list) -> list[bytes]:
    return [e.record.body for e in (decode_entry(*r) for r in rows) if e is not None and isinstance(e.record, Audio)]


@pytest.mark.rule("bodies-travel-once")
async def test_fifty_simultaneous_readers_of_a_log_fetch_it_once(store: CastStore, redis: Redis) -> None:
    await write(store, 30)
    reader = Counted(redis, cache=RowCache(redis))
    reads = await asyncio.gather(*(reader.rows(CAST, entry_id(0), count=16) for _ in range(50)))
    assert all(r == reads[0] for r in reads) and len(reads[0]) == 16
    more = await asyncio.gather(*(reader.rows(CAST, entry_id(16), count=16) for _ in range(50)))
    assert all(len(r) == 16 for r in more)
    assert reader.fetched == 32  # the log's rows, once


async def test_the_cache_holds_at_most_its_bytes(store: CastStore, redis: Redis) -> None:
    await write(store, 40)
    cache = RowCache(redis, max_bytes=10 * BODY)
    reader = LogReader(redis, cache=cache)
    assert len(await reader.rows(CAST, entry_id(0), count=100)) == 42
    assert 0 < cache.bytes <= 10 * BODY


@pytest.mark.rule("views-checked-on-use")
async def test_a_log_rewritten_under_the_cache_is_read_again(store: CastStore, redis: Redis) -> None:
    await write(store, 6)
    reader = LogReader(redis, cache=RowCache(redis))
    old = await reader.rows(CAST, entry_id(0), count=8)
    await asyncio.sleep(0.005)  # the new records get other stamps
    await redis.delete(cast_key(CAST))
    await write(store, 6, fill=7)  # Redis lost the log and it was made again, other bodies
    assert bodies(await reader.rows(CAST, entry_id(0), count=8)) == [audio(i, 7).body for i in range(6)]
    assert bodies(old) != [audio(i, 7).body for i in range(6)]
    await redis.delete(cast_key(CAST))
    await write(store, 3, fill=9)  # shorter now: the cached rows past its end are gone too
    assert bodies(await reader.rows(CAST, entry_id(0), count=8)) == [audio(i, 9).body for i in range(3)]
