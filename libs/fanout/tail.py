"""One upstream tail per process, fanned out to every listener through bounded queues: edge's SSE,
MP3 and long polls, intake's ``/v1/audio/speech`` streams and live WebSockets all follow casts
through the one :class:`Tail` of their process (docs/design.md, "The shared tail").

The :class:`Tail` is what is cast-specific above the process's one stream loop
(``streamtail.py``: ONE blocked ``XREAD``, one per hash slot on a cluster): every cast with a
subscribed listener, a :class:`Watch` per cast (the last seq delivered, its ``cursor``; the stamps
``ts`` of the last records delivered; the listeners), each record decoded once and put on every
listener's bounded queue. Redis work per record does not depend on how many listen.

A :class:`~fanout.listener.Listener` (``listener.py``: one response following one cast) reads by offset
(:meth:`Tail.read`) to the end of the log, then joins (:meth:`Tail.subscribe`, synchronous: the
cursor it returns is exactly what the tail delivered). This module imports the listener; the
listener sees the tail only through its ``Hub`` protocol, so the imports go one way.

The same read follows streams that are not casts for readers that only wait for an entry past an
id (``waiters.py``: Durable Streams' long polls and SSE, :attr:`Tail.waiters`, the loop's other
subscriber): one blocked read per process whatever it follows. A join wakes the read
(``tail/wake/<wake>/*``, the service's name), so that the next one names the cast. On a Redis
Cluster the checks below run through the cluster client. Its counts go to a :class:`TailMetrics`
(each service names its own metrics).

A log can shrink or be rewritten under a cursor (docs/design.md, "The public read path"), and an
XREAD after it would skip the replacing records or wait forever. Each record names its
predecessor's stamp (``p``): rows whose first record is the cursor's next and names the stamp
the watch delivered at the cursor continue it, and go out unchecked. Otherwise the tail checks
the record at the cursor before it hands out a cast's rows, and it checks every cursor after a
join, an idle read or a lost connection: one command besides the XREAD (a small script, no bodies). A watch whose record is gone or replaced is dropped;
its listeners move back to the last record that still stands and read on by offset.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import Any, Protocol

from redis.asyncio import Redis, RedisCluster

from castlog.archive import ARCHIVE_FIELD
from castlog.keys import Row, Rows, cast_id_of, cast_key, entry_id, seq_of
from castlog.marks import follows, holds, stamps
from castlog.reader import FOLLOW_BLOCK_MS, READ_BATCH, LogReader
from castlog.records import decode_entry

from .listener import STAMP_HISTORY, Item, Listener, Stamp
from .streamtail import StreamTail, Subscriber
from .waiters import Waiters

log = logging.getLogger(__name__)

# Records from the tail a listener may hold in its queue before it is demoted to offset reads.
LISTENER_QUEUE = 64


def after_id(cursor: int) -> str:
    """The XREAD/XRANGE-exclusive id after seq ``cursor`` (-1: before the first record)."""
    return entry_id(cursor) if cursor >= 0 else "0-0"


def continues(watch: Watch | None, rows: list[Any]) -> bool:
    """Whether ``rows`` (one XREAD's, for ``watch``) continue what the watch delivered: the first
    is the next seq and names the cursor record's known stamp as its predecessor (``p``): the
    append that wrote it found the delivered record at the tail, so no check is needed (the check
    compares that same stamp)."""
    if watch is None or not rows:
        return False
    raw_id, fields = rows[0]
    return seq_of(raw_id) == watch.cursor + 1 and follows(fields, watch.stamp)


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


def _item(row: Row) -> Item | None:
    """A row read by offset as an Item (None: a kind this version does not know)."""
    entry = decode_entry(*row)
    return Item(entry) if entry is not None else None


class TailMetrics(Protocol):
    """What the tail counts; each service implements it with its own metric names."""

    def count_read(self) -> None:
        """One blocking XREAD issued."""

    def count_demoted(self, listeners: int) -> None:
        """Listeners moved back to offset reads (a full queue, or archived under the read)."""

    def count_rewind(self) -> None:
        """A watched log shrank or was rewritten under the cursor."""

    def count_listeners(self, kind: str, delta: int) -> None:
        """A listener of ``kind`` opened (+1) or closed (-1)."""


class Tail(Subscriber):
    """The shared tail of cast logs, and of the streams its ``waiters`` wait on, in a process
    (its connection ``conn`` sits in the one blocking XREAD; ``redis`` is the shared pool)."""

    def __init__(
        self, conn: Redis, redis: Redis, metrics: TailMetrics, *, reader: LogReader, wake: str,
        block_ms: int = FOLLOW_BLOCK_MS, batch: int = READ_BATCH, queue_size: int = LISTENER_QUEUE,
    ) -> None:
        # woken by its own wake streams, tail/wake/<wake>/* (the service's Redis user may add there)
        self.stream = StreamTail(conn, redis, wake, block_ms=block_ms, name="shared tail")
        # the cursors' checks: on one Redis the tail's own connection (idle between reads)
        self.probe = redis if isinstance(redis, RedisCluster) else conn
        self.reader = reader  # offset reads, archived logs included
        self.metrics = metrics
        self.count, self.queue_size = batch, queue_size
        # A listener holds at most queue_size records, in its queue or in its offset backlog.
        self.offset_batch = min(batch, queue_size)
        self.watches: dict[str, Watch] = {}
        self.listeners: set[Listener] = set()
        self.waiters = Waiters(self.stream.wake)  # other streams' readers, woken by an entry past their id
        self.stream.subscribers += [self.waiters, self]
        self.flushes: list[Listener] = []  # listeners with direct writes from the pass in progress
        self.closing = False
        self._unchecked: set[str] = set()  # casts whose cursor Redis has not confirmed yet
        self._read_with: dict[str, Watch] = {}  # the watches the read in flight was issued for

    # -- life cycle ---------------------------------------------------------------------------

    def start(self) -> None:
        self.stream.start()

    async def stop(self) -> None:
        self.close_listeners()
        await self.stream.stop()

    def close_listeners(self) -> None:
        """Shutdown: every streaming response ends now; its client resumes from its last id."""
        self.closing = True
        for listener in list(self.listeners):
            listener.close()
        self.watches.clear()
        self.waiters.close()

    @asynccontextmanager
    async def listen(self, cast_id: str, seq_num: int, kind: str) -> AsyncIterator[Listener]:
        """A listener on ``cast_id`` from ``seq_num``; it leaves the tail when the block ends."""
        listener = Listener(self, cast_id, seq_num)
        self.listeners.add(listener)
        self.metrics.count_listeners(kind, 1)
        try:
            if self.closing:
                listener.close()
            yield listener
        finally:
            self.metrics.count_listeners(kind, -1)
            self.listeners.discard(listener)
            self.unsubscribe(listener)
            listener.disarm()

    # -- the watched set (synchronous: no await between a join and its cursor) ---------------

    def subscribe(self, listener: Listener) -> int:
        """Join ``listener`` to the tail's feed; return the seq the tail delivered up to."""
        watch = self.watches.get(listener.cast_id)
        if watch is None:
            cursor = listener.next_seq - 1
            watch = self.watches[listener.cast_id] = Watch(cursor, listener.stamps_upto(cursor))
            self._unchecked.add(listener.cast_id)
            self.stream.wake()  # the blocked read ends, and the next one names the cast
        watch.listeners.add(listener)
        return watch.cursor

    def unsubscribe(self, listener: Listener) -> None:
        watch = self.watches.get(listener.cast_id)
        if watch is not None:
            watch.listeners.discard(listener)
            if not watch.listeners:
                del self.watches[listener.cast_id]  # the next XREAD leaves it out

    async def read(self, cast_id: str, low: str, high: str, count: int) -> tuple[list[Row], list[Item]]:
        """The one read by offset (listeners catching up, demoted or moved back), archived logs
        included: its rows, and their Items shared by every listener that reads them, each built
        once and kept beside its row in the reader's cache (rows of unknown kinds have none)."""
        rows = await self.reader.rows(cast_id, low, high, count)
        if self.reader.cache is None:
            return rows, [item for row in rows if (item := _item(row)) is not None]
        return rows, self.reader.cache.built(cast_id, rows, _item)

    # -- the tail: a subscriber of the process's stream loop -----------------------------------------

    async def streams(self) -> dict[str, str]:
        """Every watch's key after its cursor (no await from here to the XREAD: a join wakes it)."""
        self._read_with = dict(self.watches)
        return {cast_key(c): after_id(w.cursor) for c, w in self._read_with.items()}

    async def take(self, got: dict[str, Rows], idle: list[str]) -> None:
        """The read's rows: the casts whose cursor they do not prove checked, then handed out.
        The casts whose read ended idle (every watch's on a single Redis, the timed-out slots'
        only on a cluster) are checked too: a cursor past a shrunk log reads nothing."""
        self.metrics.count_read()
        read_with = self._read_with
        rows = [(c, r) for key, r in got.items() if (c := cast_id_of(key)) is not None]  # each key parsed once
        self._unchecked.update(c for key in idle if (c := cast_id_of(key)) is not None)
        await self._check(self._unproven(rows, read_with) | self._unchecked)
        self._fan_out(rows, read_with)

    def read_failed(self) -> None:
        """The cursors stay (the next read brings the rows again); the server may have restarted with less."""
        self._unchecked.update(self.watches)

    def _unproven(self, got: list[tuple[str, Any]], read_with: dict[str, Watch]) -> set[str]:
        """The casts read whose rows do not prove by themselves that the log still holds the
        watch's cursor record: those need the check before their rows are handed out."""
        out = set()
        for cast_id, rows in got:
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
        found = await stamps(self.probe, [(c, w.cursor) for c, w in watches.items()])  # no bodies
        for (cast_id, watch), stamp in zip(watches.items(), found):
            if not holds(stamp, watch.cursor, watch.stamp):
                await self._rewind(cast_id, watch)

    async def _rewind(self, cast_id: str, watch: Watch) -> None:
        """Move the watch's listeners back to the last delivered record that Redis still holds."""
        had = list(watch.stamps)
        found = await stamps(self.probe, [(cast_id, seq) for seq, _ in had])
        keep = max((seq for (seq, ts), now in zip(had, found) if holds(now, seq, ts)), default=-1)
        log.warning("cast %s: the log no longer holds what the tail delivered after seq %d; "
                    "moving %d listener(s) back", cast_id, keep, len(watch.listeners))
        self.metrics.count_rewind()
        if self.watches.get(cast_id) is watch:
            del self.watches[cast_id]
        for listener in tuple(watch.listeners):
            listener.rewind(keep + 1)
        watch.listeners.clear()

    def _fan_out(self, got: list[tuple[str, Any]], read_with: dict[str, Watch]) -> None:
        """Hand each row to the listeners of the watch that the read was issued for.

        A cast whose watch ended during the read (its last listener left, or it was rewound) is
        skipped, and so is one whose watch was re-created meanwhile: the new watch's cursor came
        from its joiner's offset read, which may be behind or ahead of this read's, so these
        rows could leave a gap or repeat; the next read starts at the new cursor.
        """
        for cast_id, rows in got:
            watch = read_with.get(cast_id)
            if watch is None or self.watches.get(cast_id) is not watch:
                continue
            try:
                self._hand_out(cast_id, watch, rows)
            finally:
                self._flush()  # this cast's direct writes go out before the next cast's pass

    def _flush(self) -> None:
        flushes, self.flushes = self.flushes, []
        for listener in flushes:
            listener.flush()

    def _hand_out(self, cast_id: str, watch: Watch, rows: list[Any]) -> None:
        """One cast's rows to its watch's listeners, each record decoded once."""
        if self.reader.cache is not None and not any(ARCHIVE_FIELD in f for _, f in rows):
            self.reader.cache.keep(cast_id, rows)  # listeners catching up read them from here
        for raw_id, fields in rows:
            entry = decode_entry(raw_id, fields)  # once per record, whoever listens
            seq = entry.seq_num if entry is not None else seq_of(raw_id)
            if seq > watch.cursor + 1 and ARCHIVE_FIELD in fields:
                # archived before this read reached it: the records between are in the
                # archive now, so every listener goes back to reading by offset (no gap)
                self.metrics.count_demoted(len(watch.listeners))
                for listener in watch.listeners:
                    listener.demote()
                watch.listeners.clear()
                break
            if entry is None:  # a kind this version does not know: its place and stamp only
                watch.delivered(seq, int(fields.get(b"ts", 0)) or None)
                continue
            item = Item(entry, from_tail=True)
            watch.delivered(*item.stamp)
            # offer() never touches the watched set, so the set is walked as it is (no copy)
            demoted = [listener for listener in watch.listeners if not listener.offer(item)]
            if demoted:
                watch.listeners.difference_update(demoted)
                self.metrics.count_demoted(len(demoted))
            if item.terminal:
                watch.listeners.clear()  # each got the terminal record: their streams end
                break
        if not watch.listeners:
            del self.watches[cast_id]

