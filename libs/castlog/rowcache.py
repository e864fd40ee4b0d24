"""The one bounded cache of cast-log records, shared by every reader of a process: N listeners
catching up on one log cost Redis about one read of it, not N (docs/design.md, "Bodies travel
once"), and decode it and build its JSON and frames once, not N times ("Built once, written
straight").

A record is kept by ``(cast_id, seq)`` as its row (bodies included) and, once a reader above
(``fanout``'s tail) built something from the row, that too; one budget ``max_bytes`` bounds both,
least recently used dropped first. A read of ``count`` rows from ``first`` takes the rows cached
from there on and reads only the rest from Redis; simultaneous reads of the same range share one
XRANGE. A log can shrink or be rewritten (``[R:views-checked-on-use]``), so a cached row is
checked on use: rows read from Redis after cached ones must name the last cached row's stamp as
their predecessor (``p``), and a read served wholly from the cache checks the stamp of its last
row (one small script, no bodies). A row that fails either check drops the cast's records (what
was built from them too) and the read goes to Redis.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import TypeVar, cast

from redis.asyncio import Redis

from .keys import Row, seq_bounds, seq_of
from .marks import follows, holds, stamps

# Bytes a cached row costs beyond its fields (the key, the tuple, the dict).
ROW_OVERHEAD = 200
# What is built from a row (fanout's Item: its public JSON, SSE frame and HTTP chunk, each about
# 4/3 of the body in base64) is charged up front: this many times the row's bytes, and this much more.
BUILT_COPIES = 4
BUILT_OVERHEAD = 400  # the Item, its Entry and record
# Records held across all casts: about 500 records of 30 KB with their Items built, or 2,500 rows.
ROW_CACHE_BYTES = 80 * 1024 * 1024

# Reads rows (cast_id, first seq, high, count) from Redis: the rows, and whether they may be kept
# (rows rebuilt from an archive are not: they cost Redis nothing).
Fetch = Callable[[str, int, str, int], Awaitable[tuple[list[Row], bool]]]
T = TypeVar("T")


def _bytes(row: Row) -> int:
    return sum(len(k) + len(v) for k, v in row[1].items())


def _ts(row: Row) -> int | None:
    return int(row[1].get(b"ts", 0)) or None


class _Held:
    """One cached record: its row, what was built from it (None: nothing yet), what it costs."""

    __slots__ = ("row", "built", "size")

    def __init__(self, row: Row) -> None:
        self.row = row
        self.built: object = None
        self.size = ROW_OVERHEAD + _bytes(row)


class RowCache:
    """Records of Redis-held cast logs (never rebuilt archive rows), bounded by ``max_bytes``."""

    def __init__(self, redis: Redis, max_bytes: int = ROW_CACHE_BYTES) -> None:
        self.redis = redis  # the stamp checks
        self.max_bytes = max_bytes
        self.bytes = 0
        self._held: OrderedDict[tuple[str, int], _Held] = OrderedDict()
        self._reads: dict[tuple[str, int, str, int], asyncio.Future[list[Row]]] = {}

    async def rows(self, cast_id: str, first: int, high: str, count: int, fetch: Fetch) -> list[Row]:
        """Up to ``count`` rows from seq ``first`` to ``high`` (an XRANGE id, ``+``, or ``(``
        exclusive); ``fetch`` reads from Redis what is not here."""
        last = seq_bounds("-", high)[1]
        got = self._cached(cast_id, first, min(count, last - first + 1))
        if got and (len(got) == count or seq_of(got[-1][0]) >= last):  # all here: check, serve
            if await self._still(cast_id, got[-1]):
                return got
            got = []
        more = await self._shared(cast_id, first + len(got), high, count - len(got), fetch)
        if got and not (await self._continued(cast_id, got[-1], more)):
            got, more = [], await self._shared(cast_id, first, high, count, fetch)
        return got + more

    def built(self, cast_id: str, rows: list[Row], build: Callable[[Row], T | None]) -> list[T]:
        """What ``build`` makes of each of ``rows``, in order (None left out), made once while the
        cache holds the row: the very row it gave out, so checked on use like it. A row it does
        not hold (an archived log's, one dropped meanwhile) is built for its reader alone."""
        out: list[T] = []
        for row in rows:
            key = (cast_id, seq_of(row[0]))
            held = self._held.get(key)
            if held is None or held.row is not row:
                made = build(row)
            else:
                self._held.move_to_end(key)
                if held.built is None:
                    held.built = build(row)
                    if held.built is not None:
                        extra = BUILT_OVERHEAD + BUILT_COPIES * _bytes(row)
                        held.size += extra
                        self.bytes += extra
                made = cast("T | None", held.built)
            if made is not None:
                out.append(made)
        self._trim()  # once the read's rows are all used: the oldest go first, this read's own too
        return out

    async def _continued(self, cast_id: str, cached: Row, more: list[Row]) -> bool:
        """Whether the rows read after a cached one continue it (they name its stamp), or, with
        none read, whether Redis still holds it; else the cast's records go."""
        if not more:
            return await self._still(cast_id, cached)
        if follows(more[0][1], _ts(cached)):
            return True
        self.forget(cast_id)  # the log was rewritten after the cached rows: read them again
        return False

    def forget(self, cast_id: str) -> None:
        for key in [k for k in self._held if k[0] == cast_id]:
            self.bytes -= self._held.pop(key).size

    def _cached(self, cast_id: str, first: int, want: int) -> list[Row]:
        out = []
        for seq in range(first, first + max(0, want)):
            held = self._held.get((cast_id, seq))
            if held is None:
                break
            self._held.move_to_end((cast_id, seq))
            out.append(held.row)
        return out

    async def _still(self, cast_id: str, row: Row) -> bool:
        """Whether Redis still holds ``row`` (its stamp where it was); else the cast's records go."""
        seq = seq_of(row[0])
        if holds((await stamps(self.redis, [(cast_id, seq)]))[0], seq, _ts(row)):
            return True
        self.forget(cast_id)
        return False

    async def _shared(self, cast_id: str, first: int, high: str, count: int, fetch: Fetch) -> list[Row]:
        """One XRANGE per range however many ask for it at once; its rows are kept (even when
        the reader that issued it left meanwhile)."""
        key = (cast_id, first, high, count)
        read = self._reads.get(key)
        if read is None:
            read = self._reads[key] = asyncio.ensure_future(self._read(key, fetch))
        return list(await asyncio.shield(read))

    async def _read(self, key: tuple[str, int, str, int], fetch: Fetch) -> list[Row]:
        try:
            rows, keep = await fetch(*key)
        finally:
            self._reads.pop(key, None)
        if keep:
            self.keep(key[0], rows)
        return rows

    def keep(self, cast_id: str, rows: list[Row]) -> None:
        """Rows read from Redis (by this cache, or by someone else: the shared tail's XREAD), for
        the readers that will read them by offset."""
        for row in rows:
            key = (cast_id, seq_of(row[0]))
            old = self._held.pop(key, None)
            if old is not None:
                self.bytes -= old.size
            held = self._held[key] = _Held(row)
            self.bytes += held.size
        self._trim()

    def _trim(self) -> None:
        while self.bytes > self.max_bytes and self._held:
            self.bytes -= self._held.popitem(last=False)[1].size
