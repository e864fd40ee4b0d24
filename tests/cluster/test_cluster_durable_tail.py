"""The shared tail's waiters for Durable Streams (``/v1/stream/*`` long polls and SSE: edge's) on a
real Redis Cluster: one blocked read per hash slot with waiters (castlog's slotreads.py), each
waiter woken by an entry past its offset, whatever slot its stream's log lies in."""

from __future__ import annotations

import asyncio

from redis.asyncio import Redis
from redis.crc import key_slot

from castlog import LogReader
from durablestreams.streams import log_key
from edge.metrics import EdgeMetrics
from fanout import SlotReads, Tail
from servicekit import connect
from tests.support.cluster import Cluster
from tests.support.waiting import wait_until

BLOCK_MS = 30_000
STREAMS = 6


async def test_waiters_on_streams_in_many_slots_are_woken_through_one_read_per_slot(redis_cluster: Cluster) -> None:
    redis_cluster.flushall()
    pool = await connect(redis_cluster.url)
    conn = Redis.from_url(redis_cluster.url, single_connection_client=True, socket_timeout=BLOCK_MS / 1000 + 10)
    tail = Tail(conn, pool, EdgeMetrics().tail, reader=LogReader(pool), wake="test", block_ms=BLOCK_MS)
    tail.start()
    try:
        paths = [f"cluster/waiters/{n}" for n in range(STREAMS)]
        assert len({key_slot(log_key(p).encode()) for p in paths}) == STREAMS  # one slot each
        for path in paths:
            await pool.xadd(log_key(path), {"d": "first"}, id="1-1")
        waits = [asyncio.ensure_future(tail.waiters.wait(log_key(p), "1-1", 60)) for p in paths for _ in range(3)]
        assert isinstance(tail.stream.reads, SlotReads)
        blocking = tail.stream.reads
        await wait_until(lambda: blocking.blocked == STREAMS)  # per slot, not per waiter (18)
        assert not any(w.done() for w in waits)
        for path in paths:
            await pool.xadd(log_key(path), {"d": "second"}, id="1-2")
        assert await asyncio.gather(*waits) == [True] * len(waits)
    finally:
        await tail.stop()
        await conn.aclose()
        await pool.aclose()
