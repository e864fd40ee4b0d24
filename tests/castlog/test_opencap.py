"""The per-client cap on open casts (#21), counted in the client's slot apart from the open
script (castlog/opencap.py): exact under concurrent opens, freed by a close, a refused or failed
open holds no place, and the open script itself touches only its cast's key lane."""

from __future__ import annotations

import asyncio

import pytest
from redis.asyncio import Redis

from castlog import LiveStore, Meta, RateLimiter, TooManyOpen, cast_key, catalog_key
from castlog.opencap import RESERVE_GRACE_MS, OpenCap, open_set_key

CLIENT = "203.0.113.7"
META = Meta(title="live", voice="af_heart", chars=0, sentences=0, created_at=0, live=True)


@pytest.fixture
def live(redis: Redis) -> LiveStore:
    return LiveStore(redis)


def limit(redis: Redis) -> tuple[RateLimiter, str]:
    return RateLimiter(redis, "intake", rate=1000, burst=1000), CLIENT


async def open_or_refused(live: LiveStore, redis: Redis) -> str | None:
    try:
        return (await live.open("af_heart", META, limit=limit(redis), max_open=3)).cast_id
    except TooManyOpen:
        return None


@pytest.mark.rule("open-cap-own-slot")
async def test_concurrent_opens_of_one_client_hold_exactly_the_cap(live: LiveStore, redis: Redis) -> None:
    opened = await asyncio.gather(*(open_or_refused(live, redis) for _ in range(20)))
    ids = [c for c in opened if c is not None]
    assert len(ids) == 3 and opened.count(None) == 17
    assert sorted(m.decode() for m in await redis.zrange(open_set_key(CLIENT), 0, -1)) == sorted(ids)
    # the refused opens wrote nothing in any key lane
    assert {k.decode() for k in await redis.keys("pub/casts/*")} == {cast_key(c) for c in ids}


@pytest.mark.rule("open-cap-own-slot")
async def test_a_closed_or_deleted_cast_frees_its_place(live: LiveStore, redis: Redis) -> None:
    first, second, third = [await open_or_refused(live, redis) for _ in range(3)]
    assert first and second and third and await open_or_refused(live, redis) is None
    assert (await live.close_text(first, "af_heart"))[0] == "ok"  # nothing to release: the next count sees it
    fourth = await open_or_refused(live, redis)
    assert fourth is not None and await open_or_refused(live, redis) is None
    await redis.delete(cast_key(second), catalog_key(second))  # gone, and long reserved
    await redis.zadd(open_set_key(CLIENT), {second: 1})
    assert await open_or_refused(live, redis) is not None


async def test_an_open_under_way_is_not_taken_for_gone(redis: Redis) -> None:
    """A reserved id whose catalog is not written yet still counts, until RESERVE_GRACE_MS."""
    cap = OpenCap(redis)
    assert await cap.reserve(CLIENT, "AAAAAAAAAAAA", 1)  # no catalog yet: its open is on its way
    assert not await cap.reserve(CLIENT, "BBBBBBBBBBBB", 1)
    await redis.zadd(open_set_key(CLIENT), {"AAAAAAAAAAAA": 1})  # reserved long ago, never opened
    assert RESERVE_GRACE_MS < 10**12 and await cap.reserve(CLIENT, "BBBBBBBBBBBB", 1)


async def test_an_open_that_does_not_happen_gives_its_place_back(
    live: LiveStore, redis: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    taken = (await live.open("af_heart", META)).cast_id  # not capped: holds no place
    monkeypatch.setattr("castlog.live.open_cast_id", lambda: taken)  # every try collides: 'taken'
    with pytest.raises(RuntimeError, match="no free cast id"):
        await live.open("af_heart", META, limit=limit(redis), max_open=3)
    assert await redis.zcard(open_set_key(CLIENT)) == 0
