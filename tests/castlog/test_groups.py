"""castlog's one consumer shape (groups.py): own pending entries first, then entries idle past
the lease, then new ones; nothing leaves the pending list but an acknowledgement."""

from __future__ import annotations

from typing import Any

import pytest
from redis.asyncio import Redis

from castlog import Consumer
from castlog.groups import ensure_group

STREAM, GROUP = "test/jobs", "workers"
LEASE_MS = 60_000


def consumer(redis: Redis, name: str, lease_ms: int = LEASE_MS) -> Consumer:
    return Consumer(redis, GROUP, name, STREAM, lease_ms=lease_ms)


async def add(redis: Redis, n: int) -> list[str]:
    return [(await redis.xadd(STREAM, {"n": str(k)})).decode() for k in range(n)]


async def owners(redis: Redis) -> dict[str, str]:
    rows: Any = await redis.xpending_range(STREAM, GROUP, min="-", max="+", count=100)
    return {r["message_id"].decode(): r["consumer"].decode() for r in rows}


async def test_the_group_is_made_once_with_its_stream(redis: Redis) -> None:
    await ensure_group(redis, STREAM, GROUP)
    await ensure_group(redis, [STREAM, "test/other"], GROUP)  # exists on the first: no error
    assert [g["name"] for g in await redis.xinfo_groups(STREAM)] == [GROUP.encode()]
    assert await redis.exists(STREAM, "test/other") == 2


async def test_a_restart_takes_its_own_pending_first_until_acknowledged_then_new(redis: Redis) -> None:
    ids = await add(redis, 3)
    await consumer(redis, "w1").create()
    assert [e.id for e in await consumer(redis, "w1").new(2)] == ids[:2]  # then it died
    restarted = consumer(redis, "w1")
    first = await restarted.take(10)
    assert [e.id for e in first] == ids[:2]
    assert [e.id for e in await restarted.take(10)] == ids[:2]  # not acknowledged: round again
    await restarted.ack(first)
    assert [(e.id, e.fields, e.stream) for e in await restarted.take(10)] == [(ids[2], {b"n": b"2"}, STREAM)]
    assert await owners(redis) == {ids[2]: "w1"}


@pytest.mark.rule("pending-taken-over")
async def test_claims_go_on_from_their_cursor_past_live_entries(redis: Redis) -> None:
    ids = await add(redis, 25)
    await consumer(redis, "live").create()
    await consumer(redis, "live").new(20)
    await consumer(redis, "dead").new(5)
    # the dead consumer's entries idle for ten minutes (XCLAIM's IDLE: no waiting in the test)
    await redis.xclaim(STREAM, GROUP, "dead", 0, ids[20:], idle=600_000, justid=True)
    heir = consumer(redis, "heir")
    assert await heir.claim(1) == []  # one XAUTOCLAIM scans ten entries: all live
    assert [e.id for e in await heir.claim(1, scans=3)] == ids[20:21]  # goes on past them
    assert [e.id for e in await heir.claim(3, scans=3, skip={ids[21]})] == ids[22:25]
    assert await owners(redis) == {**{i: "live" for i in ids[:20]}, **{i: "heir" for i in ids[20:]}}


async def test_a_pending_entry_deleted_from_the_stream_is_acknowledged(redis: Redis) -> None:
    ids = await add(redis, 2)
    await consumer(redis, "w1").create()
    await consumer(redis, "w1").new(2)
    await redis.xdel(STREAM, ids[0])
    assert [e.id for e in await consumer(redis, "w1").own(10)] == ids[1:]
    assert await owners(redis) == {ids[1]: "w1"}


async def test_an_acknowledged_transit_is_dropped_and_several_streams_read_apart(redis: Redis) -> None:
    streams = [STREAM, "test/other"]
    both = Consumer(redis, GROUP, "mover", streams, lease_ms=LEASE_MS, one_read=False)
    await both.create()
    for stream in streams:
        await redis.xadd(stream, {"s": stream})
    got = await both.new(10)
    assert sorted(e.stream for e in got) == sorted(streams)
    await both.ack(got, drop=True)
    assert [await redis.xlen(s) for s in streams] == [0, 0] and await owners(redis) == {}
