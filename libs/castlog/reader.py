"""The one reader of cast logs (docs/design.md, "Reading a log"): rows and records by offset,
the bodies of laid-out chunks, and views (``view.py``): the log
folded incrementally into the cast's state and the byte layout of its playable audio.

An archived log is one entry (its ``eos``, carrying the descriptor, docs/design.md "The
archive"), so any read of it either returns that entry (an open range) or comes back short (a
bounded range below it): both are completed from the index, bodies read from the archive. A
reader built without an archive is one that does not know the archive: its records of an
archived log are the ``eos`` alone, and bodies it would have to fetch from the archive raise
:class:`ArchiveUnavailable`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast

from redis.asyncio import Redis

from . import archive, keys, scripts
from .keys import Row
from .marks import read_only
from .records import Audio, Entry, decode_entry, decode_rows
from .rowcache import RowCache
from .view import BLOB_FIELD, SIZE_FIELD, Chunk, StaleLayout

# One blocking read of a log's tail waits at most this long before its reader re-checks its state.
FOLLOW_BLOCK_MS = 5_000
# Records fetched per round trip when replaying or following.
READ_BATCH = 100
# Consecutive chunks fetched per XRANGE when sending bodies.
BODY_BATCH = 8
# XRANGE's COUNT when a read of headers names none (a log holds far fewer records).
ALL_ROWS = 1 << 40


class ArchiveSource(Protocol):
    """Where archived blobs are read (``blobstore.BlobStore`` is one)."""

    def read(self, key: str, start: int = 0, end: int | None = None) -> AsyncIterator[bytes]: ...


class ArchiveUnavailable(Exception):
    """The log is archived but this reader has no archive, or the archive failed."""


@dataclass(frozen=True)
class Page:
    """One read by offset: the records, where the next read starts and the log's tail."""

    entries: list[Entry]
    next_seq: int  # one past the last row read (rows of unknown kinds included); the asked seq if none
    tail: int  # the next seq_num the log will take (0: no such cast)


class LogReader:
    """Every read of ``pub/casts/<id>``, over one Redis client (and an archive, where archived
    logs are served). A follower of one log's tail is bench/logfollow.py (benchmarks, tests)."""

    def __init__(self, redis: Redis, blobs: ArchiveSource | None = None, cache: RowCache | None = None) -> None:
        self.redis = redis
        self.blobs = blobs  # the archive's blob store (None: this reader does not know the archive)
        self.cache = cache  # rows with bodies, shared by the process's readers (None: every read goes to Redis)

    # ---- rows: XRANGE, archived logs rebuilt from their index ------------------------------

    async def rows(self, cast_id: str, low: str, high: str = "+", count: int | None = None,
                   *, bodies: bool = True) -> list[Row]:
        """Rows of the log from ``low`` to ``high`` (ids, ``(`` for exclusive) as XRANGE gives
        them, archived logs included. With ``bodies=False`` each audio row carries its body's size
        in field ``n`` instead of the body (what a layout needs: the bodies stay in Redis). With a
        cache, rows with bodies come through it (counted reads only)."""
        if bodies and self.cache is not None and count is not None:
            return await self.cache.rows(cast_id, keys.seq_bounds(low, high)[0], high, count, self._fetch)
        return (await self._rows(cast_id, low, high, count, bodies))[0]

    async def _fetch(self, cast_id: str, first: int, high: str, count: int) -> tuple[list[Row], bool]:
        return await self._rows(cast_id, keys.entry_id(first), high, count, True)

    async def _rows(self, cast_id: str, low: str, high: str, count: int | None, bodies: bool) -> tuple[list[Row], bool]:
        """The rows, and whether Redis holds them as they are (False: rebuilt from the archive)."""
        rows = await (self._xrange(cast_id, low, high, count) if bodies else self._headers(cast_id, low, high, count))
        first, last = keys.seq_bounds(low, high)
        d = archive.descriptor_of(rows[-1][1]) if rows else None
        if d is None and high != "+" and len(rows) < min(last - first + 1, count or last - first + 1):
            d = await self.descriptor(cast_id)  # a bounded range came back short
        if d is None:
            return rows, True
        return await self.rebuild(cast_id, d, first, last, count, bodies), False

    async def _headers(self, cast_id: str, low: str, high: str, count: int | None, command: str = "XRANGE") -> list[Row]:
        """Like an XRANGE (or XREVRANGE), each body replaced by its size ``n`` in Redis (one small script)."""
        args = [command, low, high, count or ALL_ROWS]
        reply = await read_only(self.redis, scripts.HEADERS, [keys.cast_key(cast_id)], args)
        return [(raw_id, dict(zip(flat[::2], flat[1::2]))) for raw_id, flat in reply or ()]

    async def descriptor(self, cast_id: str) -> archive.Descriptor | None:
        """The archive descriptor of the log's last entry (None: not archived, or no log)."""
        row = await self.last_row(cast_id, bodies=False)
        return archive.descriptor_of(row[1]) if row else None

    async def rebuild(self, cast_id: str, d: archive.Descriptor, first: int, last: int, count: int | None,
                      bodies: bool) -> list[Row]:
        """The rows of seqs ``first..last`` (at most ``count``) of an archived log."""
        seqs = [row[0] for row in d.index if first <= row[0] <= last][: count or None]
        if not seqs:
            return []
        spans = archive.spans(d, seqs)
        if bodies:
            rows = archive.rows(d, seqs[0], seqs[-1], await self._blob_bodies(cast_id, d, spans))
        else:
            rows = archive.rows(d, seqs[0], seqs[-1], {})
            for raw_id, fields in rows:
                seq = keys.seq_of(raw_id)
                if seq in spans:
                    del fields[b"b"]
                    fields[SIZE_FIELD] = b"%d" % spans[seq][1]
        if seqs[-1] == d.tail - 1:
            rows[-1][1][BLOB_FIELD] = d.key.encode()
        return rows

    async def stream(self, cast_id: str, key: str, start: int, end: int) -> AsyncIterator[bytes]:
        """Bytes ``start..end`` (exclusive) of an archived blob, piece by piece."""
        if self.blobs is None:
            raise ArchiveUnavailable(f"cast {cast_id} is archived and this reader has no archive (ARCHIVE_URL)")
        try:
            async for piece in self.blobs.read(key, start, end):
                yield piece
        except Exception as exc:  # noqa: BLE001 - whatever the store raises, the archive failed
            raise ArchiveUnavailable(f"cast {cast_id}: the archive failed ({exc})") from exc

    async def _blob_bodies(self, cast_id: str, d: archive.Descriptor,
                           spans: dict[int, tuple[int, int]]) -> dict[int, bytes]:
        """The bodies of ``spans`` (seq -> offset, size), in one ranged read of the blob."""
        if not spans:
            return {}
        lo = min(off for off, _ in spans.values())
        hi = max(off + size for off, size in spans.values())
        data = b"".join([piece async for piece in self.stream(cast_id, d.key, lo, hi)])
        return {seq: data[off - lo : off - lo + size] for seq, (off, size) in spans.items()}

    async def stored(self, cast_id: str) -> list[Row]:
        """Every row of the log as Redis holds it, in one XRANGE (an archived log: its one entry)."""
        return await self._xrange(cast_id, "-")

    async def _xrange(self, cast_id: str, low: str, high: str = "+", count: int | None = None) -> list[Row]:
        rows: Any = await self.redis.xrange(keys.cast_key(cast_id), min=low, max=high, count=count)
        return cast("list[Row]", rows or [])

    async def _range(self, cast_id: str, low: str, count: int) -> list[Row]:
        """An open range: archive-aware when this reader has an archive, else as Redis holds it."""
        if self.blobs is None:
            return await self._xrange(cast_id, low, "+", count)
        return await self.rows(cast_id, low, "+", count)

    # ---- records by offset --------------------------------------------------------------------

    async def read(self, cast_id: str, seq_num: int = 0, limit: int = READ_BATCH) -> list[Entry]:
        """Up to ``limit`` records from ``seq_num`` on (records of unknown kinds are skipped)."""
        return decode_rows(await self._range(cast_id, keys.entry_id(seq_num), limit))

    async def read_all(self, cast_id: str, batch: int = READ_BATCH) -> tuple[list[Entry], int]:
        """Every record of the log, and its tail: the next seq_num, counted from the stored ids
        themselves, so records of kinds this version skips still count."""
        entries: list[Entry] = []
        tail, after = 0, "-"
        while True:
            rows = await self._range(cast_id, after, batch)
            entries.extend(decode_rows(rows))
            if rows:
                tail = keys.seq_of(rows[-1][0]) + 1
                after = keys.entry_id(tail)
            if len(rows) < batch:
                return entries, tail

    async def page(self, cast_id: str, seq_num: int, limit: int) -> Page:
        """Up to ``limit`` records from ``seq_num`` and the log's tail in one round trip (XRANGE
        and XLEN pipelined); an archived log (its XLEN is 1) takes one more for its index."""
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.xrange(keys.cast_key(cast_id), min=keys.entry_id(seq_num), count=limit)
            pipe.xlen(keys.cast_key(cast_id))
            rows, length = await pipe.execute()
        tail = int(length)
        if tail == 1:  # one entry: a fresh cast's meta, or an archived log (its eos and index)
            d = await self.descriptor(cast_id)
            if d is not None:
                rows, tail = await self.rebuild(cast_id, d, seq_num, d.tail - 1, limit, True), d.tail
        next_seq = keys.seq_of(rows[-1][0]) + 1 if rows else seq_num
        return Page(decode_rows(rows), next_seq, tail)

    async def last_row(self, cast_id: str, *, bodies: bool = True) -> Row | None:
        """The log's last entry as Redis holds it (an archived log's: its ``eos`` and index);
        with ``bodies=False`` an audio row carries its body's size ``n`` instead."""
        if bodies:
            rows: Any = await self.redis.xrevrange(keys.cast_key(cast_id), count=1)
        else:
            rows = await self._headers(cast_id, "+", "-", 1, "XREVRANGE")
        return cast(Row, rows[0]) if rows else None

    async def last(self, cast_id: str, *, bodies: bool = True) -> Entry | None:
        """The log's last record as Redis holds it (an archived log's: its ``eos``)."""
        row = await self.last_row(cast_id, bodies=bodies)
        return decode_entry(*row) if row else None

    async def tail(self, cast_id: str) -> int:
        """The next seq_num to be written: one past the last entry's id (an archived log keeps
        only its last entry, so XLEN is not the tail there)."""
        row = await self.last_row(cast_id, bodies=False)
        return keys.seq_of(row[0]) + 1 if row else 0

    # ---- the playable layout (folded by a LogView(reader, cast_id)) ----------------------------

    async def bodies(self, cast_id: str, chunks: Sequence[Chunk]) -> AsyncIterator[tuple[Chunk, bytes]]:
        """The MP3 body of each chunk, in order, reading runs of consecutive records together;
        :class:`StaleLayout` when a record is not the one laid out."""
        k = 0
        while k < len(chunks):
            run = 1
            while k + run < len(chunks) and run < BODY_BATCH and chunks[k + run].seq == chunks[k].seq + run:
                run += 1
            first, last = chunks[k].seq, chunks[k + run - 1].seq
            rows = await self.rows(cast_id, keys.entry_id(first), keys.entry_id(last), count=run)
            found = {}
            for raw_id, fields in rows:
                entry = decode_entry(raw_id, fields)
                if entry is not None and isinstance(entry.record, Audio):
                    found[entry.seq_num] = entry.record.body
            for chunk in chunks[k : k + run]:
                body = found.get(chunk.seq)
                if body is None or len(body) != chunk.size:
                    raise StaleLayout(f"cast {cast_id}: record {chunk.seq} is not the one laid out")
                yield chunk, body
            k += run
