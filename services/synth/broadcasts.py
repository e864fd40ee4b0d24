"""What every worker hears at once: the broadcast streams ``cancels`` and ``deletes``, a handler
per stream, followed by the worker's one stream loop (:func:`stream_loop`), which follows the
catalogs of its open casts (``livefeed.py``) in the same read.

The loop is fanout's :class:`~fanout.StreamTail`, as edge's and intake's tail is (SYNTH_POLL_S at
most per read, a pooled connection of its own); an open cast admitted while it blocks wakes it
(``Hand.opened``) through its own wake stream ``tail/wake/synth/*``, so that the next read names
its catalog: nothing polls, and synth's Redis user needs no CLIENT UNBLOCK.

Each broadcast stream is read from its newest entry when the loop begins: a cancel from before is
admission's (the ``cancel/<id>`` flag), a delete from before was answered 202 (ask again), and an
old delete is never carried out late, after the cast was made again. A stream's batch counts as
read only once it is handled: one that a Redis error cut short is read again (both are idempotent).

*Cancels*: a cancelled cast this worker holds drops every chunk not yet appended
(``ActiveCast.cancel``) and ends at once with ``eos`` marked cancelled, so the audio stops with
what is in the log: the chunk in hand finishes on the model thread and is thrown away. When an
append is on its way to Redis, the appender ends the cast right after it. A cast not held here is some
other worker's, or still queued: admission reads its ``cancel/<id>`` flag.

*Deletes*: intake checks the admin token and adds a request; its Redis user cannot delete a cast
itself. Here a request is carried out only when its proof is the admin token's
(``castlog.proven``: STREAMTTS_ADMIN_TOKEN, the same as intake's), so a request added without the
token (a flaw in the public service, anyone else who may add to the stream) deletes nothing and is
logged. Every worker carries out each request; the delete is idempotent, so the cast goes once.
"""

from __future__ import annotations

import logging

from redis.asyncio import Redis

from castlog import CANCELS, DELETES, DeleteRequest, archive, newest_id, proven
from castlog.keys import Fields, Rows
from castlog.streams import Malformed, decode
from fanout import StreamTail, Subscriber

from .crew import Crew
from .outcomes import Outcomes

log = logging.getLogger(__name__)

# Entries of one stream read per round trip (an open cast's text comes in small fragments).
BATCH = 256
# The loop's wake streams are tail/wake/synth/* (its Redis user may add to those only).
WAKE_NAME = "synth"


def stream_loop(redis: Redis, poll_s: float, *subscribers: Subscriber) -> StreamTail:
    """The worker's one stream loop over ``subscribers`` (the handlers, ``cancels`` first, then the
    live feed), each read blocking SYNTH_POLL_S at most (the live feed's idle casts are looked at
    after each)."""
    return StreamTail(None, redis, WAKE_NAME, *subscribers, block_ms=max(1, int(poll_s * 1000)), name="broadcasts")


class BroadcastHandler(Subscriber):
    """One stream's handler: where it is read from, and what is done with what is read."""

    stream: str
    redis: Redis
    after: str | None = None  # the last entry handled; None until the loop has begun (its newest entry)
    count = BATCH

    async def streams(self) -> dict[str, str]:
        if self.after is None:
            self.after = await newest_id(self.redis, self.stream)
        return {self.stream: self.after}

    async def take(self, got: dict[str, Rows], idle: list[str]) -> None:
        for entry_id, fields in got.get(self.stream, ()):
            await self.handle(fields)
            self.after = entry_id.decode()  # handled: a Redis error after it reads on from here

    async def handle(self, fields: Fields) -> None:
        raise NotImplementedError


class CancelHandler(BroadcastHandler):
    stream = CANCELS

    def __init__(self, crew: Crew, outcomes: Outcomes) -> None:
        self.crew, self.outcomes, self.redis = crew, outcomes, crew.redis

    async def handle(self, fields: Fields) -> None:
        cast_id, hand = fields.get(b"id", b"").decode(), self.crew.hand
        for cast in [c for c in hand.casts.values() if c.cast_id == cast_id and not c.closed and not c.cancelled]:
            dropped = cast.in_flight
            cast.cancel()
            log.info("cast %s: cancelled, %d chunk(s) in flight dropped", cast_id, dropped)
            if not cast.appending and cast.complete:  # else the appender ends it after that append
                await self.outcomes.finish(cast)
        hand.work.set()


class DeleteHandler(BroadcastHandler):
    """Carries out ``deletes`` (``token``: the admin's; None: every request is refused)."""

    stream = DELETES

    def __init__(self, redis: Redis, token: str | None) -> None:
        self.redis, self.token = redis, token

    async def handle(self, fields: Fields) -> None:
        """Delete the cast the request names when the admin's proof comes with it."""
        try:
            request: DeleteRequest | None = decode(DeleteRequest, fields)
        except Malformed:
            request = None
        if request is None or not proven(request, self.token):
            named = request.id[:32] if request is not None else "(malformed)"
            why = "no STREAMTTS_ADMIN_TOKEN here" if not self.token else "its proof is not the admin token's"
            log.warning("refused a request to delete cast %r: %s", named, why)
            return
        deleted = await archive.delete(self.redis, request.id)
        log.info("cast %s deleted at the admin's request%s", request.id, "" if deleted else " (already gone)")
