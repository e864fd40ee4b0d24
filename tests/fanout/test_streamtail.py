"""A process's one stream loop (fanout/streamtail.py): its subscribers share one blocked read, each
takes its own keys' rows, and what a failed take held comes again."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis
from redis.exceptions import RedisError

from castlog.keys import Rows
from fanout import StreamTail, Subscriber
from tests.support.waiting import wait_until

BLOCK_MS = 60_000  # only a wake-up or an entry can end a read within a test


class Keys(Subscriber):
    """Follows its keys from their start; its first ``failures`` takes fail as Redis would."""

    def __init__(self, *keys: str, count: int, failures: int = 0) -> None:
        self.after = dict.fromkeys(keys, "0-0")
        self.count, self.failures, self.failed_takes = count, failures, 0
        self.taken: list[tuple[str, int]] = []  # (key, rows) per take, as they came

    async def streams(self) -> dict[str, str]:
        return dict(self.after)

    async def take(self, got: dict[str, Rows], idle: list[str]) -> None:
        if got and self.failures:
            self.failures -= 1
            raise RedisError("connection lost")
        for key, rows in got.items():
            self.taken.append((key, len(rows)))
            self.after[key] = rows[-1][0].decode()

    def read_failed(self) -> None:
        self.failed_takes += 1


@pytest.fixture
async def conn(redis_url: str) -> AsyncIterator[Redis]:
    conn = Redis.from_url(redis_url, single_connection_client=True, client_name="streamtail-test")
    yield conn
    await conn.aclose()


async def blocked_reads(redis: Redis) -> list[str]:
    return [c["name"] for c in await redis.client_list() if c["cmd"] == "xread" and "b" in c["flags"]]


async def test_subscribers_share_one_read_and_each_takes_only_its_keys(redis: Redis, conn: Redis) -> None:
    for n in range(3):
        await redis.xadd("s/a", {"n": n})
        await redis.xadd("s/b", {"n": n})
    batched, single = Keys("s/a", count=100), Keys("s/b", count=1)
    loop = StreamTail(conn, redis, "test", batched, block_ms=BLOCK_MS, name="test loop")
    loop.start()
    try:
        await wait_until(lambda: batched.taken)
        assert batched.taken == [("s/a", 3)]  # alone, a read takes as many as it asks for
        loop.subscribers.append(single)
        loop.wake()  # a subscriber joined: the read in flight ends, and the next names its key
        await wait_until(lambda: len(single.taken) == 3)
        # XREAD's COUNT is one for every key: the least that a subscriber with keys asks for
        assert single.taken == [("s/b", 1)] * 3
        await redis.xadd("s/a", {"n": 3})
        await wait_until(lambda: len(batched.taken) == 2)
        assert batched.taken[1] == ("s/a", 1)  # none of s/b's rows, and s/a's only once
        await wait_until(lambda: blocked_reads(redis))
        assert await blocked_reads(redis) == ["streamtail-test"]  # one read for both, its connection kept
    finally:
        await loop.stop()
    assert not loop.running


async def test_what_a_failed_take_held_comes_again(redis: Redis, conn: Redis) -> None:
    flaky = Keys("s/c", count=10, failures=1)
    loop = StreamTail(conn, redis, "test", flaky, block_ms=BLOCK_MS, name="test loop")
    await redis.xadd("s/c", {"n": 1})
    loop.start()
    try:
        await wait_until(lambda: flaky.taken, timeout_s=10)
        assert flaky.failed_takes == 1 and flaky.taken == [("s/c", 1)]  # read again after the backoff
    finally:
        await loop.stop()
