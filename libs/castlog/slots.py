"""Per-client caps on things held open (edge's live streams), shared by every replica.

A client's slots are one sorted set ``rl/<scope>/<client>``: a member per open slot, scored by
the time (Redis's clock, ms) its lease ends. Whoever holds slots renews their leases well
before they end; a replica that dies holding slots stops renewing, and its slots lapse within
one lease. Taking a slot first drops the lapsed ones, so a crash never locks a client out.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass

from redis.asyncio import Redis

from .keys import limit_key
from .lua import NOW_MS

# How long a slot stands without a renewal; holders renew every third of it.
SLOT_LEASE_S = 30.0
# Slots renewed per script call (one key and one member each).
RENEW_BATCH = 500

# KEYS[1]: rl/<scope>/<client>; ARGV[1]: the new slot's member, ARGV[2]: cap, ARGV[3]: lease ms
# Returns {1, slots held now} when a slot was taken, else {0, slots held}.
ACQUIRE = (
    NOW_MS
    + """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local held = redis.call('ZCARD', KEYS[1])
if held >= tonumber(ARGV[2]) then return {0, held} end
local lease = tonumber(ARGV[3])
redis.call('ZADD', KEYS[1], now + lease, ARGV[1])
redis.call('PEXPIRE', KEYS[1], lease)
return {1, held + 1}
"""
)

# KEYS[i]: a client's set, ARGV[1]: lease ms, ARGV[i + 1]: a member of KEYS[i] to renew.
# A slot released (or lapsed) meanwhile is not brought back. Returns how many were renewed.
RENEW = (
    NOW_MS
    + """
local lease = tonumber(ARGV[1])
local renewed = 0
for i = 1, #KEYS do
  if redis.call('ZSCORE', KEYS[i], ARGV[i + 1]) then
    redis.call('ZADD', KEYS[i], 'XX', now + lease, ARGV[i + 1])
    redis.call('PEXPIRE', KEYS[i], lease)
    renewed = renewed + 1
  end
end
return renewed
"""
)


@dataclass(frozen=True)
class Slot:
    """One slot taken: whose it is and its member in the client's set."""

    client: str
    member: str


class SlotLimiter:
    """At most ``cap`` slots per client at once, across every process that shares ``scope``."""

    def __init__(self, redis: Redis, scope: str, cap: int, lease_s: float = SLOT_LEASE_S) -> None:
        if cap < 1 or lease_s <= 0:
            raise ValueError("a slot limit needs cap >= 1 and a positive lease")
        self.redis, self.scope, self.cap = redis, scope, cap
        self.lease_ms = max(1, round(lease_s * 1000))
        self._acquire = redis.register_script(ACQUIRE)
        self._renew = redis.register_script(RENEW)
        self._owner = secrets.token_hex(6)  # this process: members never collide across replicas
        self._count = 0

    def key(self, client: str) -> str:
        return limit_key(self.scope, client)

    async def acquire(self, client: str) -> tuple[Slot | None, int]:
        """A slot for ``client`` and the slots it holds now; (None, held) when it is at its cap."""
        self._count += 1
        member = f"{self._owner}:{self._count}"
        ok, held = await self._acquire(keys=[self.key(client)], args=[member, self.cap, self.lease_ms])
        return (Slot(client, member) if ok else None), int(held)

    async def release(self, slots: Sequence[Slot]) -> None:
        """Give ``slots`` back: one ZREM per client, all in one round trip."""
        members: dict[str, list[str]] = {}
        for slot in slots:
            members.setdefault(self.key(slot.client), []).append(slot.member)
        async with self.redis.pipeline(transaction=False) as pipe:
            for key, names in members.items():
                pipe.zrem(key, *names)
            await pipe.execute()

    async def renew(self, slots: Sequence[Slot]) -> int:
        """Extend the leases of ``slots``; the number still standing (not lapsed or released)."""
        renewed = 0
        for at in range(0, len(slots), RENEW_BATCH):
            batch = slots[at : at + RENEW_BATCH]
            renewed += int(await self._renew(
                keys=[self.key(s.client) for s in batch], args=[self.lease_ms, *(s.member for s in batch)]
            ))  # fmt: skip
        return renewed
