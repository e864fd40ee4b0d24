"""One upstream tail per process, fanned out to every live listener through bounded queues.

The :class:`Tail` is one task: ONE blocking ``XREAD`` over every cast with a live listener, a
:class:`Watch` per cast (the last seq delivered, its ``cursor``; the stamps ``ts`` of the last
records delivered; the listeners), each record decoded once and put on every listener's bounded
queue. Redis work per record does not depend on how many listen.

A :class:`~edge.listener.Listener` (``listener.py``: one reader of one cast) reads by offset
(:meth:`Tail.rows`) to the end of the log, then joins (:meth:`Tail.subscribe`, synchronous: the
cursor it returns is exactly what the tail delivered). This module imports the listener; the
listener sees the tail only through its ``Hub`` protocol, so the imports go one way.

A join wakes the blocked XREAD with CLIENT UNBLOCK, re-sent until the read returns (one that
reaches Redis before the XREAD does nothing); the block timeout is only a safety net.

A log can shrink or be rewritten under a cursor (docs/design.md, "The public read path"), and an
XREAD after it would skip the replacing records or wait forever. Each record names its
predecessor's stamp (``p``): rows whose first record is the cursor's next and names the stamp
the watch delivered at the cursor continue it, and go out unchecked. Otherwise the tail checks
the record at the cursor before it hands out a cast's rows, and it checks every cursor after a
join, an idle read or a lost connection: one command besides the XREAD (an XRANGE of that one
record, or a small script for several). A watch whose record is gone or replaced is dropped;
its listeners move back to the last record that still stands and read on by offset.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError

from castlog import LogReader, cast_id_of, cast_key, decode_entry, entry_id, holds, is_terminal, seq_of, stamps
from castlog.archive import ARCHIVE_FIELD, Row

from .listener import STAMP_HISTORY, Listener, Stamp
from .metrics import EdgeMetrics
from .public import Item

log = logging.getLogger(__name__)

# After a failed XREAD (Redis restarting, connection lost): back off, doubling up to the max.
ERROR_BACKOFF_S = 0.2
ERROR_BACKOFF_MAX_S = 5.0
# A join re-sends CLIENT UNBLOCK this often while the XREAD has not returned (it may not have
# reached Redis yet), at most this many times; then the block timeout ends it.
WAKE_RETRY_S = 0.002
WAKE_TRIES = 50
PREV_FIELD = b"p"  # a record's predecessor's stamp (castlog's APPEND writes it)


def after_id(cursor: int) -> str:
    """The XREAD/XRANGE-exclusive id after seq ``cursor`` (-1: before the first record)."""
    return entry_id(cursor) if cursor >= 0 else "0-0"


def continues(watch: Watch | None, rows: list[Any]) -> bool:
    """Whether ``rows`` (one XREAD's, for ``watch``) continue what the watch delivered: the first
    is the next seq and names the cursor record's known stamp as its predecessor (``p``): the
    append that wrote it found the delivered record at the tail, so no check is needed (the check
    compares that same stamp)."""
    if watch is None or watch.stamp is None or not rows:
        return False
    raw_id, fields = rows[0]
    return seq_of(raw_id) == watch.cursor + 1 and fields.get(PREV_FIELD) == str(watch.stamp).encode()


class Watch:
    """One watched cast: the last seq the tail delivered, the stamps of the last records
    delivered (None: unknown) and who listens."""

    __slots__ = ("cursor", "listeners", "stamps")

    def __init__(self, cursor: int, delivered: Iterable[Stamp] = ()) -> None:
        self.cursor = cursor
        self.listeners: set[Listener] = set()
        self.stamps: deque[Stamp] = deque(delivered, maxlen=STAMP_HISTORY)
        if cursor >= 0 and not self.stamps:
            self.stamps.append((cursor, None))  # a listener that started here: only its place is known

    def delivered(self, seq: int, stamp: int | None) -> None:
        self.cursor = seq
        self.stamps.append((seq, stamp))

    @property
    def stamp(self) -> int | None:
        return self.stamps[-1][1] if self.stamps and self.stamps[-1][0] == self.cursor else None


class Tail:
    def __init__(
        self, conn: Redis, reader: Redis, metrics: EdgeMetrics, *,
        block_ms: int, batch: int, queue_size: int, log: LogReader,
    ) -> None:
        self.conn = conn  # dedicated: it sits in the blocking XREAD
        self.reader = reader  # the shared pool: CLIENT UNBLOCK
        self.log = log  # offset reads, archived logs included
        self.metrics = metrics
        self.block_ms, self.batch, self.queue_size = block_ms, batch, queue_size
        # A listener holds at most queue_size records, in its queue or in its offset backlog.
        self.offset_batch = min(batch, queue_size)
        self.watches: dict[str, Watch] = {}
        self.listeners: set[Listener] = set()
        self.closing = False
        self._unchecked: set[str] = set()  # casts whose cursor Redis has not confirmed yet
        self._joined: asyncio.Future[None] | None = None  # resolved when a cast joins
        self._client_id: int | None = None
        self._task: asyncio.Task[None] | None = None

    # -- life cycle ---------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="edge-tail")

    async def stop(self) -> None:
        self.close_listeners()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def close_listeners(self) -> None:
        """Shutdown: every live response ends now; its client resumes from its last id."""
        self.closing = True
        for listener in list(self.listeners):
            listener.close()
        self.watches.clear()

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    @asynccontextmanager
    async def listen(self, cast_id: str, seq_num: int, kind: str) -> AsyncIterator[Listener]:
        """A listener on ``cast_id`` from ``seq_num``; it leaves the tail when the block ends."""
        listener = Listener(self, cast_id, seq_num)
        self.listeners.add(listener)
        gauge = self.metrics.listeners.labels(kind=kind)
        gauge.inc()
        try:
            if self.closing:
                listener.close()
            yield listener
        finally:
            gauge.dec()
            self.listeners.discard(listener)
            self.unsubscribe(listener)
            listener.disarm()

    # -- the watched set (synchronous: no await between a join and its cursor) ---------------

    def subscribe(self, listener: Listener) -> int:
        """Join ``listener`` to the live feed; return the seq the tail delivered up to."""
        watch = self.watches.get(listener.cast_id)
        if watch is None:
            cursor = listener.next_seq - 1
            watch = self.watches[listener.cast_id] = Watch(cursor, listener.stamps_upto(cursor))
            self._unchecked.add(listener.cast_id)
            if self._joined is not None and not self._joined.done():
                self._joined.set_result(None)
        watch.listeners.add(listener)
        return watch.cursor

    def unsubscribe(self, listener: Listener) -> None:
        watch = self.watches.get(listener.cast_id)
        if watch is not None:
            watch.listeners.discard(listener)
            if not watch.listeners:
                del self.watches[listener.cast_id]  # the next XREAD leaves it out

    async def rows(self, cast_id: str, low: str, high: str, count: int) -> list[Row]:
        """The one read by offset (listeners catching up, demoted or moved back), archived
        logs included."""
        return await self.log.rows(cast_id, low, high, count)

    # -- the tail -----------------------------------------------------------------------------

    async def _run(self) -> None:
        backoff = ERROR_BACKOFF_S
        while True:
            if not self.watches:
                self._joined = asyncio.get_running_loop().create_future()
                await self._joined
                continue
            try:
                got, read_with, idle = await self._read()
                if idle:
                    self._unchecked.update(self.watches)  # a cursor past a shrunk log reads nothing
                await self._check(self._unproven(got, read_with) | self._unchecked)
            except (RedisError, OSError) as exc:  # the cursors stay: the next read brings the rows again
                self._client_id = None  # a new connection has a new id
                self._unchecked.update(self.watches)  # the server may have restarted with less
                log.warning("shared tail: reading failed (%s); retrying in %.1fs", exc, backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, ERROR_BACKOFF_MAX_S)
                continue
            backoff = ERROR_BACKOFF_S
            self._fan_out(got, read_with)

    async def _read(self) -> tuple[list[Any], dict[str, Watch], bool]:
        """One XREAD after every watch's cursor: its rows per stream, the watches it was issued
        for, and whether it ended idle (the block timeout, not a join and not a record)."""
        if self._client_id is None:
            self._client_id = int(await self.conn.client_id())
        read_with = dict(self.watches)  # no await from here to the XREAD: a join wakes it
        streams: dict[Any, Any] = {cast_key(c): after_id(w.cursor) for c, w in read_with.items()}
        joined = self._joined = asyncio.get_running_loop().create_future()
        read = asyncio.ensure_future(self.conn.xread(streams, count=self.batch, block=self.block_ms))
        try:
            await asyncio.wait((read, joined), return_when=asyncio.FIRST_COMPLETED)
            if not read.done():
                await self._wake(read, self._client_id)
            reply = await read
        finally:
            read.cancel()  # only when the tail itself is cancelled: the read is done otherwise
        self.metrics.upstream_reads.inc()
        got = list(reply.items() if isinstance(reply, dict) else reply or ())
        return got, read_with, not got and not joined.done()

    async def _wake(self, read: asyncio.Future[Any], client_id: int) -> None:
        """End the blocked XREAD so that the next one includes the cast that joined."""
        for _ in range(WAKE_TRIES):
            try:
                if await self.reader.client_unblock(client_id):
                    return
            except (RedisError, OSError) as exc:
                log.warning("shared tail: CLIENT UNBLOCK failed (%s); the block timeout wakes it", exc)
                return
            await asyncio.wait((read,), timeout=WAKE_RETRY_S)  # not blocked yet: it is on its way
            if read.done():
                return

    def _unproven(self, got: list[Any], read_with: dict[str, Watch]) -> set[str]:
        """The casts read whose rows do not prove by themselves that the log still holds the
        watch's cursor record: those need the check before their rows are handed out."""
        out = set()
        for key, rows in got:
            cast_id = cast_id_of(_str(key)) or ""
            watch = read_with.get(cast_id)
            if self.watches.get(cast_id) is not watch or not continues(watch, rows):
                out.add(cast_id)
        return out

    async def _check(self, cast_ids: Iterable[str]) -> None:
        """Check each watch's cursor against Redis; rewind those whose record is gone or
        replaced (that drops the watch: the rows read for it are not handed out)."""
        # a cursor without a known stamp has nothing to check (holds() takes it as it is)
        watches = {c: w for c in cast_ids if (w := self.watches.get(c)) is not None and w.stamp is not None}
        self._unchecked.clear()
        if not watches:
            return
        found = await self._stamps([(c, w.cursor) for c, w in watches.items()])
        for (cast_id, watch), stamp in zip(watches.items(), found):
            if not holds(stamp, watch.cursor, watch.stamp):
                await self._rewind(cast_id, watch)

    async def _stamps(self, asked: list[tuple[str, int]]) -> list[int | None]:
        """The stamps at ``(cast, seq)``: one record's by an XRANGE of it (one command; its body
        travels), several (or one gone or archived) by the script (no bodies)."""
        if len(asked) == 1:
            cast_id, seq = asked[0]
            rows: Any = await self.conn.xrange(cast_key(cast_id), entry_id(seq), entry_id(seq))
            if rows:
                return [int(rows[0][1].get(b"ts", 0)) or None]
        return await stamps(self.conn, asked)

    async def _rewind(self, cast_id: str, watch: Watch) -> None:
        """Move the watch's listeners back to the last delivered record that Redis still holds."""
        had = list(watch.stamps)
        found = await stamps(self.conn, [(cast_id, seq) for seq, _ in had])
        keep = max((seq for (seq, ts), now in zip(had, found) if holds(now, seq, ts)), default=-1)
        log.warning("cast %s: the log no longer holds what the tail delivered after seq %d; "
                    "moving %d listener(s) back", cast_id, keep, len(watch.listeners))
        self.metrics.rewound.inc()
        if self.watches.get(cast_id) is watch:
            del self.watches[cast_id]
        for listener in tuple(watch.listeners):
            listener.rewind(keep + 1)
        watch.listeners.clear()

    def _fan_out(self, streams: Any, read_with: dict[str, Watch]) -> None:
        """Hand each row to the listeners of the watch that the read was issued for.

        A cast whose watch ended during the read (its last listener left, or it was rewound) is
        skipped, and so is one whose watch was re-created meanwhile: the new watch's cursor came
        from its joiner's offset read, which may be behind or ahead of this read's, so these
        rows could leave a gap or repeat; the next read starts at the new cursor.
        """
        for key, rows in streams:
            cast_id = cast_id_of(_str(key)) or ""
            watch = read_with.get(cast_id)
            if watch is None or self.watches.get(cast_id) is not watch:
                continue
            for raw_id, fields in rows:
                seq = seq_of(raw_id)
                if seq > watch.cursor + 1 and ARCHIVE_FIELD in fields:
                    # archived before this read reached it: the records between are in the
                    # archive now, so every listener goes back to reading by offset (no gap)
                    self.metrics.demoted.inc(len(watch.listeners))
                    for listener in watch.listeners:
                        listener.demote()
                    watch.listeners.clear()
                    break
                watch.delivered(seq, int(fields.get(b"ts", 0)) or None)
                entry = decode_entry(raw_id, fields)
                if entry is None:
                    continue
                item = Item(entry, live=True)
                for listener in tuple(watch.listeners):
                    if not listener.offer(item):
                        watch.listeners.discard(listener)
                        self.metrics.demoted.inc()
                if is_terminal(entry.record):
                    watch.listeners.clear()  # each got the terminal record: their streams end
                    break
            if not watch.listeners:
                del self.watches[cast_id]


def _str(key: Any) -> str:
    return key.decode() if isinstance(key, bytes) else str(key)
