"""A process's one stream loop (docs/design.md, "The shared tail"): ONE blocked ``XREAD`` over
every key its subscribers (:class:`Subscriber`) name, each after its own id; one per hash slot
with followed keys on a Redis Cluster (``slotreads.py``). Edge's and intake's cast tail and Durable Streams
waiters (``tail.py``, ``waiters.py``) subscribe to one; synth's cancels, deletes and open casts'
catalogs (``synth/broadcasts.py``) to another.

A subscriber whose keys change calls :meth:`StreamTail.wake`: the blocked read ends through an
XADD to the loop's own wake stream (``blocking.py``: ``tail/wake/<name>/*``; no Redis user holds
CLIENT UNBLOCK), the connection stays, and the next read names the new keys; the block timeout
is only a safety net. With no key to follow nothing is read until a wake-up. The ids live with
the subscribers: what a read brought counts as read once a subscriber has taken it, so after a
Redis error (the loop backs off, doubling, and reads again) the same entries come again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import cast

from redis.asyncio import Redis, RedisCluster
from redis.exceptions import RedisError

from castlog.keys import Rows, decoded
from servicekit.connect import backoff

from .blocking import BlockingRead, stop_tasks
from .slotreads import SlotReads

log = logging.getLogger(__name__)


class Subscriber:
    """What a :class:`StreamTail` follows for its owner: some keys, each after an id."""

    count: int  # entries per stream of one read (a read takes the least of its subscribers')

    async def streams(self) -> dict[str, str]:
        """Key -> the entry id to read after, for the next read (a wake-up from here on ends it)."""
        raise NotImplementedError

    async def take(self, got: dict[str, Rows], idle: list[str]) -> None:
        """After every read: its rows for this subscriber's keys, and those of its keys whose read
        ended at the block timeout (no entry and no wake-up: a log that shrank reads nothing)."""
        raise NotImplementedError

    def read_failed(self) -> None:
        """A read or a take failed (the server may have restarted): the next read comes after it."""


class StreamTail:
    """The loop of blocked reads over its ``subscribers``' keys, on ``conn`` (dedicated; None: a
    connection of ``redis``'s pool, given back when the loop ends; on a cluster ``conn`` lends its
    settings to each slot's connection), woken by wake streams under ``tail/wake/<wake>/``."""

    def __init__(self, conn: Redis | None, redis: Redis, wake: str, *subscribers: Subscriber, block_ms: int,
                 name: str) -> None:
        cluster = isinstance(redis, RedisCluster)
        self.own_conn: Redis | None = None
        if conn is None and not cluster:
            conn = self.own_conn = redis.client()
        self.reads: BlockingRead | SlotReads = (
            SlotReads(conn or redis, redis, wake) if cluster else BlockingRead(cast(Redis, conn), redis, wake))
        self.subscribers = list(subscribers)
        self.block_ms, self.name = block_ms, name
        self._woken: asyncio.Future[None] | None = None  # resolved by a wake-up: the read in flight ends
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self.run(), name=self.name)

    async def stop(self) -> None:
        if self._task is not None:
            await stop_tasks(self._task)
        await self.close()  # again: a second cancel may have cut the loop's own close short

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def wake(self) -> None:
        """A subscriber's keys changed: the read in flight ends, and the next one names them."""
        if self._woken is not None and not self._woken.done():
            self._woken.set_result(None)

    async def run(self) -> None:
        """Read and hand out until cancelled."""
        # after a failed read or take (Redis restarting, connection lost): servicekit's one backoff,
        # made at the first failure, dropped at the next success (no work on a pass that succeeds)
        delays: Iterator[float] | None = None
        try:
            while True:
                try:
                    await self._pass()
                except (RedisError, OSError) as exc:  # the ids stay: the next read brings the entries again
                    for subscriber in self.subscribers:
                        subscriber.read_failed()
                    delays = delays or backoff()
                    delay = next(delays)
                    log.warning("%s: reading failed (%s); retrying in %.1fs", self.name, exc, delay)
                    await asyncio.sleep(delay)
                    continue
                delays = None
        finally:
            await self.close()

    async def close(self) -> None:
        await self.reads.aclose()
        if self.own_conn is not None:
            await self.own_conn.aclose()  # back to the pool

    async def _pass(self) -> None:
        """One read after every subscriber's ids; each subscriber takes its keys' rows."""
        woken = self._woken = asyncio.get_running_loop().create_future()  # before the ids are asked
        named = [(subscriber, await subscriber.streams()) for subscriber in self.subscribers]
        streams = {key: after for _, keys in named for key, after in keys.items()}
        if not streams:
            await woken  # nothing to follow: no read until a subscriber has keys
            return
        count = min(subscriber.count for subscriber, keys in named if keys)
        reply = await self.reads.xread(streams, count=count, block_ms=self.block_ms, wake=woken)
        got = {decoded(key): rows for key, rows in reply}  # each key once
        if isinstance(self.reads, SlotReads):
            idle = set(self.reads.timed_out)
        else:
            idle = set(streams) if not got and not woken.done() else set()
        for subscriber, keys in named:
            await subscriber.take({k: got[k] for k in keys if k in got}, [k for k in keys if k in idle])
