"""One listener: one response that follows one cast (an SSE or MP3 response of edge, a ``/v1``
stream or a live WebSocket of intake). A bounded queue fed by the shared tail, offset
reads before it joins and whenever it is demoted or moved back, and one lazily moved alarm for
its wait.

A :class:`Listener` reads by offset (:meth:`Hub.read`, castlog's ``LogReader``) to the end of the
log, then joins. Joining is synchronous: the tail has delivered exactly up to the cursor and every
later record reaches the queue, so the listener reads by offset up to the cursor, then takes the
queue, dropping what lies below its position: no gap, no duplicate. A full queue demotes it to
offset reads until it catches up: a slow client holds at most one queue.

It knows the tail only as a :class:`Hub` (``fanout.tail.Tail`` is the one): this module imports
nothing from ``tail.py``, which imports it. An :class:`Item` is one record on its way to every
listener of it, its public JSON and SSE frame built once.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Iterable
from typing import Protocol

from castlog.keys import Row, entry_id, seq_of
from castlog.records import Entry, is_terminal, public_dict
from servicekit import encode_json, sse

# Stamps (seq_num, ts) of delivered records kept: how far back a rewritten log is matched.
STAMP_HISTORY = 64
NO_DEADLINE = float("inf")
# An alarm may ring this much before its deadline (the loop's clock) and still end the wait.
ALARM_SLACK_S = 0.001

Stamp = tuple[int, int | None]



class Item:
    """One record on its way to listeners; the tail hands the same Item to every listener, so
    its JSON and its SSE frame are built once, by whichever listener writes it first."""

    __slots__ = ("entry", "from_tail", "stamp", "terminal", "_json", "_sse", "_chunk")

    def __init__(self, entry: Entry, *, from_tail: bool = False) -> None:
        self.entry = entry
        self.from_tail = from_tail  # came from the shared tail (not an offset read): counts for latency
        # what each delivery of it notes, made once for every listener
        self.stamp: Stamp = (entry.seq_num, entry.ts or None)
        self.terminal = is_terminal(entry.record)
        self._json: bytes | None = None
        self._sse: bytes | None = None
        self._chunk: bytes | None = None

    @property
    def seq(self) -> int:
        return self.entry.seq_num

    def json(self) -> bytes:
        if self._json is None:
            self._json = encode_json(public_dict(self.entry))
        return self._json

    def sse(self) -> bytes:
        """``id:`` the seq_num, ``event:`` the kind, ``data:`` the public JSON (one line)."""
        if self._sse is None:
            self._sse = sse.frame(self.json(), event=self.entry.kind, event_id=self.seq)
        return self._sse

    def sse_chunk(self) -> bytes:
        """The SSE frame as one HTTP/1.1 chunk (size line, frame, CRLF): written as it is."""
        if self._chunk is None:
            frame = self.sse()
            self._chunk = b"%x\r\n%s\r\n" % (len(frame), frame)
        return self._chunk


class Sink(Protocol):
    """A response that writes records itself (edge's SSE: straight to its transport)."""

    def ready(self) -> bool:
        """Whether a write now goes out at once (the client took what it was sent)."""
        ...

    def write(self, items: list[Item]) -> None:
        """Write ``items`` (in order, one write)."""
        ...


class Hub(Protocol):
    """What a listener uses of the shared tail: its limits, the watched set, the offset read and
    the records' shared Items, and the list of listeners with direct writes to flush."""

    queue_size: int  # records from the tail a listener may hold in its queue
    offset_batch: int  # records per offset read (what the offset backlog holds at most)
    # Listeners holding direct writes of the tail's pass in progress: it flushes them after the
    # pass over a cast's rows (one write per listener and read, no callback per listener).
    flushes: list[Listener]

    def subscribe(self, listener: Listener) -> int:
        """Join the tail's feed; the seq the tail delivered up to (synchronous: no gap)."""
        ...

    def unsubscribe(self, listener: Listener) -> None: ...

    async def read(self, cast_id: str, low: str, high: str, count: int) -> tuple[list[Row], list[Item]]:
        """A read by offset, archived logs included: its rows, and their records as Items shared by
        every listener that reads them (their JSON and frames built once; unknown kinds left out)."""
        ...


class Listener:
    """One response's way through one cast from ``next_seq`` on (use :meth:`next`). A record costs it one
    append to a deque bounded by ``queue_size`` and one wake-up of its waiter: no task, no timer
    (its timeout is one alarm moved on lazily: it rings about once per timeout)."""

    def __init__(self, tail: Hub, cast_id: str, seq_num: int) -> None:
        self.tail, self.cast_id, self.next_seq = tail, cast_id, seq_num
        self.queue: deque[Item] = deque()  # records from the tail, at most tail.queue_size
        self.backlog: deque[Item] = deque()  # records read by offset, in order from next_seq
        self.subscribed = False
        self.demotions = 0
        self.finished = False  # delivered the log's terminal record
        self.closed = False  # the edge is stopping
        self.stamps: deque[Stamp] = deque(maxlen=STAMP_HISTORY)  # of delivered records
        self._catch_up_to = -1  # records up to here come by offset although subscribed
        self._end_after = -1  # a short offset read ended with this terminal record
        self._last_terminal = False
        self._waiter: asyncio.Future[bool] | None = None
        self._deadline = NO_DEADLINE  # loop time when the wait in progress times out
        self._alarm: asyncio.TimerHandle | None = None
        # Set by a response that can write records itself: while its handler waits with nothing
        # pending, the tail's hand-offs are written for it (no queue, no wake-up of its task),
        # those of one read together, right after the tail's pass (one write).
        self.direct: Sink | None = None
        self._direct_pending: list[Item] = []

    @property
    def done(self) -> bool:
        return self.finished or self.closed

    # -- called by the tail (synchronous) -------------------------------------------------------

    def offer(self, item: Item) -> bool:
        """The tail's hand-off; False when the queue is full (the listener is demoted)."""
        direct = self.direct
        if direct is not None and self._idle(item):
            if item.seq < self.next_seq:
                return True  # seen at the hand-over
            pending = self._direct_pending
            if pending or direct.ready():
                if not pending:
                    self.tail.flushes.append(self)
                pending.append(item)
                self._deliver(item)
                if self.finished:
                    self.flush()  # before the handler ends the response
                    self._wake(True)
                return True
        if len(self.queue) >= self.tail.queue_size:
            self.demote()
            return False
        self.queue.append(item)
        self._wake(True)
        return True

    def flush(self) -> None:
        """Write the direct hand-offs of the tail's pass (the tail calls it after the pass)."""
        items, self._direct_pending = self._direct_pending, []
        if items and self.direct is not None:
            self.direct.write(items)

    def _idle(self, item: Item) -> bool:
        """The handler waits with nothing pending, and ``item`` is next (or below it)."""
        waiter = self._waiter
        return (waiter is not None and not waiter.done() and self.subscribed and not self.queue and not self.backlog
                and item.seq <= self.next_seq and self.next_seq > self._catch_up_to)

    def stamps_upto(self, seq: int) -> Iterable[Stamp]:
        """The stamps of the records delivered last, if the last one is ``seq`` (else none)."""
        return self.stamps if self.stamps and self.stamps[-1][0] == seq else ()

    def rewind(self, seq: int) -> None:
        """The log no longer holds what was delivered from ``seq`` on (it shrank or was
        rewritten): read it again by offset from there; the records that replaced the lost
        ones follow, the new ``start`` included."""
        self.next_seq = min(self.next_seq, seq)
        self.subscribed = False
        self.queue.clear()
        self.backlog.clear()
        self._catch_up_to = self._end_after = -1
        self._last_terminal = False
        self._wake(True)

    def demote(self) -> None:
        """Back to reading by offset from ``next_seq`` (the tail already dropped us)."""
        self.subscribed = False
        self.demotions += 1
        self.queue.clear()  # free the memory now: these records are read again by offset
        self._wake(True)

    def close(self) -> None:
        self.closed = True
        self.tail.unsubscribe(self)
        self.subscribed = False
        self._wake(True)

    def disarm(self) -> None:
        if self._alarm is not None:
            self._alarm.cancel()
            self._alarm = None

    def _wake(self, came: bool) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(came)

    # -- called by the handler ------------------------------------------------------------------

    async def next(self, timeout: float | None) -> Item | None:
        """The next record, or None: nothing within ``timeout`` (0: don't wait) or :attr:`done`."""
        while not self.done:
            item = self._take()
            if item is not None:
                return item
            if self.next_seq <= self._catch_up_to:
                await self._read(upto=self._catch_up_to)
            elif not self.subscribed:
                await self._read_or_join()
            elif (timeout is not None and timeout <= 0) or not await self._wait(timeout):
                return None
        return None

    def ready(self, limit: int) -> list[Item]:
        """Up to ``limit`` more records that are here already (to write them in one go)."""
        out: list[Item] = []
        while len(out) < limit and not self.done:
            item = self._take()
            if item is None:
                break
            out.append(item)
        return out

    def _take(self) -> Item | None:
        if self.backlog:
            return self._deliver(self.backlog.popleft())
        if not self.subscribed or self.next_seq <= self._catch_up_to:
            return None  # the next record must be read by offset first
        while self.queue:
            item = self.queue.popleft()
            if item.seq >= self.next_seq:  # below: seen at the hand-over
                return self._deliver(item)
        return None

    async def _wait(self, timeout: float | None) -> bool:
        """Until the tail offers a record (True) or ``timeout`` passes (False)."""
        loop = asyncio.get_running_loop()
        self._waiter = loop.create_future()
        if timeout is not None:
            self._deadline = loop.time() + timeout
            if self._alarm is None or self._alarm.when() > self._deadline:
                self.disarm()
                self._alarm = loop.call_at(self._deadline, self._ring)
        try:
            return await self._waiter
        finally:
            self._waiter = None
            self._deadline = NO_DEADLINE

    def _ring(self) -> None:
        """The alarm: time out the wait in progress if its deadline came, else move the alarm to
        that deadline (a wait that began after the alarm was set)."""
        self._alarm = None
        if self._waiter is None or self._deadline == NO_DEADLINE:
            return
        loop = asyncio.get_running_loop()
        if self._deadline <= loop.time() + ALARM_SLACK_S:
            self._wake(False)
        else:
            self._alarm = loop.call_at(self._deadline, self._ring)

    def _deliver(self, item: Item) -> Item:
        self.next_seq = item.seq + 1
        self.stamps.append(item.stamp)
        terminal = self._last_terminal = item.terminal
        # from the tail: it saw nothing after it; offset: the read that returned it ended there
        if terminal and (item.from_tail or item.seq == self._end_after):
            self.finished = True
        return item

    async def _read(self, upto: int | None = None) -> int:
        """One read by offset from next_seq (to ``upto``) into the backlog; the rows read."""
        high = entry_id(upto) if upto is not None else "+"
        count = self.tail.offset_batch
        rows, items = await self.tail.read(self.cast_id, entry_id(self.next_seq), high, count)
        self.backlog.extend(items)
        if upto is None and rows and len(rows) < count and self.backlog:
            last = self.backlog[-1]
            if last.terminal:
                self._end_after = last.seq
        if rows and not self.backlog:
            self.next_seq = seq_of(rows[-1][0]) + 1  # only unknown kinds: step over them
        return len(rows)

    async def _read_or_join(self) -> None:
        if await self._read():
            return
        if self._last_terminal:
            self.finished = True  # the terminal record we delivered is still the last one
            return
        if self.done:
            return
        self.queue.clear()  # anything left from before a demotion is read again by offset
        cursor = self.tail.subscribe(self)
        self.subscribed = True
        self._catch_up_to = cursor  # records the tail delivered before we joined
