"""A cast's log read incrementally: its state and the byte layout of its playable audio.

Each cached cast keeps what its log said so far (headers and body sizes only: bodies are dropped
batch by batch, so it costs little memory however long the cast) and the id of the last record
read; a request reads only the records appended since. Bodies are read again by seq_num when they
are sent. Every request gets an immutable snapshot, so a stream that holds one across awaits
never sees it change.

A log can shrink or be rewritten (Redis lost its last second of writes with the AOF, a failover
reached a replica that lagged): every request first checks the cache against the log's mark
(its length, last record and the stamp of the last record read; one small script, no bodies),
finished casts included, and reads the whole log again when Redis holds less or other records.
"""

from __future__ import annotations

import asyncio
import copy
from collections import OrderedDict
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

import msgspec
from redis.asyncio import Redis

from castlog import Audio, CastState, Entry, Eos, decode_entry, entry_id, is_terminal, mark, playable, seq_of

from .reads import BLOB_FIELD, SIZE_FIELD, LogReads, Row

# Records per XRANGE while scanning (bodies included: about 30 KB each).
SCAN_BATCH = 32
# Consecutive chunks fetched per XRANGE when sending bodies.
BODY_BATCH = 8


class StaleLayout(Exception):
    """A body read for a layout is gone or has another size: the log changed under the layout."""


@dataclass(frozen=True)
class Chunk:
    """One playable audio record: where it is in the log and in the MP3 byte stream."""

    seq: int
    i: int
    size: int  # bytes of its MP3 body
    start: int  # offset of its first byte in the whole MP3


@dataclass(frozen=True)
class Layout:
    """A snapshot of a cast's log: never changed after it is built (``state`` is a private copy)."""

    state: CastState
    chunks: tuple[Chunk, ...]
    closed: bool  # the last record is terminal (eos or error)
    finished: bool  # the last record is eos: the log never changes again
    blob: str | None = None  # archived: the blob whose first total_bytes are the playable audio
    audio: tuple[Audio, ...] = ()  # the playable audio records, bodies dropped (texts, times, words)

    @property
    def tail(self) -> int:
        return self.state.tail

    @property
    def total_bytes(self) -> int:
        return self.chunks[-1].start + self.chunks[-1].size if self.chunks else 0

    def last_index(self) -> int:
        """The highest sentence index in the playable audio (-1: none yet)."""
        return self.chunks[-1].i if self.chunks else -1


class CastScan:
    """One cast's log as read so far, extended by the records appended since the last read."""

    def __init__(self, cast_id: str, reads: LogReads | None = None) -> None:
        self.cast_id = cast_id
        self.reads = reads or LogReads()
        self.blob: str | None = None
        self.state = CastState()
        self.closed = False
        self.finished = False
        # playable() of the records merged so far and the records read since, bodies stripped
        self._heard: list[Entry] = []
        self._unheard: list[Entry] = []
        self._sizes: dict[int, int] = {}  # seq_num -> body bytes, of _heard and _unheard
        self._after = ""  # id of the last row read ("": none yet)
        self._last_seq = -1  # that row's seq_num
        self._last_ts: int | None = None  # and its stamp (ts)
        self._length = 0  # rows read (records of unknown kinds included): the log's length
        self._lock = asyncio.Lock()
        self._reads = 0  # XRANGEs issued so far
        self._synced = -1  # the number of the last XRANGE that reached the end of the log
        self._layout: Layout | None = None

    async def refresh(self, reader: Redis) -> Layout:
        """A snapshot of the log as Redis holds it at this call: the records appended since,
        or the whole log read again when it shrank or was rewritten."""
        arrived = self._reads
        async with self._lock:  # simultaneous requests share one read
            if self._synced > arrived:  # a read issued after we came reached the end: it's ours too
                return self.layout()
            self._reads += 1
            number = self._reads
            if self._length:  # check what we read against what Redis holds now
                now = await mark(reader, self.cast_id, self._last_seq)
                if not now.holds(self._last_seq, self._last_ts) or now.length < self._length:
                    self._reset()  # Redis holds less or other records than we read
                elif now.length == self._length and now.last_seq == self._last_seq:
                    self._synced = number  # nothing new
                    return self.layout()
            while True:
                self._reads += 1
                number = self._reads
                low = f"({self._after}" if self._after else "-"
                rows = await self.reads.xrange(reader, self.cast_id, low, count=SCAN_BATCH, bodies=False)
                self._fold(rows)
                if len(rows) < SCAN_BATCH:
                    self._synced = number
                    break
        return self.layout()

    def _fold(self, rows: list[Row]) -> None:
        """Take in one batch (synchronously: a cancelled read leaves a consistent prefix)."""
        if not rows:
            return
        for raw_id, fields in rows:
            entry = decode_entry(raw_id, fields)
            if entry is None:
                continue
            self.state.add(entry)
            self.closed, self.finished = is_terminal(entry.record), isinstance(entry.record, Eos)
            if isinstance(entry.record, Audio):
                size = fields.get(SIZE_FIELD)  # rebuilt from an archive: the size, not the body
                self._sizes[entry.seq_num] = int(size) if size is not None else len(entry.record.body)
                entry = msgspec.structs.replace(entry, record=msgspec.structs.replace(entry.record, body=b""))
            self._unheard.append(entry)
        self._after = rows[-1][0].decode()
        self._last_seq = seq_of(self._after)
        self._last_ts = int(rows[-1][1].get(b"ts", 0)) or None
        self._length += len(rows)
        self._layout = None
        blob = fields.get(BLOB_FIELD)
        if blob is not None:
            self.blob = blob.decode()

    def _reset(self) -> None:
        """Forget what was read: the next read starts at the log's first record."""
        self.state, self.closed, self.finished = CastState(), False, False
        self._heard, self._unheard, self._sizes = [], [], {}
        self._after, self._last_seq, self._last_ts, self._length = "", -1, None, 0
        self._layout, self.blob = None, None

    def layout(self) -> Layout:
        """The snapshot of the log read so far (built once per change)."""
        if self._layout is None:
            if self._unheard:
                # playable() is a fold whose whole state is its result (one audio entry per
                # sentence index), so folding the new records onto the audio heard so far gives
                # exactly playable() of the whole log, resume_from of later starts included.
                self._heard = playable(self._heard + self._unheard)
                self._unheard = []
                self._sizes = {e.seq_num: self._sizes[e.seq_num] for e in self._heard}
            chunks, start = [], 0
            for entry in self._heard:
                record = entry.record
                assert isinstance(record, Audio)
                size = self._sizes[entry.seq_num]
                chunks.append(Chunk(entry.seq_num, record.i, size, start))
                start += size
            audio = tuple(e.record for e in self._heard if isinstance(e.record, Audio))
            self._layout = Layout(copy.deepcopy(self.state), tuple(chunks), self.closed, self.finished, self.blob, audio)
        return self._layout


async def scan(reader: Redis, cast_id: str, reads: LogReads | None = None) -> Layout:
    """Read the whole log once (in batches) and lay out its playable audio."""
    return await CastScan(cast_id, reads).refresh(reader)


async def bodies(reader: Redis, cast_id: str, chunks: Sequence[Chunk],
                 reads: LogReads | None = None) -> AsyncIterator[tuple[Chunk, bytes]]:
    """The MP3 body of each chunk, in order, reading runs of consecutive records together."""
    k = 0
    while k < len(chunks):
        run = 1
        while k + run < len(chunks) and run < BODY_BATCH and chunks[k + run].seq == chunks[k].seq + run:
            run += 1
        first, last = chunks[k].seq, chunks[k + run - 1].seq
        rows = await (reads or LogReads()).xrange(reader, cast_id, entry_id(first), entry_id(last), count=run)
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


class LayoutCache:
    """The scans of the casts read lately, live or finished, least recently used dropped first.

    A cast whose log is empty (no such cast) is not kept. A first read in progress is kept
    aside until it ends, so simultaneous first requests share it; those are as many as the
    requests in flight, which the rate limits bound.
    """

    def __init__(self, size: int, reads: LogReads | None = None) -> None:
        self.size = size
        self.reads = reads or LogReads()
        self._items: OrderedDict[str, CastScan] = OrderedDict()
        self._loading: dict[str, CastScan] = {}

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, cast_id: object) -> bool:
        return cast_id in self._items

    async def get(self, reader: Redis, cast_id: str) -> Layout:
        scan = self._items.get(cast_id)
        if scan is not None:
            self._items.move_to_end(cast_id)
            return await scan.refresh(reader)
        scan = self._loading.get(cast_id)
        if scan is None:
            scan = self._loading[cast_id] = CastScan(cast_id, self.reads)
        try:
            return await scan.refresh(reader)
        finally:
            if self._loading.get(cast_id) is scan:  # the first to finish files it
                del self._loading[cast_id]
                if scan.state.tail > 0:
                    self._keep(cast_id, scan)

    def _keep(self, cast_id: str, scan: CastScan) -> None:
        self._items[cast_id] = scan
        while len(self._items) > self.size:
            self._items.popitem(last=False)
