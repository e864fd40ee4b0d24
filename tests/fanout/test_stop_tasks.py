"""Stopping loops that block on Redis: one cancel is not always enough with redis-py (a
CancelledError landing while it handles an XREAD's reply can be swallowed, and the loop reads
on), so every stop goes through ``fanout.stop_tasks``, which cancels until the task ends."""

from __future__ import annotations

import asyncio
import random

from redis.asyncio import Redis
from redis.exceptions import RedisError

from fanout import stop_tasks

ROUNDS = 150  # about 1 in 100 single cancels is swallowed (measured): most runs meet one


async def _read_forever(redis: Redis) -> None:
    """A loop as synth's broadcasts loop is: short blocking reads on the pool, errors retried."""
    while True:
        try:
            await redis.xread({"cancels": "$"}, block=100, count=64)
        except RedisError:
            await asyncio.sleep(0.01)


async def test_every_reading_loop_ends_however_its_cancel_lands(redis: Redis) -> None:
    rng = random.Random(7)
    for _ in range(ROUNDS):
        task = asyncio.create_task(_read_forever(redis))
        await asyncio.sleep(rng.random() * 0.12)
        await asyncio.wait_for(stop_tasks(task, again_s=0.05), 30)  # (a hang fails, never a slow run)
        assert task.done()


async def test_ended_tasks_and_their_errors_are_taken_as_they_are() -> None:
    async def fails() -> None:
        raise ValueError("a loop's bug")

    failed = asyncio.create_task(fails())
    await asyncio.sleep(0)
    await stop_tasks(failed)  # already ended: its exception is retrieved, not raised
    assert isinstance(failed.exception(), ValueError)
