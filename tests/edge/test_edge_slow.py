"""Slow and never-reading listeners: bounded queues, demotion to offset reads, resumption."""

from __future__ import annotations

import asyncio
import socket
import tracemalloc
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from redis.asyncio import Redis

from castlog import CastStore, Eos, Start
from edge.context import EDGE
from fanout.listener import Listener
from tests.edge.edge_helpers import Cast, audio_records, cast_id, dechunk, parse_sse, read_events
from tests.support.waiting import wait_until

QUEUE = 4


@pytest.mark.rule("slow-listener-demoted")
async def test_a_listener_that_stops_taking_is_demoted_and_catches_up_by_offset(
    make_edge: Any, store: CastStore
) -> None:
    edge = await make_edge(listener_queue=QUEUE)
    tail = edge.server.app[EDGE].tail
    cast = Cast(store, cast_id())
    await cast.submit(40)
    await cast.append(Start(attempt=1, resume_from=0, at=0))
    async with tail.listen(cast.id, 0, "sse") as listener:
        seqs = [(await listener.next(1)).seq for _ in range(2)]  # type: ignore[union-attr]
        await listener.next(0)  # nothing yet: it joins the live feed
        await wait_until(lambda: listener.subscribed)
        for record in audio_records([f"s{i}" for i in range(40)], body_bytes=10):
            await cast.append(record)
            await asyncio.sleep(0.002)
            assert len(listener.queue) <= QUEUE  # never more than its queue, however far behind
        await cast.append(Eos(sentences=40, audio_ms=1, attempts=1))
        await asyncio.sleep(0.05)
        assert listener.demotions >= 1 and not listener.subscribed
        while not listener.done:
            item = await listener.next(1)
            assert item is not None
            assert len(listener.backlog) <= QUEUE
            seqs.append(item.seq)
    assert seqs == list(range(cast.tail))
    metrics = await (await edge.get("/metrics")).text()
    assert "streamtts_edge_listeners_demoted_total 0.0" not in metrics


async def test_records_the_tail_delivered_during_the_join_are_read_by_offset_once(
    edge: TestClient[Any, Any], store: CastStore
) -> None:
    tail = edge.server.app[EDGE].tail
    cast = Cast(store, cast_id())
    await cast.submit(10)
    async with tail.listen(cast.id, 0, "sse") as early:
        assert (await early.next(1)) is not None  # meta
        await early.next(0)
        await wait_until(lambda: early.subscribed)
        late = Listener(tail, cast.id, 0)
        plain_read = late._read
        raced = False

        async def read_then_race(upto: int | None = None) -> int:
            nonlocal raced
            n = await plain_read(upto)
            if n == 0 and upto is None and not raced:
                raced = True  # it found the end; before it joins, the tail delivers two more
                await cast.append(Start(attempt=1, resume_from=0, at=0))
                await cast.append(*audio_records(["a"], body_bytes=5))
                await wait_until(lambda: tail.watches[cast.id].cursor == 2)
            return n

        late._read = read_then_race  # type: ignore[method-assign]
        got = []
        for _ in range(3):
            item = await late.next(2)
            assert item is not None
            got.append(item.seq)
        await cast.append(*audio_records(["b"], start_i=1, body_bytes=5))
        item = await late.next(2)
        assert raced and item is not None
        got.append(item.seq)
        assert got == [0, 1, 2, 3]
        assert await late.next(0) is None  # and nothing twice
        tail.unsubscribe(late)


@pytest.mark.rule("slow-listener-demoted")
async def test_a_client_that_never_reads_does_not_grow_edge_memory_and_can_resume(
    make_edge: Any, store: CastStore, redis: Redis
) -> None:
    # the record cache (rows and Items) is bounded on its own (EDGE_ROW_CACHE_BYTES): kept small, it stays
    # out of the count
    edge = await make_edge(listener_queue=QUEUE, write_timeout_s=1.0, row_cache_bytes=256 * 1024)
    tail = edge.server.app[EDGE].tail
    cast = Cast(store, cast_id())
    records = 120
    await cast.submit(records)
    await cast.append(Start(attempt=1, resume_from=0, at=0))
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a small window: the edge feels it
    sock.connect(("127.0.0.1", edge.port))
    sock.sendall(f"GET /api/casts/{cast.id}/events HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    await wait_until(lambda: cast.id in tail.watches)
    listener = next(iter(tail.listeners))
    tracemalloc.start()
    try:
        baseline = tracemalloc.get_traced_memory()[0]
        sent = 0
        for record in audio_records([f"s{i}" for i in range(records)], body_bytes=64 * 1024):
            await cast.append(record)
            sent += len(record.body)
            await asyncio.sleep(0.003)
            assert len(listener.queue) <= QUEUE and len(listener.backlog) <= QUEUE
        await cast.append(Eos(sentences=records, audio_ms=1, attempts=1))
        await asyncio.sleep(0.2)
        grown = tracemalloc.get_traced_memory()[0] - baseline
    finally:
        tracemalloc.stop()
    assert listener.demotions >= 1
    assert grown < sent / 4, (grown, sent)  # 7.5 MB of audio went by; the edge kept little of it
    # the stuck stream is closed after the write timeout, freeing its listener
    await wait_until(lambda: not tail.listeners, timeout_s=10)
    sock.setblocking(False)
    raw = b""
    loop = asyncio.get_running_loop()
    while True:
        chunk = await asyncio.wait_for(loop.sock_recv(sock, 1 << 20), 5)
        if not chunk:
            break
        raw += chunk
    sock.close()
    blocks = dechunk(raw).split(b"\n\n")[:-1]  # complete events only
    received = [e for e in (parse_sse(b.decode()) for b in blocks) if e is not None]
    assert received and len(received) < cast.tail
    last_id = received[-1].id
    assert [int(e.id or -1) for e in received] == list(range(int(last_id or 0) + 1))
    resumed = await read_events(await edge.get(f"/api/casts/{cast.id}/events", headers={"Last-Event-ID": str(last_id)}))
    assert [int(e.id or -1) for e in resumed] == list(range(int(last_id or 0) + 1, cast.tail))
