"""One typed XRANGE over a cast log (redis-py's stubs allow None where Redis never sends it)."""

from __future__ import annotations

from typing import Any, cast

from redis.asyncio import Redis

from castlog import cast_key

Row = tuple[bytes, dict[bytes, bytes]]


async def xrange(reader: Redis, cast_id: str, low: str, high: str = "+", count: int | None = None) -> list[Row]:
    """Rows of ``pub/casts/<cast_id>`` from ``low`` to ``high`` (ids, ``(`` for exclusive)."""
    rows: Any = await reader.xrange(cast_key(cast_id), min=low, max=high, count=count)
    return cast("list[Row]", rows or [])
