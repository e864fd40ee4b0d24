"""Where one consumer's jobs come from, in order: its own pending entries found at start-up (a
restart), its retries whose backoff ran out, jobs handed back by a stopping worker (at once),
entries of dead workers (XAUTOCLAIM after the lease), and finally new entries.

Jobs already begun elsewhere (handed back, or a dead worker's) are taken even without admission
room (:meth:`Inbox.take_begun`): their listeners are waiting now."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Container
from dataclasses import dataclass

from redis.asyncio import Redis

import castlog

from . import jobs

log = logging.getLogger(__name__)

# XAUTOCLAIM calls per take-over round; each scans 10 pending entries per free slot.
MAX_CLAIM_SCANS = 20


@dataclass(frozen=True)
class Delivery:
    entry_id: str
    fields: jobs.Fields
    deliveries: int | None  # None: not known from the command that delivered it; ask XPENDING


class Inbox:
    def __init__(
        self,
        redis: Redis,
        consumer: str,
        *,
        lease_ms: int,
        claim_every_s: float,
        poll_s: float,
        clock: Callable[[], float] = time.monotonic,
        stream: str = castlog.JOBS,
    ) -> None:
        self.redis, self.consumer, self.stream = redis, consumer, stream
        self.lease_ms, self.claim_every_s, self.poll_s = lease_ms, claim_every_s, poll_s
        self._clock = clock
        self._backlog: list[jobs.StreamEntry] = []
        self._retrying: dict[str, float] = {}  # entry id -> clock time the retry is due
        self._last_claim = -float("inf")
        self._claim_from = "0-0"  # where the next XAUTOCLAIM scan of the pending list goes on

    async def open(self) -> None:
        """Create the group if needed and pick up what this consumer left pending."""
        await jobs.ensure_group(self.redis, self.stream)
        self._backlog = await jobs.read_own_pending(self.redis, self.consumer, self.stream)
        if self._backlog:
            log.info("resuming %d job(s) pending for consumer %s", len(self._backlog), self.consumer)

    def retry_later(self, entry_id: str, delay_s: float) -> None:
        """Keep the entry pending and deliver it to ourselves again after ``delay_s``."""
        self._retrying[entry_id] = self._clock() + delay_s

    def held(self) -> list[str]:
        """Entries this consumer holds without working on them yet (their leases need refreshing)."""
        return list(self._retrying) + [entry_id for entry_id, _ in self._backlog]

    def forget(self, entry_id: str) -> None:
        """The entry is no longer ours (taken over or acknowledged elsewhere)."""
        self._retrying.pop(entry_id, None)
        self._backlog = [(i, f) for i, f in self._backlog if i != entry_id]

    async def take(self, room: int, active: Container[str]) -> list[Delivery]:
        """Up to ``room`` deliveries; waits at most ``poll_s`` (less when a retry is due sooner)."""
        out: list[Delivery] = []
        while self._backlog and len(out) < room:
            entry_id, fields = self._backlog.pop(0)
            out.append(Delivery(entry_id, fields, None))
        now = self._clock()
        due = [i for i, at in self._retrying.items() if at <= now][: room - len(out)]
        owners = await jobs.pending(self.redis, due, self.stream)
        for entry_id in due:
            del self._retrying[entry_id]
            if entry_id in owners and owners[entry_id].consumer == self.consumer:  # still ours
                claimed = await jobs.claim(self.redis, self.consumer, entry_id, self.stream)  # counts a delivery
                if claimed is not None:
                    out.append(Delivery(entry_id, claimed[1], None))
        if len(out) < room:
            out += await self.take_begun(room - len(out), active)
        if not out:
            block_ms = max(1, int(1000 * min(self.poll_s, self._until_next_retry())))
            new = await jobs.read_new(self.redis, self.consumer, room, block_ms, self.stream)
            out = [Delivery(i, f, 1) for i, f in new]
        return out

    async def take_begun(self, room: int, active: Container[str]) -> list[Delivery]:
        """Up to ``room`` jobs begun by other workers: handed back (checked on every call, one
        XPENDING) and, every ``claim_every_s``, those whose lease expired."""
        if room <= 0:
            return []
        out = [Delivery(i, f, None) for i, f in await jobs.handed_back(self.redis, self.consumer, room, self.stream)]
        for delivery in out:
            log.info("took over job %s, handed back by a stopping worker", delivery.entry_id)
        now = self._clock()
        if len(out) < room and now - self._last_claim >= self.claim_every_s:
            self._last_claim = now
            out += await self._take_over(room - len(out), active)
            gone = await jobs.remove_gone_consumers(self.redis, self.lease_ms, self.consumer, self.stream)
            if gone:
                log.info("removed consumers that are gone and hold nothing: %s", ", ".join(gone))
        return out

    async def _take_over(self, room: int, active: Container[str]) -> list[Delivery]:
        """Up to ``room`` entries of dead workers, scanning on through the pending list (each
        XAUTOCLAIM looks at only ``10 * room`` entries) until its end or ``MAX_CLAIM_SCANS``."""
        out: list[Delivery] = []
        for _ in range(MAX_CLAIM_SCANS):
            self._claim_from, claimed = await jobs.autoclaim(
                self.redis, self.consumer, self.lease_ms, room - len(out), self._claim_from, self.stream
            )
            for entry_id, fields in claimed:
                if entry_id not in active:  # our own active job, idle for a lease: a stalled loop
                    log.info("took over job %s after its lease expired", entry_id)
                    out.append(Delivery(entry_id, fields, None))
            if len(out) >= room or self._claim_from == "0-0":
                break
        return out

    def _until_next_retry(self) -> float:
        if not self._retrying:
            return self.poll_s
        return max(0.001, min(self._retrying.values()) - self._clock())
