"""Per-client caps on things held open (edge's streams, intake's sessions and speech streams),
shared by every replica.

A client's seats are one sorted set ``rl/<scope>/<client>``: a member per open seat, scored by
the time (Redis's clock, ms) its lease ends. The :class:`SeatLimiter` that took a seat holds it
(``held``) and renews its lease well before it ends (``renew_forever``); a replica that dies
holding seats stops renewing, and its seats lapse within one lease. Taking a seat first drops
the lapsed ones, so a crash never locks a client out.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Sequence
from dataclasses import dataclass

from redis.asyncio import Redis
from redis.exceptions import RedisError

from .keys import limit_key
from .lua import NOW_MS

# How long a seat stands without a renewal; holders renew every third of it.
SEAT_LEASE_S = 30.0
# Seats renewed per script call (one key and one member each).
RENEW_BATCH = 500

log = logging.getLogger(__name__)

# KEYS[1]: rl/<scope>/<client>; ARGV[1]: the new seat's member, ARGV[2]: cap, ARGV[3]: lease ms
# Returns {1, seats held now} when a seat was taken, else {0, seats held}.
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
# A seat released (or lapsed) meanwhile is not brought back. Returns how many were renewed.
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
class Seat:
    """One seat taken: whose it is and its member in the client's set."""

    client: str
    member: str


class SeatLimiter:
    """At most ``cap`` seats per client at once, across every process that shares ``scope``; the
    one holder of this process's seats in that scope (it renews them and gives them back)."""

    def __init__(self, redis: Redis, scope: str, cap: int, lease_s: float = SEAT_LEASE_S) -> None:
        if cap < 1 or lease_s <= 0:
            raise ValueError("a seat limit needs cap >= 1 and a positive lease")
        self.redis, self.scope, self.cap = redis, scope, cap
        self.lease_ms = max(1, round(lease_s * 1000))
        self._acquire = redis.register_script(ACQUIRE)
        self._renew = redis.register_script(RENEW)
        self._owner = secrets.token_hex(6)  # this process: members never collide across replicas
        self._count = 0
        self.held: dict[Seat, None] = {}  # this process's seats, in taking order
        self._to_release: list[Seat] = []
        self._releaser: asyncio.Task[None] | None = None

    def key(self, client: str) -> str:
        return limit_key(self.scope, client)

    async def acquire(self, client: str) -> tuple[Seat | None, int]:
        """A seat for ``client`` (held until released) and the seats it holds now; (None, held)
        when it is at its cap."""
        self._count += 1
        member = f"{self._owner}:{self._count}"
        ok, held = await self._acquire(keys=[self.key(client)], args=[member, self.cap, self.lease_ms])
        if not ok:
            return None, int(held)
        seat = Seat(client, member)
        self.held[seat] = None
        return seat, int(held)

    def release(self, *seats: Seat | None) -> asyncio.Future[None]:
        """Give back ``seats`` (None, or one given back already, is nothing) from a task of its
        own, so a holder being cancelled cannot skip it; seats freed while a release is on the
        wire go together in the next one (a cast's ending closes all its streams at once: a few
        commands, not one per stream). A release that fails is logged: the seats lapse. Returns
        the release in flight, shielded, for a holder that waits for it (one that does not, such
        as an edge stream's end, waits on no Redis command)."""
        mine = [seat for seat in seats if seat is not None and seat in self.held]
        if not mine:
            nothing = asyncio.get_running_loop().create_future()
            nothing.set_result(None)
            return nothing
        for seat in mine:
            del self.held[seat]
        self._to_release += mine
        if self._releaser is None:
            self._releaser = asyncio.create_task(self._release_all())
        return asyncio.shield(self._releaser)

    async def _release_all(self) -> None:
        try:
            while self._to_release:
                seats, self._to_release = self._to_release, []
                try:
                    await self._zrem(seats)
                except RedisError as exc:  # they lapse with their leases instead
                    log.warning("could not release %d %s seats (%s); they lapse within %.0f s",
                                len(seats), self.scope, exc, self.lease_ms / 1000)
        finally:
            self._releaser = None

    async def _zrem(self, seats: Sequence[Seat]) -> None:
        """One ZREM per client, all in one round trip."""
        members: dict[str, list[str]] = {}
        for seat in seats:
            members.setdefault(self.key(seat.client), []).append(seat.member)
        async with self.redis.pipeline(transaction=False) as pipe:
            for key, names in members.items():
                pipe.zrem(key, *names)
            await pipe.execute()

    async def renew(self, seats: Sequence[Seat]) -> int:
        """Extend the leases of ``seats``; the number still standing (not lapsed or released)."""
        renewed = 0
        for at in range(0, len(seats), RENEW_BATCH):
            batch = seats[at : at + RENEW_BATCH]
            renewed += int(await self._renew(
                keys=[self.key(s.client) for s in batch], args=[self.lease_ms, *(s.member for s in batch)]
            ))  # fmt: skip
        return renewed

    async def renew_forever(self) -> None:
        """Renew the leases of the seats held every third of a lease (one task per limiter)."""
        every_s = self.lease_ms / 1000 / 3
        while True:
            await asyncio.sleep(every_s)
            seats = list(self.held)
            if not seats:
                continue
            try:
                standing = await self.renew(seats)
            except RedisError as exc:
                log.warning("could not renew %d %s seats (%s); retrying in %.0f s", len(seats), self.scope, exc, every_s)
                continue
            if standing < len(seats):  # lapsed while Redis was away: what they count goes on, uncounted
                log.info("%d of %d %s seats had lapsed", len(seats) - standing, len(seats), self.scope)

    async def drain(self) -> None:
        """Wait for the releases in flight (shutdown)."""
        if self._releaser is not None:
            await self._releaser
