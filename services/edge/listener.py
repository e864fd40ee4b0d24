"""A listener: one reader of one cast, replaying by offset and then fed by the shared tail.

See ``tail.py`` for the hand-over (join, catch up by offset, dedupe by seq_num) and demotion.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Iterable
from typing import TYPE_CHECKING

from castlog import decode_entry, entry_id, is_terminal, seq_of

from .public import Item

if TYPE_CHECKING:
    from .tail import Tail

# Stamps (seq_num, ts) of delivered records kept: how far back a rewritten log is matched.
STAMP_HISTORY = 64
# Waits at least this long (heartbeats) end on the tail's ticker rather than a timer each.
TICKED_TIMEOUT_S = 5.0
NO_DEADLINE = float("inf")


class Listener:
    """One reader of one cast, from ``next_seq`` on. Use :meth:`next`; see the module notes.

    The live queue is a deque bounded by the tail's ``queue_size`` plus one waiter future: a
    record costs a listener one append and one wake-up, no task and no timer.
    """

    def __init__(self, tail: Tail, cast_id: str, seq_num: int) -> None:
        self.tail, self.cast_id, self.next_seq = tail, cast_id, seq_num
        self.queue: deque[Item] = deque()  # live records from the tail, at most tail.queue_size
        self.backlog: deque[Item] = deque()  # records read by offset, in order from next_seq
        self.subscribed = False
        self.demotions = 0
        self.finished = False  # delivered the log's terminal record
        self.closed = False  # the edge is stopping
        self._catch_up_to = -1  # records up to here come by offset although subscribed
        self._end_after = -1  # a short offset read ended with this terminal record
        self._last_terminal = False
        self._waiter: asyncio.Future[bool] | None = None
        self.stamps: deque[tuple[int, int | None]] = deque(maxlen=STAMP_HISTORY)  # of delivered records
        self.rewinds = 0
        self.deadline = NO_DEADLINE  # loop time when a long wait ends (see _wait)

    @property
    def done(self) -> bool:
        return self.finished or self.closed

    # -- called by the tail (synchronous) -------------------------------------------------------

    def offer(self, item: Item) -> bool:
        """The tail's hand-off; False when the queue is full (the listener is demoted)."""
        if len(self.queue) >= self.tail.queue_size:
            self.demote()
            return False
        self.queue.append(item)
        self._wake()
        return True

    def stamps_upto(self, seq: int) -> Iterable[tuple[int, int | None]]:
        """The stamps of the records delivered last, if the last one is ``seq`` (else none)."""
        return self.stamps if self.stamps and self.stamps[-1][0] == seq else ()

    def rewind(self, seq: int) -> None:
        """The log no longer holds what was delivered from ``seq`` on (it shrank or was
        rewritten): read it again by offset from there; the records that replaced the lost
        ones follow, the new ``start`` included."""
        self.next_seq = min(self.next_seq, seq)
        self.subscribed = False
        self.rewinds += 1
        self.queue.clear()
        self.backlog.clear()
        self._catch_up_to = self._end_after = -1
        self._last_terminal = False
        self._wake()

    def demote(self) -> None:
        """Back to reading by offset from ``next_seq`` (the tail already dropped us)."""
        self.subscribed = False
        self.demotions += 1
        self.queue.clear()  # free the memory now: these records are read again by offset
        self._wake()

    def close(self) -> None:
        self.closed = True
        self.tail.unsubscribe(self)
        self.subscribed = False
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(True)

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
        """Until the tail offers a record (True) or ``timeout`` passes (False).

        Long timeouts (heartbeats) are kept by the tail's ticker rather than a timer each: a
        timer per wait costs a heap push and a cancel per record and listener."""
        loop = asyncio.get_running_loop()
        waiter = self._waiter = loop.create_future()
        timer = None
        if timeout is not None and timeout < TICKED_TIMEOUT_S:
            timer = loop.call_later(timeout, _expire, waiter)
        elif timeout is not None:
            self.deadline = loop.time() + timeout
        try:
            return await waiter
        finally:
            self._waiter = None
            self.deadline = NO_DEADLINE
            if timer is not None:
                timer.cancel()

    def expire(self, now: float) -> None:
        """The ticker's check: end a wait whose deadline passed."""
        if self.deadline <= now and self._waiter is not None:
            _expire(self._waiter)

    def _deliver(self, item: Item) -> Item:
        self.next_seq = item.seq + 1
        self.stamps.append((item.seq, item.entry.ts or None))
        terminal = is_terminal(item.entry.record)
        self._last_terminal = terminal
        # live: the tail saw nothing after it; offset: the read that returned it ended there
        if terminal and (item.live or item.seq == self._end_after):
            self.finished = True
        return item

    async def _read(self, upto: int | None = None) -> int:
        """One XRANGE from next_seq (to ``upto``) into the backlog; the number of rows read."""
        high = entry_id(upto) if upto is not None else "+"
        count = self.tail.offset_batch
        rows = await self.tail.reads.xrange(self.tail.reader, self.cast_id, entry_id(self.next_seq), high, count)
        for raw_id, fields in rows:
            entry = decode_entry(raw_id, fields)
            if entry is not None:
                self.backlog.append(Item(entry))
        if upto is None and rows and len(rows) < count and self.backlog:
            last = self.backlog[-1]
            if is_terminal(last.entry.record):
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


def _expire(waiter: asyncio.Future[bool]) -> None:
    if not waiter.done():
        waiter.set_result(False)
