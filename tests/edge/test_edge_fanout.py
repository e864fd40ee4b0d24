"""One shared tail: many listeners, one blocking XREAD, no gap or duplicate at the hand-over."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest
from aiohttp import ClientSession, TCPConnector
from aiohttp.test_utils import TestClient
from redis.asyncio import Redis

from castlog import CastStore, Eos, LogReader, Start, cast_key
from edge.app import TAIL_CLIENT_NAME
from edge.context import EDGE
from edge.metrics import EdgeMetrics
from edge.streaming import DirectSse
from fanout.listener import Listener
from fanout.tail import Tail, after_id
from tests.edge.edge_helpers import (
    Cast,
    audio_records,
    calls_between,
    cast_id,
    command_calls,
    read_events,
    xrange_public,
)

LISTENERS = 500
LIVE_RECORDS = 30
# Longer than any test: what runs on a timer runs outside the test's window.
HOUR_S = 3600
# The append script's own commands (and this test's CLIENT LIST): not the edge's.
APPEND_COMMANDS = {"cmdstat_evalsha", "cmdstat_eval", "cmdstat_xadd", "cmdstat_xlen", "cmdstat_time",
                   "cmdstat_client|list"}


async def blocked_xreads(redis: Redis) -> list[dict[str, Any]]:
    return [c for c in await redis.client_list() if c["cmd"] == "xread" and "b" in c["flags"]]


async def wait_for_listeners(edge: TestClient[Any, Any], cid: str, n: int, timeout_s: float = 30.0) -> None:
    tail = edge.server.app[EDGE].tail
    for _ in range(int(timeout_s / 0.02)):
        watch = tail.watches.get(cid)
        if watch is not None and len(watch.listeners) >= n:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"only {len(tail.watches.get(cid, set()) and tail.watches[cid].listeners)} listeners joined")


@pytest.mark.rule("one-upstream-tail")
async def test_500_listeners_each_get_every_record_in_order_from_one_blocked_xread(
    make_edge: Any, store: CastStore, redis: Redis
) -> None:
    # No block timeout, lease renewal of the 500 streams or flush of reads falls in the counted window,
    # however long a busy machine takes over it: every command counted is the records' own. A
    # connection per joining stream: none waits out the pool's wait (a 503) on a starved machine.
    edge = await make_edge(tail_block_ms=HOUR_S * 1000, stream_lease_s=HOUR_S, played_flush_s=HOUR_S,
                           redis_pool=LISTENERS)
    cid = cast_id()
    cast = Cast(store, cid)
    await cast.submit(LIVE_RECORDS)
    await cast.append(Start(attempt=1, resume_from=0, at=0))
    url = str(edge.make_url(f"/api/casts/{cid}/events"))
    async with ClientSession(connector=TCPConnector(limit=0)) as session:
        responses = await asyncio.gather(*(session.get(url) for _ in range(LISTENERS)))
        assert {r.status for r in responses} == {200}
        readers = [asyncio.create_task(read_events(r, timeout_s=90)) for r in responses]
        await wait_for_listeners(edge, cid, LISTENERS)
        blocked = await blocked_xreads(redis)
        assert len(blocked) == 1 and blocked[0]["name"] == TAIL_CLIENT_NAME
        before = await command_calls(redis)
        for k, record in enumerate(audio_records([f"s{i}" for i in range(LIVE_RECORDS)], body_bytes=200)):
            await cast.append(record)
            await asyncio.sleep(0.01)
            if k == LIVE_RECORDS // 2:
                assert len(await blocked_xreads(redis)) <= 1  # never one per listener
        await cast.append(Eos(sentences=LIVE_RECORDS, audio_ms=1, attempts=1))
        results = await asyncio.gather(*readers)
        after = await command_calls(redis)
    expected = await xrange_public(redis, cid)
    for events in results:
        assert [e.json() for e in events] == expected
    calls = calls_between(before, after)
    reads = {k: n for k, n in calls.items() if k not in APPEND_COMMANDS | {"cmdstat_zrem"}}
    # each append (to a log that is not empty) reads its predecessor's stamp: one XREVRANGE
    appends = LIVE_RECORDS + 1
    reads["cmdstat_xrevrange"] = reads.get("cmdstat_xrevrange", 0) - appends
    # Redis work for 31 records delivered 500 times: about one command per record, not thousands
    # (per read: the XREAD alone; its first record names the stamp of the one before, `p`, so
    # the cursor needs no check) and a few for the join's check
    assert 0 <= reads["cmdstat_xrevrange"] and sum(reads.values()) <= appends + 5, reads
    # the 500 streams that ended with the eos gave their seats back together, not one by one
    assert calls.get("cmdstat_zrem", 0) <= LISTENERS // 10, calls
    assert edge.server.app[EDGE].tail.watches == {}  # the watch ended with the eos


@pytest.mark.rule("tail-woken-by-own-stream")
async def test_a_cast_joining_wakes_the_blocked_xread_at_once(make_edge: Any, store: CastStore, redis: Redis) -> None:
    """By an XADD to the tail's own wake stream, which its blocked read includes: edge's Redis user
    holds no CLIENT UNBLOCK (which could end anyone's blocked read)."""
    edge = await make_edge(tail_block_ms=60_000)  # only the wake-up can end it in time
    unblocks = (await command_calls(redis)).get("cmdstat_client|unblock", 0)
    first, second = Cast(store, cast_id(1)), Cast(store, cast_id(2))
    await first.submit(1)
    await second.submit(1)
    one = await edge.get(f"/api/casts/{first.id}/events")
    await wait_for_listeners(edge, first.id, 1)
    await asyncio.sleep(0.1)  # the tail is now blocked on the first cast alone
    two = await edge.get(f"/api/casts/{second.id}/events")
    await wait_for_listeners(edge, second.id, 1)
    reader = asyncio.create_task(read_events(two, limit=2, timeout_s=3))
    await second.append(Start(attempt=1, resume_from=0, at=0))
    events = await reader  # would wait for the 60 s block without the wake-up
    assert [e.event for e in events] == ["meta", "start"]
    assert (await command_calls(redis)).get("cmdstat_client|unblock", 0) == unblocks
    assert [k async for k in redis.scan_iter("tail/wake/edge/*")]  # the wake stream, one entry
    one.close()
    two.close()


async def test_listeners_joining_during_appends_get_no_gap_and_no_duplicate(
    make_edge: Any, store: CastStore, redis: Redis
) -> None:
    edge = await make_edge(listener_queue=8)
    cid = cast_id()
    cast = Cast(store, cid)
    await cast.submit(200)
    tail = edge.server.app[EDGE].tail
    rng = random.Random(7)
    got: dict[int, list[int]] = {}
    starts: dict[int, int] = {}

    async def listen(n: int) -> None:
        await asyncio.sleep(rng.random() * 0.5)
        seqs = got.setdefault(n, [])
        starts[n] = rng.choice([0, 0, 5, 50])
        async with tail.listen(cid, starts[n], "sse") as listener:
            while not listener.done:
                item = await listener.next(5)
                assert item is not None
                seqs.append(item.seq)
                if rng.random() < 0.05:
                    await asyncio.sleep(0.01)  # now and then a slow one

    async def append() -> None:
        await cast.append(Start(attempt=1, resume_from=0, at=0))
        for record in audio_records([f"s{i}" for i in range(200)], body_bytes=50):
            await cast.append(record)
            await asyncio.sleep(0.002)
        await cast.append(Eos(sentences=200, audio_ms=1, attempts=1))

    tasks = [asyncio.create_task(listen(n)) for n in range(40)]
    await asyncio.gather(append(), *tasks)
    total = len(await redis.xrange(cast_key(cid)))
    assert len(got) == 40
    for n, seqs in got.items():
        assert seqs == list(range(starts[n], total)), n  # from where it asked: none skipped at the start


async def test_the_tail_reconnects_after_its_connection_is_killed_and_loses_nothing(
    edge: TestClient[Any, Any], store: CastStore, redis: Redis
) -> None:
    cast = Cast(store, cast_id())
    await cast.submit(6)
    resp = await edge.get(f"/api/casts/{cast.id}/events")
    reader = asyncio.create_task(read_events(resp, timeout_s=20))
    await wait_for_listeners(edge, cast.id, 1)
    await asyncio.sleep(0.05)
    await cast.append(Start(attempt=1, resume_from=0, at=0))
    await asyncio.sleep(0.05)
    assert await redis.execute_command("CLIENT", "KILL", "USER", "default", "SKIPME", "yes") >= 1
    records = audio_records([f"s{i}" for i in range(6)], body_bytes=20)
    await cast.append(*records[:3])  # appended while the tail has no connection
    for _ in range(200):
        if len(await blocked_xreads(redis)) == 1:
            break
        await asyncio.sleep(0.02)
    await cast.append(*records[3:])
    await cast.append(Eos(sentences=6, audio_ms=1, attempts=1))
    events = await reader
    assert [e.json() for e in events] == await xrange_public(redis, cast.id)


async def test_a_read_in_flight_when_a_watch_is_re_created_lower_leaves_no_gap(
    store: CastStore, redis: Redis
) -> None:
    """Its last listener leaves during the tail's read and a listener whose offset read ended
    earlier joins: the read's rows start after the old watch's cursor, not the new one's."""
    tail = Tail(redis, redis, EdgeMetrics().tail, block_ms=100, batch=100, queue_size=16,
                reader=LogReader(redis), wake="test")  # driven by hand
    cast = Cast(store, cast_id())
    await cast.submit(3)
    await cast.append(Start(attempt=1, resume_from=0, at=0))  # seqs 0, 1

    async def rows_after(seq: int) -> list[Any]:
        return [(cast.id, await redis.xrange(cast_key(cast.id), min=f"({after_id(seq)}"))]  # as _read gives them

    leaving = Listener(tail, cast.id, 2)
    tail.subscribe(leaving)
    late = Listener(tail, cast.id, 2)
    plain_read = late._read

    async def stale_read(upto: int | None = None) -> int:
        return 0  # its XRANGE ran before seq 2 was appended

    late._read = stale_read  # type: ignore[method-assign]
    await cast.append(*audio_records(["a", "b"], body_bytes=5))  # seqs 2, 3
    tail._fan_out(await rows_after(1), dict(tail.watches))  # the old watch: cursor 3
    in_flight = dict(tail.watches)  # the next read is issued after seq 3 ...
    tail.unsubscribe(leaving)  # ... its listener leaves ...
    assert await late.next(0) is None  # ... and the late one joins at its own position: 1
    late._read = plain_read  # type: ignore[method-assign]
    await cast.append(*audio_records(["c"], start_i=2, body_bytes=5))  # seq 4
    tail._fan_out(await rows_after(3), in_flight)  # the read in flight answers
    tail._fan_out(await rows_after(tail.watches[cast.id].cursor), dict(tail.watches))  # the next read
    got = []
    while (item := await late.next(0)) is not None:
        got.append(item.seq)
    assert got == [2, 3, 4]


async def test_each_wait_ends_at_its_own_timeout_whatever_the_waits_before_it(
    edge: TestClient[Any, Any], store: CastStore
) -> None:
    """A listener's timeouts share one alarm, moved on lazily: a wait that began after an
    earlier, shorter wait is not cut short by that wait's alarm, and a short wait after a long
    one still ends on time."""
    tail = edge.server.app[EDGE].tail
    cast = Cast(store, cast_id())
    await cast.submit(2)
    async with tail.listen(cast.id, 0, "sse") as listener:
        assert (await listener.next(1)) is not None  # meta, by offset
        assert await listener.next(0) is None and listener.subscribed  # at the end: it joined
        first = asyncio.create_task(listener.next(1.0))
        await cast.append(Start(attempt=1, resume_from=0, at=0))
        assert (await first) is not None  # the record came first; that wait's alarm stays set
        second = asyncio.create_task(listener.next(30))
        await asyncio.sleep(1.5)  # the first wait's alarm rings meanwhile: it must not end this one
        assert not second.done()
        await cast.append(*audio_records(["a"], body_bytes=5))
        assert (await second) is not None
        assert await asyncio.wait_for(listener.next(0.1), 10) is None  # not the 30 s alarm


async def test_records_of_one_read_go_to_an_idle_sse_client_in_one_write(
    edge: TestClient[Any, Any], store: CastStore, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The tail writes straight to an idle SSE client's transport: no queue, no wake-up of the
    handler, the records of one XREAD joined into one write."""
    writes: list[list[int]] = []
    real = DirectSse.write

    def counted(self: DirectSse, items: list[Any]) -> None:
        writes.append([i.seq for i in items])
        real(self, items)

    monkeypatch.setattr(DirectSse, "write", counted)
    cast = Cast(store, cast_id())
    await cast.submit(5)
    resp = await edge.get(f"/api/casts/{cast.id}/events")
    await wait_for_listeners(edge, cast.id, 1)
    await asyncio.sleep(0.1)  # caught up and waiting
    reader = asyncio.create_task(read_events(resp, timeout_s=10))
    records = audio_records([f"s{i}" for i in range(5)], body_bytes=20)
    await cast.append(Start(attempt=1, resume_from=0, at=0), *records)
    await cast.append(Eos(sentences=5, audio_ms=1500, attempts=1))
    events = await reader
    assert [e.event for e in events] == ["meta", "start"] + ["audio"] * 5 + ["eos"]
    assert [int(e.id or -1) for e in events] == list(range(8))
    assert writes[0] == [1, 2, 3, 4, 5, 6] and writes[-1] == [7]  # one write per XREAD
