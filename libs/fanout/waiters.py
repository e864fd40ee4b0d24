"""Waiters on any stream of the shared tail (``tail.py``) that is not a cast log: a reader that
only needs to know that its stream has an entry past an id (a Durable Streams long poll at the
stream's tail, an SSE response between events: edge's ``/v1/stream``) waits on a future.

They subscribe to the process's one stream loop beside the casts (``streamtail.py``), which
names every waited key from the lowest id its waiters have read; an entry past a waiter's id wakes
it, and it reads by offset as every reader does. Nothing is decoded or queued here: a waiter costs
a future. A key that joins, or a waiter behind the others, wakes the read (``on_join``) so that the
next one includes it, as a cast that joins does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from castlog.keys import Rows, id_order

from .streamtail import Subscriber

# Entries per stream of one read while waiters wait: they need to know of one, and XREAD's COUNT is
# one for every key (a durable append is a whole request body: never a batch of them per read).
WAITED_ENTRIES_PER_READ = 1


class Waiter:
    __slots__ = ("after", "woken")

    def __init__(self, after: str) -> None:
        self.after = after
        self.woken: asyncio.Future[None] = asyncio.get_running_loop().create_future()


class Waiters(Subscriber):
    """Key -> who waits on it; ``on_join`` wakes the tail's blocked read."""

    count = WAITED_ENTRIES_PER_READ

    def __init__(self, on_join: Callable[[], None]) -> None:
        self.keys: dict[str, set[Waiter]] = {}
        self.on_join = on_join
        self.closing = False

    async def wait(self, key: str, after: str, seconds: float) -> bool:
        """Until the stream ``key`` has an entry past ``after`` (True), or ``seconds`` pass (False);
        True at once while the tail stops (the reader answers what there is)."""
        if self.closing:
            return True
        waiter = Waiter(after)
        joining = self.keys.get(key)
        self.keys.setdefault(key, set()).add(waiter)
        if joining is None or all(id_order(after) < id_order(w.after) for w in joining):
            self.on_join()  # the read in flight starts too late for this waiter, or leaves its key out
        try:
            await asyncio.wait_for(asyncio.shield(waiter.woken), seconds)
            return True
        except asyncio.TimeoutError:
            return False
        finally:
            waiters = self.keys.get(key)
            if waiters is not None:
                waiters.discard(waiter)
                if not waiters:
                    del self.keys[key]

    async def streams(self) -> dict[str, str]:
        """What the next XREAD names for the waiters: each key from its lowest waiter's id."""
        return {key: min((w.after for w in waiters), key=id_order) for key, waiters in self.keys.items()}

    async def take(self, got: dict[str, Rows], idle: list[str]) -> None:
        """Wake the waiters of each key read that its newest entry lies past."""
        for key, rows in got.items():
            waiters = self.keys.get(key)
            if not rows or waiters is None:
                continue
            newest = id_order(rows[-1][0])
            for waiter in [w for w in waiters if id_order(w.after) < newest]:
                waiters.discard(waiter)  # now: the next read must not start behind it again
                if not waiter.woken.done():
                    waiter.woken.set_result(None)
            if not waiters:
                del self.keys[key]

    def close(self) -> None:
        """The tail stops: every waiter wakes now (and reads what there is), later ones at once."""
        self.closing = True
        for waiters in self.keys.values():
            for waiter in waiters:
                if not waiter.woken.done():
                    waiter.woken.set_result(None)
        self.keys.clear()
