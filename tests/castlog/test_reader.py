from __future__ import annotations

import asyncio

from redis.asyncio import Redis

from castlog import Audio, CastStore, Entry, Eos, Meta, Start, cast_key

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
    reader = Redis.from_url(redis_server.url)  # a blocking read holds its own connection
    try:
        follower = CastStore(reader)
        got: list[Entry] = []

        async def follow() -> None:
            async for entry in follower.follow(CAST, block_ms=200, batch=7):
                got.append(entry)

        task = asyncio.create_task(follow())
        await asyncio.sleep(0.05)
        await write_slowly(store, records())
        await asyncio.wait_for(task, 10)
    finally:
        await reader.aclose()
    assert [e.seq_num for e in got] == list(range(len(records())))
    assert [e.record for e in got] == records()


async def test_follower_joining_mid_log_hands_over_from_replay_to_live_without_gap(redis_server, store: CastStore) -> None:
    recs = records()
    for n, record in enumerate(recs[:30]):
        await store.append(CAST, n, [record])
    reader = Redis.from_url(redis_server.url)
    try:
        got: list[int] = []

        async def follow() -> None:
            async for entry in CastStore(reader).follow(CAST, 5, block_ms=100, batch=4):
                got.append(entry.seq_num)

        task = asyncio.create_task(follow())
        writer = asyncio.create_task(_append_from(store, recs, 30))
        await asyncio.wait_for(asyncio.gather(task, writer), 10)
    finally:
        await reader.aclose()
    assert got == list(range(5, len(recs)))


async def _append_from(store: CastStore, recs: list, start: int) -> None:
    for n in range(start, len(recs)):
        await store.append(CAST, n, [recs[n]])
        await asyncio.sleep(0.001)


async def test_seek_to_seq_num_starts_there(store: CastStore) -> None:
    recs = records()
    await store.append(CAST, 0, recs)
    page = await store.read(CAST, 17, limit=5)
    assert [e.seq_num for e in page] == [17, 18, 19, 20, 21]
    assert [e.record for e in page] == recs[17:22]
    assert await store.read(CAST, len(recs)) == []


async def test_follow_past_end_of_finished_log_ends_at_once(store: CastStore) -> None:
    recs = records()
    await store.append(CAST, 0, recs)
    got = [e async for e in store.follow(CAST, len(recs) + 3, block_ms=60_000)]
    assert got == []


async def test_follow_skips_unknown_kinds(store: CastStore, redis: Redis) -> None:
    recs = records()[:3]
    await store.append(CAST, 0, recs[:2])
    await redis.xadd(cast_key(CAST), {"e": "chapter", "h": '{"e":"chapter"}'}, id="0-3")
    await store.append(CAST, 3, [recs[2], Eos(sentences=1, audio_ms=100, attempts=1)])
    got = [e async for e in store.follow(CAST, block_ms=100)]
    assert [e.seq_num for e in got] == [0, 1, 3, 4]


async def test_read_all_pages_through_and_counts_unknown_kinds_in_the_tail(store: CastStore, redis: Redis) -> None:
    recs = records()
    await store.append(CAST, 0, recs[:10])
    await redis.xadd(cast_key(CAST), {"e": "chapter", "h": '{"e":"chapter"}'}, id="0-11")
    await redis.xadd(cast_key(CAST), {"e": "chapter", "h": '{"e":"chapter"}'}, id="0-12")
    entries, tail = await store.read_all(CAST, batch=3)
    assert [e.seq_num for e in entries] == list(range(10))
    assert tail == 12  # the next append goes after the records this version cannot read
    assert await store.read_all("nothingHere0") == ([], 0)
