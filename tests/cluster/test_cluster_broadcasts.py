"""synth's broadcasts on a cluster: ``cancels`` and ``deletes`` lie in two slots, so no one XREAD
spans both; each still reaches its handler, in order, from the newest entry when the loop began."""

from __future__ import annotations

import asyncio

from redis.asyncio import Redis

from castlog import CANCELS, DELETES
from castlog.keys import Fields
from fanout import stop_tasks
from servicekit import connect
from synth.broadcasts import BroadcastHandler, CancelHandler, DeleteHandler, stream_loop
from tests.support.cluster import Cluster
from tests.support.waiting import wait_until


class Heard(BroadcastHandler):
    """Records the ids it reads (as CancelHandler and DeleteHandler read theirs)."""

    def __init__(self, of: type[BroadcastHandler], redis: Redis) -> None:
        self.stream, self.redis, self.ids = of.stream, redis, list[str]()

    async def handle(self, fields: Fields) -> None:
        self.ids.append(fields[b"id"].decode())


async def test_both_streams_are_heard_though_they_lie_in_two_slots(redis_cluster: Cluster) -> None:
    redis_cluster.flushall()
    redis = await connect(redis_cluster.url)
    cancels, deletes = Heard(CancelHandler, redis), Heard(DeleteHandler, redis)
    try:
        assert redis.keyslot(CANCELS) != redis.keyslot(DELETES)  # type: ignore[attr-defined]
        await redis.xadd(CANCELS, {"id": "before"})  # from before the loop: not heard
        task = asyncio.create_task(stream_loop(redis, 0.05, cancels, deletes).run())
        await wait_until(lambda: cancels.after is not None and deletes.after is not None)
        for i in range(3):
            await redis.xadd(CANCELS, {"id": f"c{i}"})
            await redis.xadd(DELETES, {"id": f"d{i}"})
        await wait_until(lambda: len(cancels.ids) == 3 and len(deletes.ids) == 3)
        assert (cancels.ids, deletes.ids) == (["c0", "c1", "c2"], ["d0", "d1", "d2"])
        await stop_tasks(task)
    finally:
        await redis.aclose()
