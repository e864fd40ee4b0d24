"""One blocking ``XREAD`` that another task can end early without dropping its connection.

Cancelling a blocked read makes the client drop its connection (redis-py cannot tell what a
half-read reply would leave on the socket), so a reader whose set of streams changed would pay a
new connection each time. Instead the read runs on a dedicated connection whose client id is
known, and a wake-up sends ``CLIENT UNBLOCK <id>`` from the shared pool: the XREAD returns empty
at once and the connection stays. The unblock is re-sent until the read returns (one that
reaches Redis before the XREAD does nothing); the block timeout is only a safety net.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from redis.asyncio import Redis, RedisCluster
from redis.exceptions import RedisError

log = logging.getLogger(__name__)

# A wake-up re-sends CLIENT UNBLOCK this often while the XREAD has not returned (it may not have
# reached Redis yet), at most this many times; then the block timeout ends it.
WAKE_RETRY_S = 0.002
WAKE_TRIES = 50


class BlockingRead:
    """XREADs on ``conn`` (dedicated: nothing else may use it), woken through ``redis``."""

    def __init__(self, conn: Redis, redis: Redis) -> None:
        self.conn, self.redis = conn, redis
        self._client_id: int | None = None

    async def xread(self, streams: dict[Any, Any], *, count: int, block_ms: int, wake: asyncio.Future[Any]) -> Any:
        """XREAD ``streams``, blocking up to ``block_ms``; ended early (empty) when ``wake``
        completes first (the caller owns ``wake``: it is never cancelled here). A failed read
        forgets the connection's id: a new connection has a new one."""
        try:
            if self._client_id is None:
                self._client_id = int(await self.conn.client_id())
            client_id = self._client_id
            read = asyncio.ensure_future(self.conn.xread(streams, count=count, block=block_ms))
            try:
                await asyncio.wait((read, wake), return_when=asyncio.FIRST_COMPLETED)
                if not read.done():
                    await self._wake(read, client_id)
                return await read
            finally:
                if not read.done():  # the caller itself was cancelled: let the read unwind first
                    read.cancel()
                    await asyncio.gather(read, return_exceptions=True)
        except (RedisError, OSError):
            self._client_id = None
            raise

    async def _wake(self, read: asyncio.Future[Any], client_id: int) -> None:
        await unblock(self.redis, client_id, read)

    async def aclose(self) -> None:
        """Nothing of its own to close (the caller owns ``conn``); :class:`~castlog.slotreads.SlotReads` has."""


async def unblock(redis: Redis | RedisCluster, client_id: int, read: asyncio.Future[Any], **route: Any) -> bool:
    """CLIENT UNBLOCK ``client_id`` through ``redis`` (``route``: a cluster client's
    ``target_nodes``) until ``read`` returns; False when the unblock itself failed (then only the
    block timeout, or dropping the connection, ends the read)."""
    for _ in range(WAKE_TRIES):
        try:
            if await redis.client_unblock(client_id, **route):
                return True
        except (RedisError, OSError) as exc:
            log.warning("CLIENT UNBLOCK failed (%s); the block timeout ends the read", exc)
            return False
        await asyncio.wait((read,), timeout=WAKE_RETRY_S)  # not blocked yet: it is on its way
        if read.done():
            return True
    return read.done()
