"""castlog's one reader of cast logs: replay by offset (and bench's follower of one log, built
on it), the incremental fold into a layout (and its check against a log that shrank), and archived logs read like Redis-held ones."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from logfollow import follow
from redis.asyncio import Redis

from blobstore import BlobStore, StoreConfig, open_blob_store
from castlog import (
    ArchiveUnavailable,
    Audio,
    CastStore,
    Entry,
    Eos,
    Error,
    LogReader,
    LogView,
    Meta,
    StaleLayout,
    Start,
    archive,
    cast_key,
    playable,
    summarize,
)
from castlog.keys import entry_id

CAST = "pHanHO6047OT"
N_AUDIO = 60


def records() -> list:
    out: list = [Meta(title="t", voice="v", chars=1, sentences=N_AUDIO, created_at=0), Start(attempt=1, resume_from=0, at=0)]
    out += [Audio(i=i, t=f"s{i}", d=100, o=100 * i, body=bytes([i])) for i in range(N_AUDIO)]
    out.append(Eos(sentences=N_AUDIO, audio_ms=100 * N_AUDIO, attempts=1))
    return out


async def write_slowly(store: CastStore, recs: list, pause_s: float = 0.002) -> None:
    for n, record in enumerate(recs):
        await store.append(CAST, n, [record])
        await asyncio.sleep(pause_s)


async def test_follower_started_before_first_record_gets_every_record_once_in_order(
    redis_server, store: CastStore
) -> None:
    conn = Redis.from_url(redis_server.url)  # a blocking read holds its own connection
    try:
        follower = LogReader(conn)
        got: list[Entry] = []

        async def collect() -> None:
            async for entry in follow(follower, CAST, block_ms=200, batch=7):
                got.append(entry)

        task = asyncio.create_task(collect())
        await asyncio.sleep(0.05)
        await write_slowly(store, records())
        await asyncio.wait_for(task, 10)
    finally:
        await conn.aclose()
    assert [e.seq_num for e in got] == list(range(len(records())))
    assert [e.record for e in got] == records()


async def test_follower_joining_mid_log_hands_over_from_replay_to_live_without_gap(redis_server, store: CastStore) -> None:
    recs = records()
    for n, record in enumerate(recs[:30]):
        await store.append(CAST, n, [record])
    conn = Redis.from_url(redis_server.url)
    try:
        got: list[int] = []

        async def collect() -> None:
            async for entry in follow(LogReader(conn), CAST, 5, block_ms=100, batch=4):
                got.append(entry.seq_num)

        task = asyncio.create_task(collect())
        writer = asyncio.create_task(_append_from(store, recs, 30))
        await asyncio.wait_for(asyncio.gather(task, writer), 10)
    finally:
        await conn.aclose()
    assert got == list(range(5, len(recs)))


async def _append_from(store: CastStore, recs: list, start: int) -> None:
    for n in range(start, len(recs)):
        await store.append(CAST, n, [recs[n]])
        await asyncio.sleep(0.001)


async def test_seek_to_seq_num_starts_there(store: CastStore, redis: Redis) -> None:
    recs = records()
    await store.append(CAST, 0, recs)
    page = await LogReader(redis).read(CAST, 17, limit=5)
    assert [e.seq_num for e in page] == [17, 18, 19, 20, 21]
    assert [e.record for e in page] == recs[17:22]
    assert await LogReader(redis).read(CAST, len(recs)) == []


async def test_follow_past_end_of_finished_log_ends_at_once(store: CastStore, redis: Redis) -> None:
    recs = records()
    await store.append(CAST, 0, recs)
    got = [e async for e in follow(LogReader(redis), CAST, len(recs) + 3, block_ms=60_000)]
    assert got == []


async def test_follow_skips_unknown_kinds(store: CastStore, redis: Redis) -> None:
    recs = records()[:3]
    await store.append(CAST, 0, recs[:2])
    await redis.xadd(cast_key(CAST), {"e": "chapter", "h": '{"e":"chapter"}'}, id="0-3")
    await store.append(CAST, 3, [recs[2], Eos(sentences=1, audio_ms=100, attempts=1)])
    got = [e async for e in follow(LogReader(redis), CAST, block_ms=100)]
    assert [e.seq_num for e in got] == [0, 1, 3, 4]


async def test_read_all_pages_through_and_counts_unknown_kinds_in_the_tail(store: CastStore, redis: Redis) -> None:
    recs = records()
    await store.append(CAST, 0, recs[:10])
    await redis.xadd(cast_key(CAST), {"e": "chapter", "h": '{"e":"chapter"}'}, id="0-11")
    await redis.xadd(cast_key(CAST), {"e": "chapter", "h": '{"e":"chapter"}'}, id="0-12")
    entries, tail = await LogReader(redis).read_all(CAST, batch=3)
    assert [e.seq_num for e in entries] == list(range(10))
    assert tail == 12  # the next append goes after the records this version cannot read
    assert await LogReader(redis).read_all("nothingHere0") == ([], 0)


async def test_a_page_reads_records_and_the_tail_in_one_round_trip(store: CastStore, redis: Redis) -> None:
    recs = records()
    await store.append(CAST, 0, recs[:10])
    page = await LogReader(redis).page(CAST, 4, 3)
    assert [e.seq_num for e in page.entries] == [4, 5, 6]
    assert (page.next_seq, page.tail) == (7, 10)
    at_end = await LogReader(redis).page(CAST, 10, 3)
    assert (at_end.entries, at_end.next_seq, at_end.tail) == ([], 10, 10)
    assert (await LogReader(redis).page("nothingHere0", 0, 3)).tail == 0


# ---- the fold: state and playable layout, read incrementally -----------------------------------

ATTEMPTS = [
    Meta(title="t", voice="v", chars=1, sentences=4, created_at=0),
    Start(attempt=1, resume_from=0, at=0),
    *[Audio(i=i, t=f"a{i}", d=100, o=100 * i, body=b"a" * (10 + i)) for i in range(3)],
    Error(reason="worker lost", attempts=1),
    Start(attempt=2, resume_from=1, at=0),
    *[Audio(i=i, t=f"b{i}", d=100, o=100 * i, body=b"b" * (20 + i)) for i in range(1, 4)],
    Eos(sentences=4, audio_ms=400, attempts=2),
]


async def test_a_view_refreshed_record_by_record_equals_the_whole_log_folded(store: CastStore, redis: Redis) -> None:
    view = LogView(LogReader(redis), CAST)
    for n, record in enumerate(ATTEMPTS):
        await store.append(CAST, n, [record])
        layout = await view.refresh()
        entries = await LogReader(redis).read(CAST, 0, 1000)
        heard = playable(entries)
        assert [(c.seq, c.i, c.size) for c in layout.chunks] == [
            (e.seq_num, e.record.i, len(e.record.body)) for e in heard  # type: ignore[union-attr]
        ]
        assert layout.state.tail == summarize(entries).tail == n + 1
        assert [a.body for a in layout.audio] == [b""] * len(heard)  # the view keeps no bodies
    assert layout.finished and layout.closed and [c.i for c in layout.chunks] == [0, 1, 2, 3]
    got = [body async for _, body in LogReader(redis).bodies(CAST, layout.chunks)]
    assert got == [e.record.body for e in playable(await LogReader(redis).read(CAST, 0, 1000))]  # type: ignore[union-attr]


async def test_a_view_notices_a_log_that_shrank_and_reads_it_again(store: CastStore, redis: Redis) -> None:
    await store.append(CAST, 0, ATTEMPTS[:5])  # meta, start, audio 0..2
    view = LogView(LogReader(redis), CAST)
    assert [c.i for c in (await view.refresh()).chunks] == [0, 1, 2]
    await redis.delete(cast_key(CAST))
    await store.append(CAST, 0, ATTEMPTS[:3])  # Redis lost audio 1 and 2 (an AOF cut back) ...
    redone = Audio(i=1, t="again", d=100, o=100, body=b"r" * 7)
    await store.append(CAST, 3, [redone])  # ... and seq 3 now holds another record
    layout = await view.refresh()
    assert [(c.seq, c.i, c.size) for c in layout.chunks] == [(2, 0, 10), (3, 1, 7)]
    assert layout.tail == 4 and not layout.closed


async def test_a_stale_layout_is_refused_when_its_bodies_are_gone(store: CastStore, redis: Redis) -> None:
    await store.append(CAST, 0, ATTEMPTS[:5])
    layout = await LogView(LogReader(redis), CAST).refresh()
    await redis.xdel(cast_key(CAST), entry_id(3))
    with pytest.raises(StaleLayout):
        _ = [body async for _, body in LogReader(redis).bodies(CAST, layout.chunks)]


# ---- archived logs -------------------------------------------------------------------------------

@pytest.fixture
async def file_store(tmp_path: Path) -> AsyncIterator[BlobStore]:
    blobs = await open_blob_store(StoreConfig((tmp_path / "archive").as_uri()))
    yield blobs
    await blobs.close()


async def archived(store: CastStore, redis: Redis, blobs: BlobStore) -> list[Entry]:
    """ATTEMPTS written and archived; the entries as Redis held them before."""
    await store.append(CAST, 0, ATTEMPTS)
    before = await LogReader(redis).read(CAST, 0, 1000)
    packed = archive.pack(CAST, await LogReader(redis).stored(CAST))
    await blobs.put(packed.descriptor.key, packed.blob)
    assert await archive.commit(redis, CAST, packed) == 1
    assert await redis.xlen(cast_key(CAST)) == 1
    return before


async def test_an_archived_log_reads_like_the_redis_held_one(store: CastStore, redis: Redis, file_store: BlobStore) -> None:
    before = await archived(store, redis, file_store)
    reader = LogReader(redis, file_store)
    assert await reader.read(CAST, 0, 1000) == before
    assert await reader.read(CAST, 3, 2) == before[3:5]
    assert (await reader.read_all(CAST, batch=4)) == (before, len(before))
    page = await reader.page(CAST, 2, 3)
    assert (page.entries, page.next_seq, page.tail) == (before[2:5], 5, len(before))
    assert [e async for e in follow(reader, CAST, 6, batch=2)] == before[6:]
    assert [e async for e in follow(reader, CAST)] == before[:6]  # as from Redis: ends at the first terminal (the error)
    layout = await LogView(reader, CAST).refresh()
    assert layout.blob is not None and layout.finished
    heard = [e.record.body for e in playable(before)]  # type: ignore[union-attr]
    assert [body async for _, body in reader.bodies(CAST, layout.chunks)] == heard
    whole = b"".join([p async for p in reader.stream(CAST, layout.blob, 0, layout.total_bytes)])
    assert whole == b"".join(heard)


async def test_without_an_archive_an_archived_log_is_its_eos_and_its_bodies_are_unavailable(
    store: CastStore, redis: Redis, file_store: BlobStore,
) -> None:
    before = await archived(store, redis, file_store)
    reader = LogReader(redis)
    (eos,) = await reader.read(CAST)
    assert eos.seq_num == before[-1].seq_num and eos.record == before[-1].record
    assert await reader.tail(CAST) == len(before)
    layout = await LogView(reader, CAST).refresh()  # headers and sizes come from the index alone
    assert [c.i for c in layout.chunks] == [0, 1, 2, 3] and layout.finished
    with pytest.raises(ArchiveUnavailable):
        _ = [body async for _, body in reader.bodies(CAST, layout.chunks)]


async def test_a_follower_whose_log_is_archived_under_it_goes_on_without_gap_or_duplicate(
    store: CastStore, redis: Redis, file_store: BlobStore,
) -> None:
    await store.append(CAST, 0, ATTEMPTS[:5])  # meta, start, audio 0..2: the error comes later
    reader = LogReader(redis, file_store)
    follower = follow(reader, CAST, 0, batch=2, stop_at_terminal=False)
    got = [await follower.__anext__(), await follower.__anext__()]  # one read of two records
    await store.append(CAST, 5, ATTEMPTS[5:])
    before = await LogReader(redis).read(CAST, 0, 1000)
    packed = archive.pack(CAST, await reader.stored(CAST))
    await file_store.put(packed.descriptor.key, packed.blob)
    assert await archive.commit(redis, CAST, packed) == 1  # the log is one entry now
    while got[-1].seq_num < len(before) - 1:
        got.append(await asyncio.wait_for(follower.__anext__(), 10))
    await follower.aclose()
    assert got == before
