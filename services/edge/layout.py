"""A cast's log read once from the start: its state and the byte layout of its playable audio.

The scan keeps headers and body sizes only (bodies are dropped batch by batch), so it costs
little memory however long the cast; bodies are read again by seq_num when they are sent. A
cast that ended in ``eos`` never changes again, so its layout is cached.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

import msgspec
from redis.asyncio import Redis

from castlog import Audio, CastState, Entry, Eos, decode_entry, entry_id, is_terminal, playable

from .reads import xrange

# Records per XRANGE while scanning (bodies included: about 30 KB each).
SCAN_BATCH = 32
# Consecutive chunks fetched per XRANGE when sending bodies.
BODY_BATCH = 8


@dataclass(frozen=True)
class Chunk:
    """One playable audio record: where it is in the log and in the MP3 byte stream."""

    seq: int
    i: int
    size: int  # bytes of its MP3 body
    start: int  # offset of its first byte in the whole MP3


@dataclass
class Layout:
    state: CastState
    chunks: list[Chunk]
    closed: bool  # the last record is terminal (eos or error)
    finished: bool  # the last record is eos: the log never changes again

    @property
    def tail(self) -> int:
        return self.state.tail

    @property
    def total_bytes(self) -> int:
        return self.chunks[-1].start + self.chunks[-1].size if self.chunks else 0

    def last_index(self) -> int:
        """The highest sentence index in the playable audio (-1: none yet)."""
        return self.chunks[-1].i if self.chunks else -1


async def scan(reader: Redis, cast_id: str) -> Layout:
    """Read the whole log once (in batches) and lay out its playable audio."""
    state = CastState()
    stripped: list[Entry] = []
    sizes: dict[int, int] = {}
    last: Entry | None = None
    after = "0-0"
    while True:
        rows = await xrange(reader, cast_id, f"({after}" if after != "0-0" else "-", count=SCAN_BATCH)
        for raw_id, fields in rows:
            entry = decode_entry(raw_id, fields)
            if entry is None:
                continue
            state.add(entry)
            last = entry
            if isinstance(entry.record, Audio):
                sizes[entry.seq_num] = len(entry.record.body)
                entry = msgspec.structs.replace(entry, record=msgspec.structs.replace(entry.record, body=b""))
            stripped.append(entry)
        if len(rows) < SCAN_BATCH:
            break
        after = rows[-1][0].decode()
    chunks, start = [], 0
    for entry in playable(stripped):
        record = entry.record
        assert isinstance(record, Audio)
        size = sizes[entry.seq_num]
        chunks.append(Chunk(entry.seq_num, record.i, size, start))
        start += size
    closed = last is not None and is_terminal(last.record)
    return Layout(state, chunks, closed, last is not None and isinstance(last.record, Eos))


async def bodies(reader: Redis, cast_id: str, chunks: Sequence[Chunk]) -> AsyncIterator[tuple[Chunk, bytes]]:
    """The MP3 body of each chunk, in order, reading runs of consecutive records together."""
    k = 0
    while k < len(chunks):
        run = 1
        while k + run < len(chunks) and run < BODY_BATCH and chunks[k + run].seq == chunks[k].seq + run:
            run += 1
        first, last = chunks[k].seq, chunks[k + run - 1].seq
        rows = await xrange(reader, cast_id, entry_id(first), entry_id(last), count=run)
        found = {}
        for raw_id, fields in rows:
            entry = decode_entry(raw_id, fields)
            if entry is not None and isinstance(entry.record, Audio):
                found[entry.seq_num] = entry.record.body
        for chunk in chunks[k : k + run]:
            yield chunk, found.get(chunk.seq, b"")
        k += run


class LayoutCache:
    """The layouts of finished casts, least recently used dropped first."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[str, Layout] = OrderedDict()

    async def get(self, reader: Redis, cast_id: str) -> Layout:
        layout = self._items.get(cast_id)
        if layout is not None:
            self._items.move_to_end(cast_id)
            return layout
        layout = await scan(reader, cast_id)
        if layout.finished:
            self._items[cast_id] = layout
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return layout
