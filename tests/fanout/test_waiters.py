"""The shared tail's waiters (fanout/waiters.py): readers of streams that are not casts (edge's
durable streams) that only wait for an entry past an id, woken by the tail's one read."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from redis.asyncio import Redis

from castlog import LogReader
from fanout import Tail
from servicekit.metrics import TailCounters
from tests.support.waiting import wait_until

KEY = "ds/{waited}/log/waited"
BLOCK_MS = 30_000


@pytest.fixture
async def tail(redis: Redis, redis_url: str) -> AsyncIterator[Tail]:
    conn = Redis.from_url(redis_url, single_connection_client=True, socket_timeout=BLOCK_MS / 1000 + 10)
    tail = Tail(conn, redis, TailCounters(CollectorRegistry(), "test", ["sse"]), reader=LogReader(redis),
                wake="test", block_ms=BLOCK_MS)
    tail.start()
    yield tail
    await tail.stop()
    await conn.aclose()


async def test_a_waiter_wakes_on_an_entry_past_its_id_only(tail: Tail, redis: Redis) -> None:
    await redis.xadd(KEY, {"d": "a"}, id="5-1")
    behind = asyncio.ensure_future(tail.waiters.wait(KEY, "5-0", 60))
    assert await behind  # 5-1 lies past it
    waiting = asyncio.ensure_future(tail.waiters.wait(KEY, "5-1", 60))
    await wait_until(lambda: len(tail.waiters.keys.get(KEY, ())) == 1)
    assert not await tail.waiters.wait(KEY, "5-1", 0.05)  # nothing new: it times out
    await redis.xadd(KEY, {"d": "b"}, id="5-2")
    assert await waiting
    assert tail.waiters.keys == {}  # a woken waiter leaves the read


async def test_while_waiters_wait_a_read_takes_one_entry_per_stream(tail: Tail, redis: Redis) -> None:
    """A durable stream's entry may be a whole request body: the tail never pulls a batch of them."""
    replies: list[Any] = []
    xread = tail.stream.reads.xread

    async def seen(*args: Any, **kwargs: Any) -> Any:
        reply = await xread(*args, **kwargs)
        replies.append(reply)
        return reply

    tail.stream.reads.xread = seen  # type: ignore[method-assign]
    for n in range(1, 6):
        await redis.xadd(KEY, {"d": b"x" * 1000}, id=f"7-{n}")
    assert await tail.waiters.wait(KEY, "0-0", 60)
    rows = [rows for reply in replies for _, rows in (reply.items() if isinstance(reply, dict) else reply)]
    assert rows and all(len(r) == 1 for r in rows), [len(r) for r in rows]


async def test_the_tails_stop_wakes_every_waiter(tail: Tail, redis: Redis) -> None:
    await redis.xadd(KEY, {"d": "a"}, id="9-1")
    waits = [asyncio.ensure_future(tail.waiters.wait(KEY, "9-1", 60)) for _ in range(3)]
    await wait_until(lambda: len(tail.waiters.keys.get(KEY, ())) == 3)
    tail.close_listeners()
    assert await asyncio.gather(*waits) == [True] * 3
    assert await tail.waiters.wait(KEY, "9-1", 60)  # a later one at once: the reader answers what there is
