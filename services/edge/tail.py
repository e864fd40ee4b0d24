"""One upstream tail per process, fanned out to every live listener through bounded queues.

The :class:`Tail` runs ONE blocking ``XREAD`` on its own connection over every cast that has a
live listener, remembering the last seq_num it delivered per cast (the watch's ``cursor``), and
puts each decoded record on each listener's bounded queue. Redis work per record is therefore
one share of one XREAD, however many listen.

A :class:`~edge.listener.Listener` reads by offset (XRANGE) until it reaches the end of the
log, then joins the tail. Joining is synchronous on the event loop, so at that instant the tail
has delivered exactly up to the watch's cursor and every later record will reach the queue:
the listener reads the records between its own position and the cursor by offset, then takes
the queue, dropping anything below its position. No gap, no duplicate.

A listener whose queue is full is demoted: the tail drops it from the watch and clears its queue,
and it goes back to reading by offset from its own position until it catches up (then joins
again). A slow client therefore holds at most one queue of records.

Waking the XREAD when a cast joins: the tail's connection id (CLIENT ID) is known, and a second
connection sends ``CLIENT UNBLOCK <id>``; the XREAD returns empty and is issued again with the
new cast at its cursor, so a join costs about one round trip and no record is lost (cursors
live here, not in Redis). An UNBLOCK that arrives before the XREAD is blocked does nothing, so
the waker retries while the read in flight is older than the watched set; the block timeout
(``EDGE_TAIL_BLOCK_MS``) is only a safety net. A short block instead would poll Redis on idle
casts and delay joins by half a block on average.

A third task, the ticker, ends long waits (SSE heartbeats) once a second, so that a record
costs a listener no timer.

A log can shrink or be rewritten under a cursor (Redis lost its last second of writes with the
AOF, a failover reached a replica that lagged): an XREAD after the cursor would then skip the
records that replaced the lost ones, or wait forever. So each watch keeps the stamps (``ts``) of
the last records it delivered, and the tail checks the record at the cursor against Redis (one
small script, no bodies) when a watch is created, before handing out the rows of a read, after
an idle read and after a lost connection. Where Redis holds another record, the watch is dropped
and its listeners are moved back to the last record that still stands; they read on by offset
and receive the replacing records, the new ``start`` included.
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

from castlog import cast_id_of, cast_key, decode_entry, entry_id, holds, is_terminal, seq_of, stamps
from castlog.archive import ARCHIVE_FIELD

from .listener import STAMP_HISTORY, Listener
from .metrics import EdgeMetrics
from .public import Item
from .reads import LogReads

log = logging.getLogger(__name__)

# The waker re-sends CLIENT UNBLOCK this often while the XREAD in flight lacks a new cast (it
# may not have reached Redis yet), at most this many times before the block timeout takes over.
WAKE_RETRY_S = 0.002
WAKE_TRIES = 50
# After a failed XREAD (Redis restarting, connection lost): back off, doubling up to the max.
ERROR_BACKOFF_S = 0.2
ERROR_BACKOFF_MAX_S = 5.0
# The ticker that ends long waits (heartbeats) runs this often: a heartbeat may be a tick late.
TICK_S = 1.0


def after_id(cursor: int) -> str:
    """The XREAD/XRANGE-exclusive id after seq ``cursor`` (-1: before the first record)."""
    return entry_id(cursor) if cursor >= 0 else "0-0"


class Watch:
    """One watched cast: the last seq the tail delivered, the stamps of the last records
    delivered (None: unknown), whether the cursor was checked against Redis, and who listens."""

    __slots__ = ("cursor", "listeners", "stamps", "checked")

    def __init__(self, cursor: int, stamps: Iterable[tuple[int, int | None]] = ()) -> None:
        self.cursor = cursor
        self.listeners: set[Listener] = set()
        self.stamps: deque[tuple[int, int | None]] = deque(stamps, maxlen=STAMP_HISTORY)
        if cursor >= 0 and not self.stamps:
            self.stamps.append((cursor, None))  # a listener that started here: only its place is known
        self.checked = False

    def delivered(self, seq: int, stamp: int | None) -> None:
        self.cursor = seq
        self.stamps.append((seq, stamp))

    @property
    def stamp(self) -> int | None:
        return self.stamps[-1][1] if self.stamps and self.stamps[-1][0] == self.cursor else None


class Tail:
    def __init__(
        self, conn: Redis, reader: Redis, metrics: EdgeMetrics, *,
        block_ms: int, batch: int, queue_size: int, reads: LogReads | None = None,
    ) -> None:
        self.conn = conn  # dedicated: it sits in the blocking XREAD
        self.reader = reader  # the shared pool: offset reads and CLIENT UNBLOCK
        self.reads = reads or LogReads()  # offset reads, archived logs included
        self.metrics = metrics
        self.block_ms, self.batch, self.queue_size = block_ms, batch, queue_size
        # A listener holds at most queue_size records, in its queue or in its offset backlog.
        self.offset_batch = min(batch, queue_size)
        self.watches: dict[str, Watch] = {}
        self.listeners: set[Listener] = set()
        self.closing = False
        self._version = 0  # bumped whenever a cast joins the watched set
        self._reading: int | None = None  # the watched-set version of the XREAD in flight
        self._client_id: int | None = None
        self._joined = asyncio.Event()  # the tail is idle and a cast joined
        self._wake = asyncio.Event()  # the XREAD in flight lacks a cast that joined
        self._tasks: list[asyncio.Task[None]] = []

    # -- life cycle ---------------------------------------------------------------------------

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._run(), name="edge-tail"),
                       asyncio.create_task(self._wake_loop(), name="edge-tail-waker"),
                       asyncio.create_task(self._tick(), name="edge-tail-ticker")]

    async def stop(self) -> None:
        self.close_listeners()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def close_listeners(self) -> None:
        """Shutdown: every live response ends now; its client resumes from its last id."""
        self.closing = True
        for listener in list(self.listeners):
            listener.close()
        self.watches.clear()

    @property
    def running(self) -> bool:
        return bool(self._tasks) and not any(t.done() for t in self._tasks)

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

    # -- the watched set (synchronous: no await between a join and its cursor) ---------------

    def subscribe(self, listener: Listener) -> int:
        """Join ``listener`` to the live feed; return the seq the tail delivered up to."""
        watch = self.watches.get(listener.cast_id)
        if watch is None:
            cursor = listener.next_seq - 1
            watch = self.watches[listener.cast_id] = Watch(cursor, listener.stamps_upto(cursor))
            self._version += 1
            self._joined.set()
            self._wake.set()
        watch.listeners.add(listener)
        return watch.cursor

    def unsubscribe(self, listener: Listener) -> None:
        watch = self.watches.get(listener.cast_id)
        if watch is not None:
            watch.listeners.discard(listener)
            if not watch.listeners:
                del self.watches[listener.cast_id]  # the next XREAD leaves it out

    # -- the tail -----------------------------------------------------------------------------

    async def _run(self) -> None:
        backoff = ERROR_BACKOFF_S
        while True:
            if not self.watches:
                self._joined.clear()
                await self._joined.wait()
                continue
            try:
                if self._client_id is None:
                    self._client_id = int(await self.conn.client_id())
                await self._check(c for c, w in self.watches.items() if not w.checked)
                if not self.watches:
                    continue
                read_with = dict(self.watches)  # the watches this read serves (see _fan_out)
                streams: dict[Any, Any] = {cast_key(c): after_id(w.cursor) for c, w in read_with.items()}
                self._reading = self._version
                try:
                    reply = await self.conn.xread(streams, count=self.batch, block=self.block_ms)
                finally:
                    self._reading = None
            except (RedisError, OSError) as exc:
                self._client_id = None  # a new connection has a new id
                for watch in self.watches.values():
                    watch.checked = False  # the server may have restarted with less
                log.warning("shared tail: XREAD failed (%s); retrying in %.1fs", exc, backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, ERROR_BACKOFF_MAX_S)
                continue
            backoff = ERROR_BACKOFF_S
            self.metrics.upstream_reads.inc()
            await self._deliver(list(reply.items() if isinstance(reply, dict) else reply or ()), read_with)

    async def _deliver(self, got: list[Any], read_with: dict[str, Watch]) -> None:
        """Fan a read's rows out, once the record at each cursor is known to still stand."""
        for watch in self.watches.values():
            watch.checked = watch.checked and bool(got)  # an idle read: check them all next time
        try:
            stale = await self._check(cast_id_of(_str(key)) or "" for key, _rows in got)
        except (RedisError, OSError) as exc:  # the cursors stay: the next read brings the rows again
            log.warning("shared tail: the check of a read failed (%s); reading again", exc)
            return
        if got:
            self._fan_out(got, read_with, skip=stale)

    async def _check(self, cast_ids: Iterable[str]) -> set[str]:
        """Check each watch's cursor against Redis; rewind those whose record is gone or
        replaced. Returns the rewound casts."""
        watches = {c: w for c in cast_ids if (w := self.watches.get(c)) is not None}
        if not watches:
            return set()
        found = await stamps(self.conn, [(c, w.cursor) for c, w in watches.items()])
        stale = set()
        for (cast_id, watch), stamp in zip(watches.items(), found):
            if holds(stamp, watch.cursor, watch.stamp):
                watch.checked = True
            else:
                stale.add(cast_id)
                await self._rewind(cast_id, watch)
        return stale

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

    def _fan_out(self, streams: Any, read_with: dict[str, Watch], skip: set[str] | None = None) -> None:
        """Hand each row to the listeners of the watch that the read was issued for.

        A cast whose watch ended during the read (its last listener left) is skipped, and so is
        one whose watch was re-created meanwhile: the new watch's cursor came from its joiner's
        offset read, which may be behind or ahead of this read's, so these rows could leave a
        gap or repeat; the next read starts at the new cursor.
        """
        for key, rows in streams:
            cast_id = cast_id_of(_str(key)) or ""
            watch = read_with.get(cast_id)
            if watch is None or self.watches.get(cast_id) is not watch or (skip and cast_id in skip):
                continue
            for raw_id, fields in rows:
                if seq_of(raw_id) > watch.cursor + 1 and ARCHIVE_FIELD in fields:
                    # archived before this read reached it: the records between are in the
                    # archive now, so every listener goes back to reading by offset (no gap)
                    self.metrics.demoted.inc(len(watch.listeners))
                    for listener in watch.listeners:
                        listener.demote()
                    watch.listeners.clear()
                    break
                watch.delivered(seq_of(raw_id), int(fields.get(b"ts", 0)) or None)
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

    async def _wake_loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            for _ in range(WAKE_TRIES):
                reading, client_id = self._reading, self._client_id
                if reading is None or reading >= self._version or client_id is None:
                    break  # the next XREAD is built from the current watched set
                try:
                    if await self.reader.client_unblock(client_id):
                        break
                except (RedisError, OSError) as exc:
                    log.warning("shared tail: CLIENT UNBLOCK failed (%s); the block timeout wakes it", exc)
                    break
                await asyncio.sleep(WAKE_RETRY_S)  # not blocked yet: the XREAD is on its way

    async def _tick(self) -> None:
        """End the long waits (heartbeats) whose deadline passed; see Listener._wait."""
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(TICK_S)
            now = loop.time()
            for listener in list(self.listeners):
                listener.expire(now)


def _str(key: Any) -> str:
    return key.decode() if isinstance(key, bytes) else str(key)
