"""Rows of a cast log, as XRANGE gives them: from Redis, or, once the log is archived, rebuilt
from its index with bodies read from the archive (docs/design.md, "The archive").

This is edge's one seam where records and audio bytes are fetched. An archived log is one entry
(its ``eos``, carrying the descriptor), so any read of it either returns that entry (an open
range) or comes back short (a bounded range below it): both are completed from the index.
"""

from __future__ import annotations

from typing import Any, cast

from redis.asyncio import Redis

from blobstore import BlobStore, BlobStoreError
from castlog import archive, cast_key, seq_of

Row = tuple[bytes, dict[bytes, bytes]]
SIZE_FIELD = b"n"  # on rows rebuilt without bodies: the body's size
BLOB_FIELD = b"k"  # on the rebuilt terminal row: the blob's key (its playable prefix is /audio.mp3)


class ArchiveUnavailable(Exception):
    """The log is archived but this edge has no store (ARCHIVE_URL unset) or the store failed."""


async def xrange(reader: Redis, cast_id: str, low: str, high: str = "+", count: int | None = None) -> list[Row]:
    """Rows of ``pub/casts/<cast_id>`` from ``low`` to ``high`` (ids, ``(`` for exclusive)."""
    rows: Any = await reader.xrange(cast_key(cast_id), min=low, max=high, count=count)
    return cast("list[Row]", rows or [])


class LogReads:
    """XRANGE over cast logs that also reads archived ones; ``store`` None: no archive here."""

    def __init__(self, store: BlobStore | None = None) -> None:
        self.store = store

    async def xrange(self, reader: Redis, cast_id: str, low: str, high: str = "+", count: int | None = None,
                     *, bodies: bool = True) -> list[Row]:
        """Like :func:`xrange`. With ``bodies=False`` rows rebuilt from an archive carry their
        body's size in field ``n`` instead of the body (what a layout needs)."""
        rows = await xrange(reader, cast_id, low, high, count)
        first, last = _seq_bounds(low, high)
        d = archive.descriptor_of(rows[-1][1]) if rows else None
        if d is None and high != "+" and len(rows) < min(last - first + 1, count or last - first + 1):
            d = await self.descriptor(reader, cast_id)  # a bounded range came back short
        if d is None:
            return rows
        return await self.rebuild(cast_id, d, first, last, count, bodies)

    async def descriptor(self, reader: Redis, cast_id: str) -> archive.Descriptor | None:
        last: Any = await reader.xrevrange(cast_key(cast_id), count=1)
        return archive.descriptor_of(last[0][1]) if last else None

    async def rebuild(self, cast_id: str, d: archive.Descriptor, first: int, last: int, count: int | None,
                      bodies: bool) -> list[Row]:
        seqs = [row[0] for row in d.index if first <= row[0] <= last][: count or None]
        if not seqs:
            return []
        spans = archive.spans(d, seqs)
        if bodies:
            rows = archive.rows(d, seqs[0], seqs[-1], await self.bodies(cast_id, d, spans))
        else:
            rows = archive.rows(d, seqs[0], seqs[-1], {})
            for raw_id, fields in rows:
                seq = seq_of(raw_id)
                if seq in spans:
                    del fields[b"b"]
                    fields[SIZE_FIELD] = b"%d" % spans[seq][1]
        if seqs[-1] == d.tail - 1:
            rows[-1][1][BLOB_FIELD] = d.key.encode()
        return rows

    async def bodies(self, cast_id: str, d: archive.Descriptor, spans: dict[int, tuple[int, int]]) -> dict[int, bytes]:
        """The bodies of ``spans`` (seq -> offset, size), in one ranged read of the blob."""
        if not spans:
            return {}
        lo = min(off for off, _ in spans.values())
        hi = max(off + size for off, size in spans.values())
        data = b"".join([piece async for piece in self.stream(cast_id, d.key, lo, hi)])
        return {seq: data[off - lo : off - lo + size] for seq, (off, size) in spans.items()}

    async def stream(self, cast_id: str, key: str, start: int, end: int) -> Any:
        """Bytes ``start..end`` (exclusive) of an archived blob, piece by piece."""
        if self.store is None:
            raise ArchiveUnavailable(f"cast {cast_id} is archived and this edge has no ARCHIVE_URL")
        try:
            async for piece in self.store.read(key, start, end):
                yield piece
        except BlobStoreError as exc:
            raise ArchiveUnavailable(f"cast {cast_id}: the archive failed ({exc})") from exc


def _seq_bounds(low: str, high: str) -> tuple[int, int]:
    """The seq range an XRANGE ``low``..``high`` covers (ids ``0-(n+1)``, ``(`` exclusive)."""
    if low in ("-", "0-0"):
        first = 0
    elif low.startswith("("):
        first = seq_of(low[1:]) + 1
    else:
        first = seq_of(low)
    last = 2**63 if high == "+" else (seq_of(high[1:]) - 1 if high.startswith("(") else seq_of(high))
    return max(0, first), last
