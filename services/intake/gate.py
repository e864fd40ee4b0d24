"""Admission: at most N submits use Redis at once, at most M more wait; past that, shed with 503.

castlog's connection pool makes callers wait for a free connection, but any number of them:
under overload that queue (and the requests behind it) would grow without bound. The gate sits
before the body is read, so a waiting request holds no body in memory, and answers clearly when
the queue is full.
"""

from __future__ import annotations

import asyncio

from .validate import Refusal

# Seconds a shed request is told to wait before trying again.
BUSY_RETRY_S = 1


class InflightGate:
    def __init__(self, limit: int, waiting: int) -> None:
        self.limit = limit
        self.max_waiting = waiting
        self.active = 0
        self.waiting = 0
        self._slots = asyncio.Semaphore(limit)

    async def acquire(self) -> None:
        """Take a slot, waiting for one while fewer than ``max_waiting`` wait; else 503 busy."""
        if self._slots.locked() and self.waiting >= self.max_waiting:
            raise Refusal(503, "busy", "intake is overloaded; retry in a second", {"Retry-After": str(BUSY_RETRY_S)})
        self.waiting += 1
        try:
            await self._slots.acquire()
        finally:
            self.waiting -= 1
        self.active += 1

    def release(self) -> None:
        self.active -= 1
        self._slots.release()
