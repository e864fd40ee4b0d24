"""One bounded cache of cast-log rows (bodies included), shared by every reader of a process, so
N listeners catching up on one log cost Redis about one read of it, not N (docs/design.md,
"Bodies travel once").

Rows are kept by ``(cast_id, seq)`` up to ``max_bytes`` (least recently used dropped first). A
read of ``count`` rows from ``first`` takes the rows cached from there on and reads only the rest
from Redis; simultaneous reads of the same range share one XRANGE. A log can shrink or be
rewritten (``[R:views-checked-on-use]``), so a cached row is checked on use: rows read from Redis
after cached ones must name the last cached row's stamp as their predecessor (``p``), and a
read served wholly from the cache checks the stamp of its last row (one small script, no
bodies). A row that fails either check drops the cast's rows and the read goes to Redis.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable

from redis.asyncio import Redis

from .keys import Row, seq_bounds, seq_of
from .marks import follows, holds, stamps

# Bytes a cached row costs beyond its fields (the key, the tuple, the dict).
ROW_OVERHEAD = 200
# Rows held across all casts: about 1,000 chunks of 30 KB.
ROW_CACHE_BYTES = 32 * 1024 * 1024

# Reads rows (cast_id, first seq, high, count) from Redis: the rows, and whether they may be kept
# (rows rebuilt from an archive are not: they cost Redis nothing).
Fetch = Callable[[str, int, str, int], Awaitable[tuple[list[Row], bool]]]


def _size(row: Row) -> int:
    return ROW_OVERHEAD + sum(len(k) + len(v) for k, v in row[1].items())


def _ts(row: Row) -> int | None:
    return int(row[1].get(b"ts", 0)) or None


class RowCache:
    """Rows of Redis-held cast logs (never rebuilt archive rows), bounded by ``max_bytes``."""

    def __init__(self, redis: Redis, max_bytes: int = ROW_CACHE_BYTES) -> None:
        self.redis = redis  # the stamp checks
        self.max_bytes = max_bytes
        self.bytes = 0
        self._rows: OrderedDict[tuple[str, int], Row] = OrderedDict()
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

    async def _continued(self, cast_id: str, cached: Row, more: list[Row]) -> bool:
        """Whether the rows read after a cached one continue it (they name its stamp), or, with
        none read, whether Redis still holds it; else the cast's rows go."""
        if not more:
            return await self._still(cast_id, cached)
        if follows(more[0][1], _ts(cached)):
            return True
        self.forget(cast_id)  # the log was rewritten after the cached rows: read them again
        return False

    def forget(self, cast_id: str) -> None:
        for key in [k for k in self._rows if k[0] == cast_id]:
            self.bytes -= _size(self._rows.pop(key))

    def _cached(self, cast_id: str, first: int, want: int) -> list[Row]:
        out = []
        for seq in range(first, first + max(0, want)):
            row = self._rows.get((cast_id, seq))
            if row is None:
                break
            self._rows.move_to_end((cast_id, seq))
            out.append(row)
        return out

    async def _still(self, cast_id: str, row: Row) -> bool:
        """Whether Redis still holds ``row`` (its stamp where it was); else the cast's rows go."""
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
            old = self._rows.pop(key, None)
            if old is not None:
                self.bytes -= _size(old)
            self._rows[key] = row
            self.bytes += _size(row)
        while self.bytes > self.max_bytes and self._rows:
            self.bytes -= _size(self._rows.popitem(last=False)[1])
