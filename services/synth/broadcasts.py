"""What every worker hears at once: the broadcast streams ``cancels`` and ``deletes``, a handler
per stream, followed by the worker's one stream loop, which follows the catalogs of its open casts
(``livefeed.py``) in the same read.

The loop is one blocked ``XREAD`` (SYNTH_POLL_S at most) on a connection of its own, over both
streams and every open catalog; on a cluster, where no read spans two slots, one per slot with
followed keys, each on its own connection to the slot's node (``fanout.choose_reads``: the shared
tail's reads). An open cast admitted while the read blocks wakes it with an XADD to the loop's own
wake stream (``tail/wake/synth/*``, one per slot on a cluster), which the read includes, so that
the next read names its catalog: nothing polls, and synth's Redis user needs no CLIENT UNBLOCK
(which could end anyone's blocked read).

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

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from redis.asyncio import Redis
from redis.exceptions import RedisError

from castlog import CANCELS, DELETES, DeleteRequest, archive, last_cancel, last_delete, proven
from castlog.keys import Fields, Rows
from castlog.streams import Malformed, decode
from fanout import BlockingRead, SlotReads, choose_reads
from servicekit.connect import is_cluster

from .crew import Crew
from .outcomes import Outcomes

log = logging.getLogger(__name__)

# Entries of one stream read per round trip (an open cast's text comes in small fragments).
BATCH = 256
# The loop's wake streams are tail/wake/synth/* (its Redis user may add to those only).
WAKE_NAME = "synth"


class BroadcastHandler:
    """One stream's handler: where it is read from, and what is done with what is read."""

    stream: str
    newest: Callable[[Redis], Awaitable[str]]  # the entry id a new loop reads after
    after: str | None = None  # the last entry handled; None until the loop has begun

    async def handle(self, fields: Fields) -> None:
        raise NotImplementedError


class Feed(Protocol):
    """Streams whose set changes, followed in the same read (the open casts' catalogs)."""

    joined: asyncio.Event  # set when a stream joins: the blocked read ends, and the next names it

    def streams(self) -> dict[str, str]:
        """Key -> the entry id to read after, for the next read (``joined`` is cleared here)."""

    async def handle(self, key: str, rows: Rows) -> None:
        """What one read brought for ``key``."""

    async def after_read(self) -> None:
        """Once per read, whatever it brought (the idle casts' close)."""


class Broadcasts:
    """Follows the streams of ``handlers`` (``cancels`` first) and ``feed``'s with one blocked
    read (one per slot on a cluster)."""

    def __init__(self, redis: Redis, poll_s: float, *handlers: BroadcastHandler, feed: Feed | None = None) -> None:
        self.redis, self.poll_s, self.handlers, self.feed = redis, poll_s, handlers, feed

    async def run(self) -> None:
        # a cluster's reads make a connection per slot (the client lends its settings); a single
        # Redis's one read holds one pooled connection
        conn = self.redis if is_cluster(self.redis) else self.redis.client()
        reads = choose_reads(conn, self.redis, WAKE_NAME)
        try:
            await self._follow(reads)
        finally:
            await reads.aclose()
            if conn is not self.redis:
                await conn.aclose()  # back to the pool

    async def _follow(self, reads: BlockingRead | SlotReads) -> None:
        while True:
            try:
                for handler in self.handlers:
                    if handler.after is None:
                        handler.after = await handler.newest(self.redis)
                await self._hand_out(await self._read(reads))
            except (RedisError, OSError) as exc:
                log.warning("broadcasts (%s): Redis error (%s); retrying",
                            ", ".join(f.stream for f in self.handlers), exc)
                await asyncio.sleep(self.poll_s)

    async def _hand_out(self, got: list[tuple[str, Rows]]) -> None:
        by_stream = {f.stream: f for f in self.handlers}
        for key, rows in got:
            handler = by_stream.get(key)
            if handler is None:
                if self.feed is not None:
                    await self.feed.handle(key, rows)
                continue
            for entry_id, fields in rows:
                await handler.handle(fields)
                handler.after = entry_id.decode()
        if self.feed is not None:
            await self.feed.after_read()

    async def _read(self, reads: BlockingRead | SlotReads) -> list[tuple[str, Rows]]:
        streams: dict[Any, Any] = {f.stream: f.after for f in self.handlers}
        if self.feed is not None:
            streams.update(self.feed.streams())
            joined: asyncio.Future[Any] = asyncio.ensure_future(self.feed.joined.wait())
        else:
            joined = asyncio.get_running_loop().create_future()  # nothing joins
        try:
            reply = await reads.xread(streams, count=BATCH, block_ms=max(1, int(self.poll_s * 1000)), wake=joined)
        finally:
            joined.cancel()
        return [(key.decode() if isinstance(key, bytes) else key, rows) for key, rows in reply]


class CancelHandler(BroadcastHandler):
    stream, newest = CANCELS, staticmethod(last_cancel)

    def __init__(self, crew: Crew, outcomes: Outcomes) -> None:
        self.crew, self.outcomes = crew, outcomes

    async def handle(self, fields: Fields) -> None:
        await self.cancel(fields.get(b"id", b"").decode())

    async def cancel(self, cast_id: str) -> None:
        hand = self.crew.hand
        for cast in [c for c in hand.casts.values() if c.cast_id == cast_id and not c.closed and not c.cancelled]:
            dropped = cast.in_flight
            cast.cancel()
            log.info("cast %s: cancelled, %d chunk(s) in flight dropped", cast_id, dropped)
            if not cast.appending and cast.complete:  # else the appender ends it after that append
                await self.outcomes.finish(cast)
        hand.work.set()


class DeleteHandler(BroadcastHandler):
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
