"""Where one consumer's jobs come from, in order: its own pending entries found at start-up (a
restart), its retries whose backoff ran out, jobs handed back by a stopping worker (at once),
entries of dead workers (XAUTOCLAIM after the lease), and finally new entries.

New entries are taken in turn by client (the job's ``client``, who submitted it), not first come
first served: the inbox reads up to ``fair_window`` (SYNTH_FAIR_WINDOW) new entries ahead
(pending to this consumer, their leases refreshed like any held entry) and hands them out one
client at a time, round robin, each client's own in order. A burst of one client delays another's
job by at most one of its own per turn (docs/security.md, "Fair queues and text in linear time").

Jobs already begun elsewhere (handed back, or a dead worker's) are taken even without admission
room (:meth:`Inbox.take_begun`): their listeners are waiting now."""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Container
from dataclasses import dataclass
from itertools import zip_longest

from redis.asyncio import Redis

import castlog

from . import jobs
from .config import FAIR_WINDOW

log = logging.getLogger(__name__)

# XAUTOCLAIM calls per take-over round; each scans 10 pending entries per free slot.
MAX_CLAIM_SCANS = 20
# Entries fetched per round trip when re-reading one's own pending list at start-up.
PENDING_PAGE = 100


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
        stream: str = castlog.JOBS,
        fair_window: int = FAIR_WINDOW,
    ) -> None:
        self.redis, self.consumer, self.stream = redis, consumer, stream
        self.group = castlog.Consumer(redis, castlog.GROUP, consumer, stream, lease_ms=lease_ms)
        self.fair_window = fair_window
        self._waiting = Turns()  # new entries read ahead, by client
        self.lease_ms, self.claim_every_s, self.poll_s = lease_ms, claim_every_s, poll_s
        self._backlog: list[castlog.StreamEntry] = []
        self._retrying: dict[str, float] = {}  # entry id -> clock time the retry is due
        self._last_claim = -float("inf")

    async def open(self) -> None:
        """Create the group if needed and pick up what this consumer left pending."""
        await self.group.create()
        self._backlog = await self.group.own(PENDING_PAGE, every=True)
        if self._backlog:
            log.info("resuming %d job(s) pending for consumer %s", len(self._backlog), self.consumer)

    def retry_later(self, entry_id: str, delay_s: float) -> None:
        """Keep the entry pending and deliver it to ourselves again after ``delay_s``."""
        self._retrying[entry_id] = time.monotonic() + delay_s

    def held(self) -> list[str]:
        """Entries this consumer holds without working on them yet (their leases need refreshing)."""
        return [*self._retrying, *(e.id for e in self._backlog + self._waiting.order())]

    def waiting(self) -> list[str]:
        """The cast ids of the new jobs read ahead, in the order they will be admitted (the queue
        clerk's line starts with them)."""
        return [e.fields.get(b"id", b"").decode(errors="replace") for e in self._waiting.order()]

    def forget(self, entry_id: str) -> None:
        """The entry is no longer ours (taken over or acknowledged elsewhere)."""
        self._retrying.pop(entry_id, None)
        self._backlog = [e for e in self._backlog if e.id != entry_id]
        self._waiting.remove(entry_id)

    async def take(self, room: int, active: Container[str]) -> list[Delivery]:
        """Up to ``room`` deliveries; waits at most ``poll_s`` (less when a retry is due sooner)."""
        out = [Delivery(e.id, e.fields, None) for e in self._backlog[:room]]
        del self._backlog[:room]
        now = time.monotonic()
        due = [i for i, at in self._retrying.items() if at <= now][: room - len(out)]
        owners = await jobs.pending(self.redis, due, self.stream)
        for entry_id in due:
            del self._retrying[entry_id]
            if entry_id in owners and owners[entry_id].consumer == self.consumer:  # still ours
                claimed = await jobs.claim(self.redis, self.consumer, entry_id, self.stream)  # counts a delivery
                if claimed is not None:
                    out.append(Delivery(entry_id, claimed.fields, None))
        if len(out) < room:
            out += await self.take_begun(room - len(out), active)
        if not out:
            ahead = self.fair_window - len(self._waiting)
            if ahead > 0:  # wait for a new entry only when none is waiting
                block_ms = None if self._waiting else max(1, int(1000 * min(self.poll_s, self._until_next_retry())))
                for entry in await self.group.new(ahead, block_ms):
                    self._waiting.add(entry)
            out = [Delivery(e.id, e.fields, 1) for e in self._waiting.take(room)]
        return out

    async def take_begun(self, room: int, active: Container[str]) -> list[Delivery]:
        """Up to ``room`` jobs begun by other workers: handed back (checked on every call, one
        XPENDING) and, every ``claim_every_s``, those whose lease expired."""
        if room <= 0:
            return []
        back = await jobs.handed_back(self.redis, self.consumer, room, self.stream)
        out = [Delivery(e.id, e.fields, None) for e in back]
        for delivery in out:
            log.info("took over job %s, handed back by a stopping worker", delivery.entry_id)
        now = time.monotonic()
        if len(out) < room and now - self._last_claim >= self.claim_every_s:
            self._last_claim = now
            # a dead worker's entries; our own active ones, idle for a lease, are a stalled loop's
            taken = await self.group.claim(room - len(out), scans=MAX_CLAIM_SCANS, skip=active)
            for entry in taken:
                log.info("took over job %s after its lease expired", entry.id)
            out += [Delivery(e.id, e.fields, None) for e in taken]
            gone = await jobs.remove_gone_consumers(self.redis, self.lease_ms, self.consumer, self.stream)
            if gone:
                log.info("removed consumers that are gone and hold nothing: %s", ", ".join(gone))
        return out

    def _until_next_retry(self) -> float:
        if not self._retrying:
            return self.poll_s
        return max(0.001, min(self._retrying.values()) - time.monotonic())


class Turns:
    """Entries waiting by client, handed out round robin: each client's oldest in its turn."""

    def __init__(self) -> None:
        self._queues: dict[bytes, deque[castlog.StreamEntry]] = {}
        self._turns: deque[bytes] = deque()  # clients with entries, whose turn comes first first

    def __len__(self) -> int:
        return sum(len(q) for q in self._queues.values())

    def add(self, entry: castlog.StreamEntry) -> None:
        client = entry.fields.get(b"client", b"")
        if client not in self._queues:
            self._queues[client] = deque()
            self._turns.append(client)
        self._queues[client].append(entry)

    def take(self, count: int) -> list[castlog.StreamEntry]:
        out: list[castlog.StreamEntry] = []
        while self._turns and len(out) < count:
            client = self._turns.popleft()
            queue = self._queues[client]
            out.append(queue.popleft())
            if queue:
                self._turns.append(client)
            else:
                del self._queues[client]
        return out

    def order(self) -> list[castlog.StreamEntry]:
        """Every waiting entry in the order :meth:`take` hands them out: round ``r`` is each
        client's ``r``-th, the clients in turn."""
        rounds = zip_longest(*(self._queues[client] for client in self._turns))
        return [entry for entries in rounds for entry in entries if entry is not None]

    def remove(self, entry_id: str) -> None:
        for client, queue in list(self._queues.items()):
            kept = deque(e for e in queue if e.id != entry_id)
            if len(kept) < len(queue):
                if kept:
                    self._queues[client] = kept
                else:
                    del self._queues[client]
                    self._turns.remove(client)
                return
