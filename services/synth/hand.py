"""A worker's hand: its active casts, its two inboxes, and the events its tasks wake each
other with.

Every task of the worker reads and changes this one object (through the worker's
:class:`~synth.crew.Crew`): the admitter adds casts, the synth loop picks from them, the
outcomes drop them (:meth:`Hand.close`).
Beside it, the small helpers those tasks share: wait on an event for a while, shrug off a Redis
error in a step that may fail, and pause a loop after one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from redis.exceptions import RedisError

from .cast import ActiveCast, Assignment
from .inbox import Inbox
from .metrics import SynthMetrics

log = logging.getLogger(__name__)

# After a Redis error, the admitters and the key lane mover wait this long before trying again.
REDIS_RETRY_S = 1.0


class Hand:
    """The casts in hand (keyed by job, in admission order) and the jobs taken for them."""

    def __init__(self, inbox: Inbox, live_inbox: Inbox, metrics: SynthMetrics) -> None:
        self.inbox = inbox
        # Open casts come through their own stream, admitted apart from the others (SYNTH_MAX_LIVE).
        self.live_inbox = live_inbox
        self.inboxes = (inbox, live_inbox)
        self.metrics = metrics
        self.casts: dict[str, ActiveCast] = {}  # job entry id -> cast, in admission order
        self.requeued: set[str] = set()  # jobs this worker put back itself after a Redis error
        self.admitting = 0  # jobs taken from the inbox together and not yet admitted
        self.work = asyncio.Event()  # a cast was admitted, or stop() was called
        self.room = asyncio.Event()  # a cast left, or stop() was called
        # an open cast was admitted: wakes the worker's stream loop, whose next read names its catalog
        self.opened: Callable[[], None] = lambda: None
        self.stopping = False  # stop() was called: take no more work

    def stop(self) -> None:
        self.stopping = True
        self.work.set()
        self.room.set()

    def active(self, inbox: Inbox) -> set[str]:
        """The entry ids of ``inbox``'s jobs whose casts are in hand."""
        return {c.job.entry_id for c in self.casts.values() if c.job.stream == inbox.stream}

    def inbox_of(self, job: Assignment) -> Inbox:
        return self.live_inbox if job.live else self.inbox

    def add(self, cast: ActiveCast) -> None:
        self.casts[cast.job.key] = cast
        self.metrics.active_casts.set(len(self.casts))
        self.work.set()
        if cast.live:
            self.opened()

    def close(self, cast: ActiveCast) -> None:
        """The cast's attempt is over (whatever its outcome): drop it, and make room."""
        cast.closed = True
        self.casts.pop(cast.job.key, None)
        self.metrics.active_casts.set(len(self.casts))
        self.room.set()


async def quietly(step: Awaitable[object], what: str = "a best-effort step") -> None:
    """Await ``step``; a Redis error is logged, not raised (the step is a best effort, or a
    loop's round that the next round repeats)."""
    try:
        await step
    except RedisError as exc:
        log.warning("%s: Redis error (%s)", what, exc)


async def pause_after(exc: RedisError, what: str) -> bool:
    """A loop's Redis error: logged, then a pause of ``REDIS_RETRY_S`` before its next round.
    True when Redis lost its data (a restart without persistence): the loop's group is gone."""
    log.warning("%s: Redis error (%s); retrying in %.1fs", what, exc, REDIS_RETRY_S)
    await asyncio.sleep(REDIS_RETRY_S)
    return "NOGROUP" in str(exc)


async def wait(event: asyncio.Event, timeout_s: float) -> None:
    """Wait until ``event`` is set or ``timeout_s`` passed, then re-arm it."""
    try:
        await asyncio.wait_for(event.wait(), timeout_s)
    except asyncio.TimeoutError:
        pass
    event.clear()
