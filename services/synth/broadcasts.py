"""What every worker hears at once: the broadcast streams ``cancels`` and ``deletes``, followed by
one loop with one blocking read, and a handler per stream.

On a single Redis both streams are in one ``XREAD BLOCK`` (SYNTH_POLL_S at most); on a cluster,
where they lie in two slots and no read spans two, the read blocks on ``cancels`` (a cancel must
stop the audio at once) and ``deletes`` is read right after it, so at most SYNTH_POLL_S late.
Each stream is read from its newest entry when the watch begins: a cancel from before is
admission's (the ``cancel/<id>`` flag), a delete from before was answered 202 (ask again), and an
old delete is never carried out late, after the cast was made again. A stream's batch counts as
read only once it is handled: one that a Redis error cut short is read again (both are idempotent).

*Cancels*: a cancelled cast this worker holds drops every chunk not yet appended
(``ActiveCast.cancel``) and ends at once with ``eos`` marked cancelled, so the audio stops with
what is in the log: the chunk in hand finishes on the model thread and is thrown away. When an
append is on its way to Redis, the lane ends the cast right after it. A cast not held here is some
other worker's, or still queued: admission reads its ``cancel/<id>`` flag.

*Deletes*: intake checks the admin token and adds a request; its Redis user cannot delete a cast
itself. Here a request is carried out only when its proof is the admin token's
(``castlog.proven``: STREAMTTS_ADMIN_TOKEN, the same as intake's), so a request added without the
token (a flaw in the public service, anyone else who may add to the stream) deletes nothing and is
logged. Every worker carries out each request; the delete is idempotent, so the cast goes once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError

from castlog import CANCELS, DELETES, DeleteRequest, archive, last_cancel, last_delete, proven
from castlog.keys import Fields, Rows
from castlog.streams import Malformed, decode
from servicekit.connect import is_cluster

from .crew import Crew
from .outcomes import Outcomes

log = logging.getLogger(__name__)

# Entries of one stream read per round trip.
BATCH = 64


class Follower:
    """One stream's handler: where it is read from, and what is done with what is read."""

    stream: str
    newest: Callable[[Redis], Awaitable[str]]  # the entry id a new watch reads after
    after: str | None = None  # the last entry handled; None until the watch has begun

    async def handle(self, fields: Fields) -> None:
        raise NotImplementedError


class Broadcasts:
    """Follows the streams of ``followers`` (``cancels`` first) with one blocking read."""

    def __init__(self, redis: Redis, poll_s: float, *followers: Follower) -> None:
        self.redis, self.poll_s, self.followers = redis, poll_s, followers

    async def run(self) -> None:
        while True:
            try:
                for follower in self.followers:
                    if follower.after is None:
                        follower.after = await follower.newest(self.redis)
                for follower, rows in await self._read():
                    for entry_id, fields in rows:
                        await follower.handle(fields)
                        follower.after = entry_id.decode()
            except RedisError as exc:
                log.warning("broadcasts (%s): Redis error (%s); retrying",
                            ", ".join(f.stream for f in self.followers), exc)
                await asyncio.sleep(self.poll_s)

    async def _read(self) -> list[tuple[Follower, Rows]]:
        by_stream = {f.stream: f for f in self.followers}
        block_ms = max(1, int(self.poll_s * 1000))
        groups = [by_stream] if not is_cluster(self.redis) else [{s: f} for s, f in by_stream.items()]
        out: list[tuple[Follower, Rows]] = []
        for i, group in enumerate(groups):  # only the first read blocks
            streams = {s: f.after for s, f in group.items()}
            reply: Any = await self.redis.xread(streams, count=BATCH, block=None if i else block_ms)  # type: ignore[arg-type]
            out += [(by_stream[s.decode()], rows) for s, rows in reply or []]  # (bytes, rows) per stream
        return out


class CancelWatch(Follower):
    stream, newest = CANCELS, staticmethod(last_cancel)

    def __init__(self, crew: Crew, outcomes: Outcomes) -> None:
        self.crew, self.outcomes = crew, outcomes

    async def handle(self, fields: Fields) -> None:
        await self.cancel(fields.get(b"id", b"").decode())

    async def cancel(self, cast_id: str) -> None:
        held = self.crew.held
        for cast in [c for c in held.casts.values() if c.cast_id == cast_id and not c.closed and not c.cancelled]:
            dropped = cast.in_flight
            cast.cancel()
            log.info("cast %s: cancelled, %d chunk(s) in flight dropped", cast_id, dropped)
            if not cast.appending and cast.complete:  # else the lane ends it after that append
                await self.outcomes.finish(cast)
        held.work.set()


class DeleteWatch(Follower):
    """Carries out ``deletes`` (``token``: the admin's; None: every request is refused)."""

    stream, newest = DELETES, staticmethod(last_delete)

    def __init__(self, redis: Redis, token: str | None) -> None:
        self.redis, self.token = redis, token

    async def handle(self, fields: Fields) -> None:
        try:
            request: DeleteRequest | None = decode(DeleteRequest, fields)
        except Malformed:
            request = None
        await self.carry_out(request)

    async def carry_out(self, request: DeleteRequest | None) -> bool:
        """Delete the cast the request names when the admin's proof comes with it."""
        if request is None or not proven(request, self.token):
            named = request.id[:32] if request is not None else "(malformed)"
            why = "no STREAMTTS_ADMIN_TOKEN here" if not self.token else "its proof is not the admin token's"
            log.warning("refused a request to delete cast %r: %s", named, why)
            return False
        deleted = await archive.delete(self.redis, request.id)
        log.info("cast %s deleted at the admin's request%s", request.id, "" if deleted else " (already gone)")
        return True
