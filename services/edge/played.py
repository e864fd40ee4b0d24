"""Which casts were read lately, for retention: kept in memory, flushed in one command a minute.

A read of any cast marks it here (a set add, no Redis call); the flush writes every mark since
the last one into the sorted set ``archive/played`` (cast id -> ms of the flush) with one ZADD.
"""

from __future__ import annotations

import asyncio
import logging

from redis.asyncio import Redis
from redis.exceptions import RedisError

from castlog import now_ms
from castlog.archive import PLAYED

log = logging.getLogger(__name__)

# Marks kept between flushes at most; beyond it a flush is due at once (memory stays bounded).
MAX_MARKS = 100_000


class Played:
    def __init__(self, redis: Redis, flush_s: float) -> None:
        self.redis, self.flush_s = redis, flush_s
        self.marks: set[str] = set()
        self._full = asyncio.Event()

    def mark(self, cast_id: str) -> None:
        self.marks.add(cast_id)
        if len(self.marks) >= MAX_MARKS:
            self._full.set()

    async def flush(self) -> None:
        marks, self.marks = self.marks, set()
        self._full.clear()
        if not marks:
            return
        now = now_ms()
        try:
            await self.redis.zadd(PLAYED, dict.fromkeys(marks, now))
        except RedisError as exc:  # keep them for the next flush
            self.marks |= marks
            log.warning("could not record played casts (%s); retrying at the next flush", exc)

    async def flush_forever(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self._full.wait(), self.flush_s)
            except asyncio.TimeoutError:
                pass
            await self.flush()
