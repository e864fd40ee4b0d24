"""The LaneMover re-adds the key lanes' jobs to ``jobs`` in the order they arrived, whatever
lanes they lie in: a burst of submits is queued first come, first served (admission's order and
the places in line it notes follow ``jobs``). Entry ids are Redis's clock, and each lane counts
its own sequence within a millisecond: jobs of two lanes in the same millisecond may swap."""

from __future__ import annotations

import asyncio

import pytest
from redis.asyncio import Redis

from castlog import CastStore, Meta, content_id, keys
from castlog.lanes import LaneMover

VOICE = "af_heart"


@pytest.mark.rule("one-slot-per-step")
async def test_a_burst_over_many_lanes_is_moved_in_arrival_order(redis: Redis) -> None:
    store = CastStore(redis)
    ids = []
    for n in range(40):
        text = f"Burst number {n}."
        cid = content_id(text, VOICE)
        assert await store.submit(cid, text, VOICE, Meta(title="b", voice=VOICE, chars=len(text), sentences=1,
                                                          created_at=0)) == "new"
        ids.append(cid)
        await asyncio.sleep(0.002)  # a new millisecond: two lanes' jobs of one millisecond have no order
    assert len({keys.lane_of(c) for c in ids}) > 20  # spread over the lanes, as casts are
    mover = LaneMover(redis, "mover-1", lease_ms=60_000, single_redis=True)
    await mover.open()
    moved = 0
    while moved < len(ids):
        got = await mover.sweep(100)
        assert got, "every job is moved"
        moved += got
    queued = [fields[b"id"].decode() for _, fields in await redis.xrange(keys.JOBS)]
    assert queued == ids
    assert [await redis.xlen(stream) for stream, _ in mover.streams] == [0] * len(mover.streams)  # dropped
