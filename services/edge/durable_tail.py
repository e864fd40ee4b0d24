"""One upstream read for every waiting reader of the durable streams (``/v1/stream/*``).

A long-poll at a stream's tail, or an SSE response between events, waits here: ONE blocking
``XREAD`` over the log of every stream that has a waiter, from the lowest id its waiters have
read, ``COUNT 1``. An entry past a waiter's id wakes it (it then reads by offset, as every
reader does); nothing is decoded here and nothing is queued, so a waiter costs a future.

A new stream (or a waiter behind the others) wakes the blocked XREAD so that the next one
includes it: ``castlog.BlockingRead``, as castlog's shared tail of casts does; on a Redis Cluster,
where one XREAD may only name keys of one slot and the streams waited on are of any number of
families (slots), one blocked read per slot with waiters (``castlog.SlotReads``). Edge's reads
wake through wake streams of their own (an XADD), as its Redis user has no CLIENT UNBLOCK.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError

from castlog import cancel_and_wait, choose_reads
from durablestreams.streams import DurableStreams, id_key

log = logging.getLogger(__name__)

# The shared read's connection name (CLIENT LIST), and how much longer than its block its socket waits.
TAIL_CLIENT_NAME = "edge-durable-tail"
TAIL_SOCKET_MARGIN_S = 10.0
# edge's blocked reads wake through streams of their own (its Redis user has no CLIENT UNBLOCK).
WAKE_NAME = "edge"
ERROR_BACKOFF_S = 0.2
ERROR_BACKOFF_MAX_S = 5.0


class Waiter:
    __slots__ = ("after", "woken")

    def __init__(self, after: str) -> None:
        self.after = after
        self.woken: asyncio.Future[None] = asyncio.get_running_loop().create_future()


class DurableTail:
    def __init__(self, conn: Redis, pool: Redis, *, block_ms: int, wake: str | None = None) -> None:
        # conn sits in the XREAD; pool wakes it (CLIENT UNBLOCK, or an XADD to the ``wake`` stream)
        self.blocking = choose_reads(conn, pool, wake)
        self.block_ms = block_ms
        self.waiters: dict[str, set[Waiter]] = {}  # log key -> who waits on it
        self._joined: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None
        self.closing = False

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="edge-durable-tail")

    async def stop(self) -> None:
        """Every waiter wakes now (and reads what there is); the read ends."""
        self.closing = True
        for waiters in self.waiters.values():
            for waiter in waiters:
                if not waiter.woken.done():
                    waiter.woken.set_result(None)
        self.waiters.clear()
        if self._task is not None:
            await cancel_and_wait(self._task)
        await self.blocking.aclose()

    @property
    def waiting(self) -> int:
        return sum(len(w) for w in self.waiters.values())

    async def wait(self, key: str, after: str, seconds: float) -> bool:
        """Until the stream's log ``key`` has an entry past ``after`` (True), or ``seconds`` pass."""
        if self.closing:
            return True  # edge stops: answer now
        waiter = Waiter(after)
        joining = self.waiters.get(key)
        self.waiters.setdefault(key, set()).add(waiter)
        if joining is None or all(id_key(after) < id_key(w.after) for w in joining):
            self._join()
        try:
            await asyncio.wait_for(asyncio.shield(waiter.woken), seconds)
            return True
        except asyncio.TimeoutError:
            return False
        finally:
            waiters = self.waiters.get(key)
            if waiters is not None:
                waiters.discard(waiter)
                if not waiters:
                    del self.waiters[key]

    def _join(self) -> None:
        if self._joined is not None and not self._joined.done():
            self._joined.set_result(None)

    async def _run(self) -> None:
        backoff = ERROR_BACKOFF_S
        while True:
            if not self.waiters:
                self._joined = asyncio.get_running_loop().create_future()
                await self._joined
                continue
            try:
                got = await self._read()
            except (RedisError, OSError) as exc:  # the waiters time out and read by offset meanwhile
                log.warning("durable tail: reading failed (%s); retrying in %.1fs", exc, backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, ERROR_BACKOFF_MAX_S)
                continue
            backoff = ERROR_BACKOFF_S
            for key, rows in got:
                self._ring(key.decode() if isinstance(key, bytes) else str(key), rows)

    async def _read(self) -> list[Any]:
        streams: dict[Any, Any] = {
            key: min((w.after for w in waiters), key=id_key) for key, waiters in self.waiters.items()
        }
        joined = self._joined = asyncio.get_running_loop().create_future()
        reply = await self.blocking.xread(streams, count=1, block_ms=self.block_ms, wake=joined)
        return list(reply.items() if isinstance(reply, dict) else reply or ())

    def _ring(self, key: str, rows: list[Any]) -> None:
        """Wake the waiters of ``key`` that the entry read lies past."""
        if not rows:
            return
        raw_id = rows[-1][0]
        newest = id_key(raw_id.decode() if isinstance(raw_id, bytes) else str(raw_id))
        waiters = self.waiters.get(key, set())
        for waiter in [w for w in waiters if id_key(w.after) < newest]:
            waiters.discard(waiter)  # now: the next read must not start behind it again
            if not waiter.woken.done():
                waiter.woken.set_result(None)
        if not waiters:
            self.waiters.pop(key, None)


class DurableReads:
    """What edge's /v1/stream handlers need: the store on the shared pool, the waiters' shared
    read on its own connection, and the bound on waiters (``EDGE_DS_MAX_WAITERS``)."""

    def __init__(self, redis_url: str, pool: Redis, *, block_ms: int, max_waiters: int) -> None:
        self.streams = DurableStreams(pool)
        self.conn = Redis.from_url(redis_url, single_connection_client=True, client_name=TAIL_CLIENT_NAME,
                                   socket_timeout=block_ms / 1000 + TAIL_SOCKET_MARGIN_S)
        self.tail = DurableTail(self.conn, pool, block_ms=block_ms, wake=WAKE_NAME)
        self.waiters = asyncio.Semaphore(max_waiters)

    @property
    def stopping(self) -> bool:
        return self.tail.closing

    async def aclose(self) -> None:
        await self.tail.stop()
        await self.conn.aclose()
