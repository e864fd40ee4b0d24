"""Cancels heard at once: one blocking read of ``cancels`` for the whole worker.

A cancelled cast this worker holds drops every chunk not yet appended (``ActiveCast.cancel``)
and ends at once with ``eos`` marked cancelled, so the audio stops with what is in the log: the
chunk in hand finishes on the model thread and is thrown away. When an append is on its way to
Redis, the lane ends the cast right after it. A cast not held here is some other worker's, or
still queued: admission reads its ``cancel/<id>`` flag.
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
            dropped = cast.in_flight
            cast.cancel()
            log.info("cast %s: cancelled, %d chunk(s) in flight dropped", cast_id, dropped)
            if not cast.appending and cast.complete:  # else the lane ends it after that append
                await self.outcomes.finish(cast)
        held.work.set()
