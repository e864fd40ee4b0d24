"""Cancels heard at once: one blocking read of ``cancels`` for the whole worker.

A cancelled cast this worker holds drops the chunks it has not taken (``ActiveCast.cancel``):
the chunk in hand is appended and the cast ends there, with ``eos`` marked cancelled; a cast
with nothing in hand (an open cast waiting for text) ends at once. A cast not held here is
some other worker's, or still queued: admission reads its ``cancel/<id>`` flag.
"""

from __future__ import annotations

import asyncio
import logging

from redis.exceptions import RedisError

from castlog import last_cancel, read_cancels

from .crew import Crew
from .outcomes import Outcomes

log = logging.getLogger(__name__)

# Cancels read per round trip.
CANCEL_BATCH = 64


class CancelWatch:
    def __init__(self, crew: Crew, outcomes: Outcomes) -> None:
        self.crew, self.outcomes = crew, outcomes

    async def run(self) -> None:
        crew = self.crew
        after: str | None = None
        while True:
            try:
                if after is None:
                    after = await last_cancel(crew.redis)  # what was cancelled before now: admission's
                after, cast_ids = await read_cancels(
                    crew.redis, after, block_ms=max(1, int(crew.cfg.poll_s * 1000)), count=CANCEL_BATCH
                )
                for cast_id in cast_ids:
                    await self.cancel(cast_id)
            except RedisError as exc:
                log.warning("cancel watch: Redis error (%s); retrying", exc)
                await asyncio.sleep(crew.cfg.poll_s)

    async def cancel(self, cast_id: str) -> None:
        held = self.crew.held
        for cast in [c for c in held.casts.values() if c.cast_id == cast_id and not c.closed and not c.cancelled]:
            cast.cancel()
            log.info("cast %s: cancelled with %d chunk(s) in hand", cast_id, cast.in_flight)
            if cast.in_flight == 0 and cast.complete:
                await self.outcomes.finish(cast)
        held.work.set()
