"""The per-client cap on open casts (#21), kept in the client's own slot.

A client's open casts are one sorted set ``rl/intake-live/<client>``: cast id -> when it was
reserved (Redis's clock, ms). The cap is taken in its own step before the open script, so that
script touches only its cast's lane (keys.py) and the set only the client's slot:

1. read the set and the last catalog entry of each cast in it (one pipelined read per node);
2. RESERVE, in the client's slot: forget the casts seen closed or gone, then add the new id
   unless the client holds its cap;
3. the open script; an open that does not happen (an id collision, an error) gives its id back.

Nothing has to release a cast when it closes (intake's close, synth's idle close): the next
reservation sees its catalog closed. Concurrent opens of one client are exact: RESERVE counts and
adds in one step. A reserved id whose catalog is not written yet is not gone: it is forgotten
only once older than ``RESERVE_GRACE_MS``.
"""

from __future__ import annotations

from typing import cast

from redis.asyncio import Redis

from . import keys
from .keys import Rows
from .lua import NOW_MS

# How long a client's set stands after its last open (a cast's text stays open no longer: the
# worker closes one left without text).
OPEN_SET_MS = 24 * 3600 * 1000
# A reserved id with no catalog yet is an open under way; one this old without a catalog is gone.
RESERVE_GRACE_MS = 60_000

# KEYS[1]: rl/intake-live/<client>
# ARGV[1]: the new cast id, ARGV[2]: the cap, ARGV[3]: ms the set stands unused,
# ARGV[4]: ms a reservation may wait for its catalog, ARGV[5..]: (id, 'closed' | 'missing') pairs
# seen by the caller. Forgets the closed ones and the missing ones past the grace, then adds the
# new id unless the client holds the cap. Returns {1, held} or {0, held}.
RESERVE = (
    NOW_MS
    + """
local grace = tonumber(ARGV[4])
for i = 5, #ARGV, 2 do
  local at = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if at and (ARGV[i + 1] == 'closed' or now - tonumber(at) > grace) then
    redis.call('ZREM', KEYS[1], ARGV[i])
  end
end
local held = redis.call('ZCARD', KEYS[1])
if held >= tonumber(ARGV[2]) then return {0, held} end
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return {1, held + 1}
"""
)


def open_set_key(client: str) -> str:
    return keys.limit_key(keys.INTAKE_LIVE_SCOPE, client)


class OpenCap:
    """Reserve and give back a client's open casts (held by :class:`castlog.LiveStore`)."""

    def __init__(self, redis: Redis) -> None:
        self.redis = redis
        self._reserve = redis.register_script(RESERVE)

    async def reserve(self, client: str, cast_id: str, cap: int) -> bool:
        """Count ``cast_id`` among the client's open casts unless it holds ``cap`` already."""
        key = open_set_key(client)
        held = [keys.decoded(m) for m in cast("list[bytes]", await self.redis.zrange(key, 0, -1))]
        ended = await self._ended(held)
        args: list[str | int] = [cast_id, cap, OPEN_SET_MS, RESERVE_GRACE_MS]
        for cid, state in ended:
            args += [cid, state]
        ok, _ = await self._reserve(keys=[key], args=args)
        return bool(ok)

    async def give_back(self, client: str, cast_id: str) -> None:
        """An open that did not happen: its id counts no more."""
        await self.redis.zrem(open_set_key(client), cast_id)

    async def _ended(self, held: list[str]) -> list[tuple[str, str]]:
        """(id, 'closed' | 'missing') for the held casts whose text is not open: their catalogs
        lie in many lanes, so one pipelined read (a cluster client splits it per node)."""
        if not held:
            return []
        pipe = self.redis.pipeline(transaction=False)
        for cid in held:
            pipe.xrevrange(keys.catalog_key(cid), count=1)
        out = []
        for cid, rows in zip(held, await pipe.execute()):
            last = cast(Rows, rows)
            if not last:
                out.append((cid, "missing"))
            elif b"closed" in last[0][1]:
                out.append((cid, "closed"))
        return out
