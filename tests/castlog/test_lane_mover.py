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


async def submit_in_turn(redis: Redis, n: int, word: str) -> list[str]:
    """``n`` casts submitted one after another, each in a millisecond of its own (two lanes' jobs
    of one millisecond have no order): their ids, in arrival order."""
    store, ids = CastStore(redis), []
    for k in range(n):
        text = f"{word} number {k}."
        cid = content_id(text, VOICE)
        meta = Meta(title=word, voice=VOICE, chars=len(text), sentences=1, created_at=0)
        assert await store.submit(cid, text, VOICE, meta) == "new"
        ids.append(cid)
        await asyncio.sleep(0.002)
    return ids


async def queued_ids(redis: Redis) -> list[str]:
    return [fields[b"id"].decode() for _, fields in await redis.xrange(keys.JOBS)]


@pytest.mark.rule("one-slot-per-step")
async def test_a_burst_over_many_lanes_is_moved_in_arrival_order(redis: Redis) -> None:
    ids = await submit_in_turn(redis, 40, "Burst")
    assert len({keys.lane_of(c) for c in ids}) > 20  # spread over the lanes, as casts are
    mover = LaneMover(redis, "mover-1", lease_ms=60_000, single_redis=True)
    await mover.open()
    moved = 0
    while moved < len(ids):
        got = await mover.sweep(100)
        assert got, "every job is moved"
        moved += got
    assert await queued_ids(redis) == ids
    assert [await redis.xlen(stream) for stream in mover.group.streams] == [0] * 2 * keys.LANES  # dropped


@pytest.mark.rule("one-slot-per-step")
async def test_a_dead_movers_jobs_are_moved_once_by_the_pending_sweep(redis: Redis) -> None:
    ids = await submit_in_turn(redis, 6, "Orphan")
    dead = LaneMover(redis, "mover-dead", lease_ms=0, single_redis=True)
    await dead.open()
    # it read every lane, then died before moving: the entries wait in its pending list
    await redis.xreadgroup(keys.LANE_GROUP, "mover-dead", {s: ">" for s in dead.group.streams}, count=100)
    assert await redis.xlen(keys.JOBS) == 0
    # a restarted mover of the same name finds its own entries AND claims them (idle past lease 0)
    again = LaneMover(redis, "mover-dead", lease_ms=0, single_redis=True)
    await again.open()
    assert await again.sweep(10, pending=True) == len(ids)
    assert await queued_ids(redis) == ids  # each once, in arrival order
    assert [await redis.xlen(stream) for stream in again.group.streams] == [0] * 2 * keys.LANES
