"""A follower: one cast log followed with blocking reads of its own, not through a shared tail.

Every service follows logs through its process's shared tail (``fanout.Tail``); benchmarks and
tests that watch one cast from outside use this. Its connection stays blocked: give it its own.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from castlog import Entry, LogReader, archive, is_terminal, keys
from castlog.keys import Row, Rows
from castlog.reader import FOLLOW_BLOCK_MS, READ_BATCH
from castlog.records import decode_entry


async def follow(
    reader: LogReader,
    cast_id: str,
    seq_num: int = 0,
    *,
    block_ms: int = FOLLOW_BLOCK_MS,
    batch: int = READ_BATCH,
    stop_at_terminal: bool = True,
) -> AsyncIterator[Entry]:
    """Replay from ``seq_num`` then follow the log's tail, ending after ``eos`` or ``error``.

    Replay and live use the same read keyed by the last seen entry id, so the hand-over
    has neither a gap nor a duplicate. An archived log met on the way is replayed from its
    index (with an archive; without one its ``eos`` is what comes).
    """
    key = keys.cast_key(cast_id)
    if seq_num > 0 and stop_at_terminal:
        last = await reader.last(cast_id)
        if last is not None and last.seq_num < seq_num and is_terminal(last.record):
            return  # seeking past the end of a finished log: nothing will ever come
    after: str | bytes = keys.entry_id(seq_num - 1) if seq_num > 0 else "0-0"
    while True:
        reply: Any = await reader.redis.xread({key: after}, count=batch, block=block_ms)
        for _stream, rows in reply or ():
            async for entry_id, fields in _unarchived(reader, cast_id, rows, keys.seq_of(after) + 1, batch):
                after = entry_id
                entry = decode_entry(entry_id, fields)
                if entry is None:
                    continue
                yield entry
                if stop_at_terminal and is_terminal(entry.record):
                    return


async def _unarchived(reader: LogReader, cast_id: str, rows: Rows, first: int, batch: int) -> AsyncIterator[Row]:
    """``rows`` as read; an archived log's one entry (with an archive here) replaced by the
    log's rows from seq ``first``, read from the archive batch by batch."""
    d = archive.descriptor_of(rows[-1][1]) if rows and reader.blobs is not None else None
    if d is None:
        for row in rows:
            yield row
        return
    while first < d.tail:
        got = await reader.rebuild(cast_id, d, first, d.tail - 1, batch, True)
        if not got:
            return
        for row in got:
            yield row
        first = keys.seq_of(got[-1][0]) + 1
