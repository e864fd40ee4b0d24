"""Caps on open seats per client, shared by every process, with leases that lapse when a
holder dies."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from redis.asyncio import Redis

from castlog.slots import SeatLimiter
from tests.support.waiting import wait_until


async def test_a_client_gets_its_cap_of_slots_and_no_more(redis: Redis) -> None:
    seats = SeatLimiter(redis, "streams", cap=3)
    taken = [await seats.acquire("1.2.3.4") for _ in range(3)]
    assert [held for _, held in taken] == [1, 2, 3] and all(seat for seat, _ in taken)
    assert await seats.acquire("1.2.3.4") == (None, 3)
    other, held = await seats.acquire("5.6.7.8")  # another client counts alone
    assert other is not None and held == 1


async def test_processes_sharing_a_scope_share_the_cap(redis: Redis) -> None:
    replica_a, replica_b = SeatLimiter(redis, "streams", cap=2), SeatLimiter(redis, "streams", cap=2)
    first, _ = await replica_a.acquire("1.2.3.4")
    second, _ = await replica_b.acquire("1.2.3.4")
    assert first is not None and second is not None and first.member != second.member
    assert (await replica_a.acquire("1.2.3.4"))[0] is None
    assert (await replica_b.acquire("1.2.3.4"))[0] is None
    await replica_b.release(second)
    again, held = await replica_a.acquire("1.2.3.4")
    assert again is not None and held == 2


async def test_release_gives_back_many_slots_of_many_clients_at_once(redis: Redis) -> None:
    seats = SeatLimiter(redis, "streams", cap=5)
    taken = []
    for client in ("a", "b"):
        for _ in range(4):
            seat, _held = await seats.acquire(client)
            assert seat is not None
            taken.append(seat)
    await seats.release(*taken[1:])
    assert await redis.zcard(seats.key("a")) == 1 and not await redis.exists(seats.key("b"))


async def test_slots_of_a_holder_that_stopped_renewing_lapse_and_renewed_ones_stand(redis: Redis) -> None:
    alive, dead = SeatLimiter(redis, "streams", cap=2, lease_s=2.0), SeatLimiter(redis, "streams", cap=2, lease_s=2.0)
    kept, _ = await alive.acquire("1.2.3.4")
    lost, _ = await dead.acquire("1.2.3.4")
    assert kept is not None and lost is not None
    assert (await alive.acquire("1.2.3.4"))[0] is None  # at the cap
    for _ in range(6):  # 2.4 s: past the dead holder's lease, the live one renews every 0.4 s
        await asyncio.sleep(0.4)
        assert await alive.renew([kept]) == 1
    fresh, held = await alive.acquire("1.2.3.4")
    assert fresh is not None and held == 2  # the lapsed seat was dropped, the renewed one stood
    assert await redis.pttl(alive.key("1.2.3.4")) > 0  # the set itself expires with its leases


async def test_renewing_a_released_slot_does_not_bring_it_back(redis: Redis) -> None:
    seats = SeatLimiter(redis, "streams", cap=2)
    seat, _ = await seats.acquire("1.2.3.4")
    assert seat is not None
    await seats.release(seat)
    assert await seats.renew([seat]) == 0
    assert await redis.zcard(seats.key("1.2.3.4")) == 0


async def test_the_holder_renews_the_slots_it_holds_and_not_those_it_gave_back(redis: Redis) -> None:
    """One holder per process: what it took is held and renewed by its one task; what it gave
    back is forgotten; another holder's seats that nobody renews lapse meanwhile."""
    alive, dead = SeatLimiter(redis, "streams", cap=3, lease_s=1.5), SeatLimiter(redis, "streams", cap=3, lease_s=1.5)
    kept, _ = await alive.acquire("1.2.3.4")
    given, _ = await alive.acquire("1.2.3.4")
    lost, _ = await dead.acquire("1.2.3.4")
    assert kept is not None and given is not None and lost is not None
    await alive.release(given, None)
    await alive.release(given)  # once given back, nothing more to give
    assert list(alive.held) == [kept] and await redis.zscore(alive.key("1.2.3.4"), given.member) is None
    lost_until = await redis.zscore(alive.key("1.2.3.4"), lost.member)
    assert lost_until is not None

    async def the_lost_lapsed_and_the_kept_stands() -> bool:
        seconds, micros = await redis.time()
        now = seconds * 1000 + micros // 1000
        kept_until = await redis.zscore(alive.key("1.2.3.4"), kept.member)
        return now > lost_until and kept_until is not None and kept_until > now

    renewing = asyncio.ensure_future(alive.renew_forever())
    try:
        await wait_until(the_lost_lapsed_and_the_kept_stands, timeout_s=10)
    finally:
        renewing.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await renewing
    assert [held for _, held in [await dead.acquire("1.2.3.4") for _ in range(2)]] == [2, 3]


def test_a_slot_limit_needs_a_cap_and_a_lease(redis: Redis) -> None:
    with pytest.raises(ValueError):
        SeatLimiter(redis, "streams", cap=0)
    with pytest.raises(ValueError):
        SeatLimiter(redis, "streams", cap=1, lease_s=0)
