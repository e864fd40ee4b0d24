"""Items through the shared tail and the one record cache (castlog.RowCache): listeners catching up
by offset share each record's Item (decoded, its public JSON and SSE frame built once), kept beside
its row within the cache's one budget, and a rewritten log never meets the old Items."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import CollectorRegistry
from redis.asyncio import Redis

from castlog import Audio, CastStore, Eos, LogReader, Meta, RowCache, Start, cast_key
from castlog.keys import entry_id
from fanout import Item, Tail
from servicekit.metrics import TailCounters

CAST = "itemcacheAAA"
BODY = 1_000
RECORDS = 20


def counters() -> TailCounters:
    return TailCounters(CollectorRegistry(), "test", ["sse"])


def cached_tail(redis: Redis, cache: RowCache, **kw: int) -> Tail:
    return Tail(redis, redis, counters(), reader=LogReader(redis, cache=cache), wake="test", **kw)


def audio(i: int, fill: int = 0) -> Audio:
    return Audio(i=i, t=f"s{i}", d=100, o=100 * i, body=bytes([(i + fill) % 251]) * BODY)


async def write(store: CastStore, n: int, fill: int = 0) -> None:
    head = [Meta(title="t", voice="v", chars=1, sentences=n, created_at=0), Start(attempt=1, resume_from=0, at=0)]
    tail = [Eos(sentences=n, audio_ms=100 * n, attempts=1)]
    await store.append(CAST, 0, head + [audio(i, fill) for i in range(n)] + tail)


async def read_all(tail: Tail, start: int = 0) -> list[Item]:
    """One listener from ``start`` to the log's end (a finished log: it never joins the feed)."""
    got = []
    async with tail.listen(CAST, start, "sse") as listener:
        while not listener.done:
            item = await listener.next(5)
            assert item is not None
            got.append(item)
    return got


@pytest.mark.rule("items-built-once")
async def test_fifty_late_listeners_share_each_records_item(store: CastStore, redis: Redis) -> None:
    await write(store, RECORDS)
    tail = cached_tail(redis, RowCache(redis), queue_size=8)  # offset reads of 8
    reads = await asyncio.gather(*(read_all(tail) for _ in range(50)))
    first = reads[0]
    assert [i.seq for i in first] == list(range(RECORDS + 3))
    for got in reads[1:]:
        assert all(a is b for a, b in zip(got, first, strict=True))  # the same Items: each built once
    frames = {id(i.sse_chunk()) for got in reads for i in got}
    assert len(frames) == RECORDS + 3  # each frame built once, whoever wrote it


async def test_a_listener_starting_mid_log_takes_the_items_already_built(store: CastStore, redis: Redis) -> None:
    await write(store, RECORDS)
    tail = cached_tail(redis, RowCache(redis))
    whole = await read_all(tail)
    later = await read_all(tail, start=10)
    assert later == whole[10:] and all(a is b for a, b in zip(later, whole[10:]))


async def test_the_cache_holds_rows_and_items_within_its_bytes(store: CastStore, redis: Redis) -> None:
    await write(store, RECORDS)
    cache = RowCache(redis, max_bytes=12 * BODY)
    tail = cached_tail(redis, cache)
    rows, items = await tail.read(CAST, entry_id(0), "+", 100)
    assert len(items) == RECORDS + 3  # every row still becomes an Item for its reader
    assert 0 < cache.bytes <= 12 * BODY
    assert cache.built(CAST, rows[-1:], lambda row: None) == [items[-1]]  # the newest stay


async def test_a_rewritten_log_gets_new_items(store: CastStore, redis: Redis) -> None:
    await write(store, 3)
    tail = cached_tail(redis, RowCache(redis))
    old = (await tail.read(CAST, entry_id(0), "+", 10))[1]
    await redis.delete(cast_key(CAST))
    await asyncio.sleep(0.002)  # a new stamp (ms) for the records that replace them
    await write(store, 3, fill=7)
    new = (await tail.read(CAST, entry_id(0), "+", 10))[1]
    assert [i.seq for i in new] == [i.seq for i in old]
    assert all(a is not b for a, b in zip(old, new))
    bodies = [i.entry.record.body for i in new if isinstance(i.entry.record, Audio)]
    assert bodies == [bytes([(i + 7) % 251]) * BODY for i in range(3)]
