"""The shared tail's blocked reads on a Redis Cluster: at most ONE blocked ``XREAD`` per hash slot
that has watched casts, never one per listener or per cast (docs/design.md, "The shared tail").

A multi-key command must keep its keys in one slot there, so the tail's one read becomes one per
slot (one per lane once the cast keys carry their lane's hash tag: castlog/keys.py; grouped by
the slot itself, so any key layout works), each on a dedicated connection to the node that serves
the slot, with the tail connection's settings (credentials, client name, a socket timeout above
the block). A read stays blocked across the tail's passes while its slot's casts and cursors are
unchanged, so a record in one slot re-issues that slot's read only: the commands per record are
those of a single Redis. A slot whose streams changed (a cast joined or left) has its read ended
by an XADD to the slot's own wake stream (``blocking.py``; its key carries a hash tag of that
slot, so the XADD goes to the read's node), the connection staying; its reply is dropped: XREAD
takes nothing, so the new read returns the same rows.

The connections are bounded by the slots with watched casts: the lane count (64) once the cast
keys carry lanes; until then one per watched cast at most (itself bounded by each service's
stream limits). A slot whose casts are all gone closes its connection.

A read that fails (its node died, the slot moved: MOVED) closes its connection, the cluster client
learns the slots again, and the error goes to the tail, which retries as after any lost
connection: the next read goes to whichever node serves the slot then (the promoted replica).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Iterable, Mapping
from functools import cache
from typing import Any, cast

from redis.asyncio import ConnectionPool, Redis, RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.crc import key_slot
from redis.exceptions import RedisError

from .blocking import WakeStream, wake_key

log = logging.getLogger(__name__)

# What a slot's connection takes over from the tail's own (the rest is the node's address).
CONN_SETTINGS = ("username", "password", "client_name", "socket_timeout", "socket_connect_timeout", "socket_keepalive")


@cache  # at most one per slot
def slot_tag(slot: int) -> str:
    """A hash tag whose keys lie in ``slot``: the first number that hashes there."""
    return next(str(i) for i in itertools.count() if key_slot(str(i).encode()) == slot)


class SlotRead:
    """One slot's dedicated connection, the read in flight on it (None: none) and the slot's
    wake stream."""

    __slots__ = ("conn", "streams", "read", "wake")

    def __init__(self, conn: Redis, wake: WakeStream) -> None:
        self.conn, self.wake = conn, wake
        self.streams: dict[Any, Any] = {}
        self.read: asyncio.Future[Any] | None = None


class SlotReads:
    """XREADs over any keys of a cluster (``redis``), one per slot; ``conn`` (never used itself)
    lends its connection settings to each slot's connection (a cluster client: its nodes')."""

    def __init__(self, conn: Redis | RedisCluster, redis: Redis, wake: str) -> None:
        self.cluster = cast(RedisCluster, redis)
        self.wake = wake
        lender = conn.get_default_node() if isinstance(conn, RedisCluster) else conn.connection_pool
        self.conn_class = lender.connection_class
        kwargs = lender.connection_kwargs
        self.settings = {k: v for k, v in kwargs.items() if k in CONN_SETTINGS or k.startswith("ssl_")}
        self.slots: dict[int, SlotRead] = {}
        # Each slot's wake stream, kept for the process's life (one per slot with watched casts
        # ever: a lane's): a slot that empties and fills again rings the same key, not a new one
        # that lingers WAKE_TTL_MS in Redis after each round.
        self.wakes: dict[int, WakeStream] = {}
        # The keys of the slots whose read the last xread saw end empty, at its block timeout:
        # only their casts' cursors need the idle check (not every slot's, at each slot's timeout).
        self.timed_out: list[Any] = []

    @property
    def blocked(self) -> int:
        """Reads in flight now (one per slot with watched casts at most)."""
        return sum(1 for s in self.slots.values() if s.read is not None and not s.read.done())

    async def xread(self, streams: Mapping[Any, Any], *, count: int, block_ms: int,
                    wake: asyncio.Future[Any]) -> list[tuple[Any, Any]]:
        """Every slot's rows after the ids in ``streams`` once a read returns (or at once when one
        already has); empty when ``wake`` completes first (a join: the caller reads again with
        its new streams; the reads it left unchanged stay blocked)."""
        self.timed_out = []
        wanted: dict[int, dict[Any, Any]] = {}
        for key, after in streams.items():
            wanted.setdefault(self.cluster.keyslot(key), {})[key] = after
        await self._drop(s for s in list(self.slots) if s not in wanted)
        await asyncio.gather(*(self._end(s) for s, group in wanted.items() if s in self.slots
                               and self.slots[s].read is not None and self.slots[s].streams != group))
        try:
            for slot, group in wanted.items():
                if slot not in self.slots or self.slots[slot].read is None:
                    await self._issue(slot, group, count, block_ms)
        except (RedisError, OSError):  # no node for the slot, or it is down: where is it now
            await self._relearn()
            raise
        reads = [s.read for s in self.slots.values() if s.read is not None]
        if not any(r.done() for r in reads):
            await asyncio.wait((*reads, wake), return_when=asyncio.FIRST_COMPLETED)
        return await self._collect()

    async def aclose(self) -> None:
        await self._drop(list(self.slots))

    # -- one slot ------------------------------------------------------------------------------

    async def _issue(self, slot: int, group: dict[Any, Any], count: int, block_ms: int) -> None:
        """Start the slot's read, on its connection (made first if it has none)."""
        state = self.slots.get(slot)
        if state is None:
            state = self.slots[slot] = await self._connect(slot, next(iter(group)))
        state.streams = group
        state.read = asyncio.ensure_future(state.conn.xread(state.wake.add_to(group), count=count, block=block_ms))

    async def _connect(self, slot: int, key: Any) -> SlotRead:
        node = self.cluster.get_node_from_key(key)
        if node is None:
            raise RedisError(f"no node serves the slot of {key!r} (the cluster is re-forming)")
        pool = ConnectionPool(  # no retries of its own: a failed read goes to the tail, which retries
            connection_class=self.conn_class, host=node.host, port=int(node.port), retry=Retry(NoBackoff(), 0),
            **self.settings,
        )
        # the read itself connects: nothing is asked of the node before it
        return SlotRead(Redis(connection_pool=pool, single_connection_client=True), self._wake_stream(slot))

    def _wake_stream(self, slot: int) -> WakeStream:
        stream = self.wakes.get(slot)
        if stream is None:
            stream = self.wakes[slot] = WakeStream(wake_key(self.wake, slot_tag(slot)))
        return stream

    async def _end(self, slot: int) -> None:
        """End the slot's read in flight and drop its reply; the connection stays when the wake-up
        works (else it goes: a new one is made for the next read)."""
        state = self.slots[slot]
        read, state.read = state.read, None
        if read is None:
            return
        if not read.done() and not await self._ring(state):
            await self._drop([slot], read)
            return
        await asyncio.gather(read, return_exceptions=True)
        if read.exception() is not None:
            await self._drop([slot])
        else:
            state.wake.take(read.result())  # the wake-up seen: the next read waits past it

    async def _ring(self, state: SlotRead) -> bool:
        """End the read on ``state``'s connection without dropping the connection; False when
        that failed."""
        try:
            await state.wake.ring(self.cluster)  # routed by its key: the slot's node
        except (RedisError, OSError) as exc:
            log.warning("waking a slot's read failed (%s); its connection is dropped", exc)
            return False
        return True

    async def _drop(self, slots: Iterable[int], *reads: asyncio.Future[Any]) -> None:
        """Close these slots' connections (a read in flight on one is cancelled: that drops it)."""
        for slot in slots:
            state = self.slots.pop(slot, None)
            if state is None:
                continue
            for read in (state.read, *reads):
                if read is not None and not read.done():
                    read.cancel()
                    await asyncio.gather(read, return_exceptions=True)
            await state.conn.aclose(close_connection_pool=True)

    async def _collect(self) -> list[tuple[Any, Any]]:
        """The replies of the reads that returned; their slots read again next time. A failed
        read closes its slot's connection and the cluster client learns the slots again; then
        the error is raised and the other replies dropped (the tail's cursors stay: read again)."""
        got: list[tuple[Any, Any]] = []
        failed: list[tuple[int, BaseException]] = []
        for slot, state in list(self.slots.items()):
            read = state.read
            if read is None or not read.done():
                continue
            state.read = None
            exc = read.exception()
            if exc is not None:
                failed.append((slot, exc))
                continue
            rows = state.wake.take(read.result())
            if not rows:
                self.timed_out += state.streams
            got += rows
        if not failed:
            return got
        await self._drop(slot for slot, _ in failed)
        await self._relearn()  # a failover or a moved slot
        raise failed[0][1]

    async def _relearn(self) -> None:
        """Ask the cluster which node serves which slot now."""
        try:
            await self.cluster.nodes_manager.initialize()
        except (RedisError, OSError) as exc:
            log.warning("cluster: learning the slots failed (%s); the next read tries again", exc)
