"""A cast log folded incrementally into the cast's state and the byte layout of its playable
audio (docs/design.md, "Reading a log"). A :class:`LogView` reads through its
:class:`~castlog.reader.LogReader` (``LogView(reader, cast_id)``) only the records appended since
its last refresh; every refresh hands out an immutable :class:`Layout`, so a stream that holds
one across awaits never sees it change.
"""

from __future__ import annotations

import asyncio
import copy
from dataclasses import dataclass
from typing import Protocol

import msgspec
from redis.asyncio import Redis

from . import keys
from .keys import Row
from .marks import holds, mark
from .records import Audio, Entry, Eos, decode_entry, is_terminal
from .state import CastState, playable

# Records per XRANGE while folding a log into a view (bodies included: about 30 KB each).
SCAN_BATCH = 32
SIZE_FIELD = b"n"  # on rows rebuilt without bodies: the body's size
BLOB_FIELD = b"k"  # on the rebuilt terminal row: the blob's key (its playable prefix is /audio.mp3)


class StaleLayout(Exception):
    """A body read for a layout is gone or has another size: the log changed under the layout."""


class RowSource(Protocol):
    """What a view reads through (a ``LogReader``): its Redis client and archive-aware rows."""

    redis: Redis

    async def rows(self, cast_id: str, low: str, high: str = "+", count: int | None = None,
                   *, bodies: bool = True) -> list[Row]: ...


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


class LogView:
    """One cast's log as read so far, extended by the records appended since the last read.

    It keeps what the log said (headers and body sizes only: bodies are dropped batch by batch,
    so it costs little memory however long the cast) and the id of the last record read. Every
    refresh first checks that against the log's mark (its length, last record and the stamp of
    the last record read; one small script, no bodies): the one place where a log that shrank
    or was rewritten is noticed, and read again from its first record.
    """

    def __init__(self, reader: RowSource, cast_id: str) -> None:
        self.reader = reader
        self.cast_id = cast_id
        self._lock = asyncio.Lock()
        self._reads = 0  # XRANGEs issued so far
        self._synced = -1  # the number of the last XRANGE that reached the end of the log
        self._reset()

    def _reset(self) -> None:
        """Forget what was read: the next read starts at the log's first record."""
        self.state, self.closed, self.finished = CastState(), False, False
        self.blob: str | None = None
        # playable() of the records merged so far and the records read since, bodies stripped
        self._heard: list[Entry] = []
        self._unheard: list[Entry] = []
        self._sizes: dict[int, int] = {}  # seq_num -> body bytes, of _heard and _unheard
        self._after = ""  # id of the last row read ("": none yet)
        self._last_seq = -1  # that row's seq_num
        self._last_ts: int | None = None  # and its stamp (ts)
        self._length = 0  # rows read (records of unknown kinds included): the log's length
        self._layout: Layout | None = None

    async def refresh(self) -> Layout:
        """A snapshot of the log as Redis holds it at this call: the records appended since,
        or the whole log read again when it shrank or was rewritten."""
        arrived = self._reads
        async with self._lock:  # simultaneous requests share one read
            if self._synced > arrived:  # a read issued after we came reached the end: it's ours too
                return self.layout()
            self._reads += 1
            number = self._reads
            if self._length and await self._unchanged():
                self._synced = number  # nothing new
                return self.layout()
            while True:
                self._reads += 1
                number = self._reads
                low = f"({self._after}" if self._after else "-"
                rows = await self.reader.rows(self.cast_id, low, count=SCAN_BATCH, bodies=False)
                self._fold(rows)
                if len(rows) < SCAN_BATCH:
                    self._synced = number
                    break
        return self.layout()

    async def _unchanged(self) -> bool:
        """Check what was read against what Redis holds now: True when nothing was appended;
        when Redis holds less or other records than were read, forget them (the shrink check)."""
        now = await mark(self.reader.redis, self.cast_id, self._last_seq)
        if not holds(now.ts_at, self._last_seq, self._last_ts) or now.length < self._length:
            self._reset()
            return False
        return now.length == self._length and now.last_seq == self._last_seq

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
        self._last_seq = keys.seq_of(self._after)
        self._last_ts = int(rows[-1][1].get(b"ts", 0)) or None
        self._length += len(rows)
        self._layout = None
        blob = rows[-1][1].get(BLOB_FIELD)
        if blob is not None:
            self.blob = blob.decode()

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
