"""Per-client caps on what intake holds open: live WebSocket sessions and ``/v1`` speech streams.

Each is a :class:`castlog.slots.SlotLimiter` (a client's slots in ``rl/<scope>/<client>``, shared
by every replica, leased so that a replica that dies frees them within a lease); one task per
app renews the leases of this process's slots. A process-wide cap (INTAKE_LIVE_MAX_SESSIONS,
INTAKE_MAX_SPEECH_STREAMS) still bounds the total: the per-client cap keeps one client from
taking all of it.
"""

from __future__ import annotations

import asyncio
import logging

from redis.asyncio import Redis
from redis.exceptions import RedisError

from castlog.slots import Slot, SlotLimiter

log = logging.getLogger(__name__)


class ClientSlots:
    """At most ``cap`` held per client; ``acquire`` -> a slot (None at the cap), ``release`` it."""

    def __init__(self, redis: Redis, scope: str, cap: int) -> None:
        self.limiter = SlotLimiter(redis, scope, cap)
        self.cap = cap
        self.held: set[Slot] = set()

    async def acquire(self, client: str) -> Slot | None:
        slot, _ = await self.limiter.acquire(client)
        if slot is not None:
            self.held.add(slot)
        return slot

    async def release(self, slot: Slot | None) -> None:
        """Give ``slot`` back (shielded: a cancelled holder still frees it; a failure lapses it)."""
        if slot is None or slot not in self.held:
            return
        self.held.discard(slot)
        try:
            await asyncio.shield(self.limiter.release([slot]))
        except RedisError as exc:
            log.warning("could not release a %s slot (%s); it lapses with its lease", self.limiter.scope, exc)

    async def renew_forever(self) -> None:
        every_s = self.limiter.lease_ms / 1000 / 3
        while True:
            await asyncio.sleep(every_s)
            if not self.held:
                continue
            try:
                await self.limiter.renew(list(self.held))
            except RedisError as exc:
                log.warning("could not renew %d %s slots (%s)", len(self.held), self.limiter.scope, exc)
