"""One bounded cache of built :class:`~fanout.listener.Item` s, shared through the tail (its
``Hub``) by every listener of a process that reads by offset: N late joiners of one cast decode
each record and build its public JSON (the audio in base64) and its SSE frame once, not N times.

Items are kept by ``(cast_id, seq, ts)``: a log rewritten under a reader (``[R:views-checked-on-use]``)
has new stamps at those seqs, so its records never meet the old Items. The rows themselves are
checked where they are read (``RowCache``); this cache only saves building what they hold.
Bounded by bytes, least recently used dropped first; an Item is charged up front for what it
holds once built: its row, and the JSON, frame and chunk, each about the body in base64.
"""

from __future__ import annotations

from collections import OrderedDict

from castlog.keys import Row, seq_of
from castlog.records import decode_entry

from .listener import Item

# Built Items held across all casts: about 300 records of 30 KB, each held five times over.
ITEM_CACHE_BYTES = 48 * 1024 * 1024
# An Item holds its row's bytes once decoded and about 4/3 of them three times (JSON, frame, chunk).
ITEM_COPIES = 5
ITEM_OVERHEAD = 400  # the Item, its Entry and record, the key


def _size(row: Row) -> int:
    return ITEM_OVERHEAD + ITEM_COPIES * sum(len(k) + len(v) for k, v in row[1].items())


class ItemCache:
    """Items by ``(cast_id, seq, ts)`` up to ``max_bytes``."""

    def __init__(self, max_bytes: int = ITEM_CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self.hits = self.misses = 0  # Items served from the cache / built
        self._items: OrderedDict[tuple[str, int, bytes], tuple[Item, int]] = OrderedDict()

    def items(self, cast_id: str, rows: list[Row]) -> list[Item]:
        """The Items of ``rows`` (in order; rows of kinds this version does not know left out)."""
        out: list[Item] = []
        for raw_id, fields in rows:
            key = (cast_id, seq_of(raw_id), fields.get(b"ts", b""))
            held = self._items.get(key)
            if held is not None:
                self._items.move_to_end(key)
                self.hits += 1
                out.append(held[0])
                continue
            entry = decode_entry(raw_id, fields)
            if entry is None:
                continue
            self.misses += 1
            item = Item(entry)
            out.append(item)
            self._keep(key, item, _size((raw_id, fields)))
        return out

    def _keep(self, key: tuple[str, int, bytes], item: Item, size: int) -> None:
        if size > self.max_bytes:
            return  # it would push out everything else: built for its readers alone
        self._items[key] = (item, size)
        self.bytes += size
        while self.bytes > self.max_bytes:
            self.bytes -= self._items.popitem(last=False)[1][1]
