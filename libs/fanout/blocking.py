"""One blocking ``XREAD`` that another task can end early without dropping its connection.

Cancelling a blocked read makes the client drop its connection (redis-py cannot tell what a
half-read reply would leave on the socket), so a reader whose set of streams changed would pay a
new connection each time. Instead the read runs on a dedicated connection and also reads a wake
stream of its own, ``tail/wake/<name>/<token>`` (:class:`WakeStream`); a wake-up is an XADD there
from the shared pool: the XREAD returns at once and the connection stays. Each service's Redis
user may add to its own name's wake streams only, and none holds CLIENT UNBLOCK (which could end
anyone's blocked read). An XADD that reaches Redis before the XREAD still ends it (the read asks
for entries after the last one it saw), so nothing is re-sent; the stream keeps one entry and
expires when unused. The block timeout is only a safety net.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Mapping
from typing import Any

from redis.asyncio import Redis, RedisCluster
from redis.exceptions import RedisError

from castlog.groups import pairs
from castlog.keys import decoded

log = logging.getLogger(__name__)

# A process's wake streams: tail/wake/<name>/<token> (an ACL grants XADD on its name's only).
WAKE_PREFIX = "tail/wake/"
# A wake stream outlives its last wake-up by this much (a process that died leaves nothing for long).
WAKE_TTL_MS = 3_600_000


# A task that outlives its cancel is cancelled again this often (stop_tasks).
STOP_AGAIN_S = 0.25


async def stop_tasks(*tasks: asyncio.Future[Any], again_s: float = STOP_AGAIN_S) -> None:
    """Cancel ``tasks`` and wait until every one has ended, cancelling again those that go on.

    A loop around a blocking read (``XREAD BLOCK`` on a pooled connection) can outlive a single
    cancel: redis-py 8 sometimes swallows a CancelledError that lands while it handles the reply
    (measured: 2 of 200 cancels at random moments), and the loop then reads on; a stop that
    cancels once and awaits would hang. Exceptions of the tasks are retrieved, not raised."""
    pending = {t for t in tasks if not t.done()}
    while pending:
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=again_s)
    for task in tasks:
        if not task.cancelled():
            task.exception()  # retrieved: no "never retrieved" warning


def wake_key(name: str, tag: str = "") -> str:
    """A new wake stream's key for a reader of ``name`` (``tag``: a hash tag, to put it in one
    slot of a Redis Cluster)."""
    return f"{WAKE_PREFIX}{name}/{'{' + tag + '}/' if tag else ''}{secrets.token_hex(8)}"


class WakeStream:
    """A reader's own wake-up stream, read with its other streams (see the module's docstring)."""

    __slots__ = ("key", "after")

    def __init__(self, key: str) -> None:
        self.key, self.after = key, "0-0"  # after: the last wake-up this reader saw

    def add_to(self, streams: Mapping[Any, Any]) -> dict[Any, Any]:
        return {**streams, self.key: self.after}

    def take(self, reply: Any) -> list[tuple[Any, Any]]:
        """The reply's rows but the wake stream's (whose last id it remembers)."""
        out = []
        for key, rows in pairs(reply):
            if key != self.key:
                out.append((key, rows))
            elif rows:
                self.after = decoded(rows[-1][0])
        return out

    async def ring(self, redis: Redis | RedisCluster) -> None:
        """Wake the read (XADD: it keeps one entry; the TTL renewed)."""
        pipe = redis.pipeline(transaction=False)
        pipe.xadd(self.key, {"w": "1"}, maxlen=1)
        pipe.pexpire(self.key, WAKE_TTL_MS)
        await pipe.execute()


class BlockingRead:
    """XREADs on ``conn`` (dedicated: nothing else may use it), woken through ``redis`` by its own
    wake stream, under ``tail/wake/<wake>/``."""

    def __init__(self, conn: Redis, redis: Redis, wake: str) -> None:
        self.conn, self.redis = conn, redis
        self.stream = WakeStream(wake_key(wake))

    async def xread(self, streams: Mapping[Any, Any], *, count: int, block_ms: int,
                    wake: asyncio.Future[Any]) -> list[tuple[Any, Any]]:
        """XREAD ``streams``, blocking up to ``block_ms``; ended early (empty) when ``wake``
        completes first (the caller owns ``wake``: it is never cancelled here)."""
        read = asyncio.ensure_future(self.conn.xread(self.stream.add_to(streams), count=count, block=block_ms))
        try:
            await asyncio.wait((read, wake), return_when=asyncio.FIRST_COMPLETED)
            if not read.done():
                try:
                    await self.stream.ring(self.redis)
                except (RedisError, OSError) as exc:
                    log.warning("waking the blocked read failed (%s); the block timeout ends it", exc)
            return self.stream.take(await read)
        finally:
            if not read.done():  # the caller itself was cancelled: let the read unwind first
                read.cancel()
                await asyncio.gather(read, return_exceptions=True)

    async def aclose(self) -> None:
        """Nothing of its own to close (the caller owns ``conn``); :class:`~fanout.slotreads.SlotReads` has."""
