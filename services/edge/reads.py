"""The shared tail's offset reads, through castlog's ``LogReader`` (archived logs included).

A compatibility seam only: ``tail.py`` and ``listener.py`` call ``LogReads.xrange`` with the
connection per call; once they hold a ``LogReader`` themselves this module goes.
"""

from __future__ import annotations

from redis.asyncio import Redis

from castlog import ArchiveSource, LogReader
from castlog.archive import Row

__all__ = ["LogReads", "Row"]


class LogReads:
    """``LogReader.rows`` over the connection given per call; ``store`` None: no archive here."""

    def __init__(self, store: ArchiveSource | None = None) -> None:
        self.store = store

    async def xrange(self, reader: Redis, cast_id: str, low: str, high: str = "+", count: int | None = None,
                     *, bodies: bool = True) -> list[Row]:
        return await LogReader(reader, self.store).rows(cast_id, low, high, count, bodies=bodies)
