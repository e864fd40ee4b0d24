"""One consumer of a Redis Streams consumer group: the shape of every group reader here (synth's
jobs, the key lanes' mover, the archiver's receipts); each one's policy stays with it.

A :class:`Consumer` (one group, one name, on one or more streams) takes entries from, in order:

1. :meth:`~Consumer.own`, its own pending entries (XREADGROUP from id 0): after a restart what it
   held (all of them: ``every``), later what it left unacknowledged;
2. :meth:`~Consumer.claim`, entries idle past the lease (a dead consumer's), XAUTOCLAIM on from
   its cursor: a call scans only ``10 * count`` pending entries, and a scan always from 0-0 would
   never reach a dead consumer's entries behind that many live ones;
3. :meth:`~Consumer.new`, entries never delivered (XREADGROUP >), waiting up to ``block_ms``.

An entry stays pending until :meth:`~Consumer.ack` (at least once). Over several streams a command
goes once per stream in one pipeline (a cluster's: a round trip per node); ``one_read=False`` reads
new entries so too (a cluster refuses one read of several slots), and so without blocking.
Redis 7's XAUTOCLAIM drops entries deleted from the stream; XREADGROUP from id 0 returns one
without fields, which :meth:`~Consumer.own` acknowledges (nothing can run it) and leaves out.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Sequence
from typing import Any, NamedTuple

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from .keys import Fields, decoded


class StreamEntry(NamedTuple):
    id: str
    fields: Fields
    stream: str


def entries(stream: str, rows: Any) -> list[StreamEntry]:
    """Stream rows (XRANGE's, XCLAIM's) as entries, without the holes deleted entries leave."""
    return [StreamEntry(decoded(i), f, stream) for i, f in rows or () if i is not None and f]


async def ensure_group(redis: Redis, streams: str | Sequence[str], group: str) -> None:
    """Create ``group`` at the start of each stream (and the stream) unless it exists."""
    pipe = redis.pipeline(transaction=False)
    for stream in [streams] if isinstance(streams, str) else streams:
        pipe.xgroup_create(stream, group, id="0", mkstream=True)
    for reply in await pipe.execute(raise_on_error=False):
        if isinstance(reply, ResponseError) and "BUSYGROUP" not in str(reply):
            raise reply


class Consumer:
    """The consumer ``name`` of ``group`` on ``streams``; ``lease_ms``: the idle time after which
    an entry is another consumer's to claim."""

    def __init__(
        self, redis: Redis, group: str, name: str, streams: str | Sequence[str], *, lease_ms: int, one_read: bool = True
    ) -> None:
        self.redis, self.group, self.name, self.lease_ms, self.one_read = redis, group, name, lease_ms, one_read
        self.streams = [streams] if isinstance(streams, str) else list(streams)
        self._claim_from = dict.fromkeys(self.streams, "0-0")

    async def create(self) -> None:
        await ensure_group(self.redis, self.streams, self.group)

    async def take(self, count: int, block_ms: int | None = None) -> list[StreamEntry]:
        """The first of :meth:`own`, :meth:`claim` and :meth:`new` to give anything."""
        return await self.own(count) or await self.claim(count) or await self.new(count, block_ms)

    async def own(self, count: int, *, every: bool = False) -> list[StreamEntry]:
        """Up to ``count`` of our pending entries per stream, the oldest (from id 0 each call: one
        left unacknowledged comes round again); ``every``: all, ``count`` per stream per round trip."""
        out: list[StreamEntry] = []
        holes: list[StreamEntry] = []
        todo = dict.fromkeys(self.streams, "0")
        while todo:
            after, todo = todo, {}
            replies = await self._each(after, self._read(count))
            for stream, reply in zip(after, replies):
                rows = [row for _, page in pairs(reply) for row in page]
                if every and len(rows) >= count:
                    todo[stream] = decoded(rows[-1][0])
                out += entries(stream, rows)
                holes += [StreamEntry(decoded(i), {}, stream) for i, f in rows if i is not None and not f]
        await self.ack(holes)
        return out

    async def claim(self, count: int, *, scans: int = 1, skip: Container[str] = ()) -> list[StreamEntry]:
        """Up to ``count`` entries per stream idle past the lease, in at most ``scans`` XAUTOCLAIMs
        each; those whose id is in ``skip`` (the caller holds them already) are claimed, their
        idle time reset, but left out."""
        out: list[StreamEntry] = []
        left = dict.fromkeys(self.streams, count)
        for _ in range(scans):
            streams = list(left)
            replies = await self._each({s: self._claim_from[s] for s in streams}, lambda p, s, at: p.xautoclaim(
                s, self.group, self.name, self.lease_ms, start_id=at, count=left[s]))
            for stream, (cursor, rows, *_deleted) in zip(streams, replies):
                got = [e for e in entries(stream, rows) if e.id not in skip]
                out += got
                left[stream] -= len(got)
                self._claim_from[stream] = decoded(cursor)
                if left[stream] <= 0 or self._claim_from[stream] == "0-0":
                    del left[stream]
            if not left:
                break
        return out

    async def new(
        self, count: int, block_ms: int | None = None, streams: Iterable[str] | None = None
    ) -> list[StreamEntry]:
        """Up to ``count`` never-delivered entries per stream (of ``streams``; default: all), waiting
        up to ``block_ms`` (None: not at all) where :attr:`one_read`."""
        ids: dict[Any, Any] = dict.fromkeys(self.streams if streams is None else streams, ">")
        if not ids:
            return []
        if self.one_read or len(ids) == 1:
            replies = [await self.redis.xreadgroup(self.group, self.name, ids, count=count, block=block_ms)]
        else:
            replies = await self._each(ids, self._read(count))
        return [e for reply in replies for stream, rows in pairs(reply) for e in entries(stream, rows)]

    async def ack(self, done: Iterable[StreamEntry], *, drop: bool = False) -> None:
        """Acknowledge ``done``, in one round trip; ``drop``: and delete them (a transit, not a log)."""
        ids: dict[str, list[str]] = {}
        for entry in done:
            ids.setdefault(entry.stream, []).append(entry.id)
        pipe = self.redis.pipeline(transaction=False)
        for stream, some in ids.items():
            pipe.xack(stream, self.group, *some)
            if drop:
                pipe.xdel(stream, *some)
        if ids:
            await pipe.execute()

    def _read(self, count: int) -> Callable[[Any, str, str], object]:
        return lambda pipe, stream, after: pipe.xreadgroup(self.group, self.name, {stream: after}, count=count)

    async def _each(self, at: dict[str, str], queue: Callable[[Any, str, str], object]) -> list[Any]:
        """``queue``'s command for each stream (and its id ``at``) in one pipeline; the replies."""
        pipe = self.redis.pipeline(transaction=False)
        for stream, stream_at in at.items():
            queue(pipe, stream, stream_at)
        return list(await pipe.execute())


def pairs(reply: Any) -> list[tuple[str, Any]]:
    """An XREAD(GROUP) reply as (stream, rows), whether RESP2's list or RESP3's dict."""
    pairs = reply.items() if isinstance(reply, dict) else reply or ()
    return [(decoded(stream), rows) for stream, rows in pairs]
