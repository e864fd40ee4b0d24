"""Casts as read-only durable streams [R:ds-casts]:

- ``/v1/stream/casts/<id>``: the cast's playable MP3 (``audio/mpeg``), the same bytes as
  ``/api/casts/<id>/audio.mp3``; an offset is a byte position in it, so a resume from any offset
  gets exactly the rest of that file (a rewritten tail or an archived log included);
- ``/v1/stream/casts/<id>/records``: its log as a JSON-mode stream of records (seq, kind, ts,
  headers; no bodies); an offset is the entry id of the next record's predecessor.

Both are closed when the log ends in a terminal record. Their routes, catch-up, long-poll and SSE
are the general streams' (``durable.py``); a waiting reader listens on edge's shared tail, like
every other listener of a cast. Writes are refused (intake answers 405).
"""

from __future__ import annotations

from dataclasses import dataclass

from castlog import Layout, public_dict
from castlog.keys import id_order
from durablestreams import protocol as ds
from durablestreams.streams import Slice
from servicekit import encode_json

from .context import Edge
from .mp3stream import audio_bytes

AUDIO = "audio/mpeg"
RECORDS = "application/json"


@dataclass
class CastSource:
    """A cast read as a stream of bytes (audio) or of records: entry id ``0-<n>`` is its n-th
    byte or record; one read is one data event (``durable.Source``)."""

    edge: Edge
    cast_id: str
    layout: Layout
    records: bool
    max_bytes: int

    @property
    def name(self) -> str:
        return ds.CASTS + "/" + self.cast_id + ("/records" if self.records else "")

    @property
    def content_type(self) -> str:
        return RECORDS if self.records else AUDIO

    @property
    def tail(self) -> str:
        return f"0-{self.layout.tail if self.records else self.layout.total_bytes}"

    @property
    def closed(self) -> bool:
        return self.layout.closed

    def lifetime(self) -> dict[str, str]:
        return {}  # a cast's lifetime is its retention's, not the protocol's

    async def refresh(self) -> None:
        self.layout = await self.edge.layouts.get(self.cast_id)

    async def read(self, after: str) -> Slice:
        position = id_order(after)[1]
        return await (self._records(position) if self.records else self._audio(position))

    async def _audio(self, position: int) -> Slice:
        layout = self.layout
        total = layout.total_bytes
        first = min(position, total)
        end = first
        for chunk in layout.chunks:  # whole chunks up to about max_bytes
            if chunk.start + chunk.size > first:
                end = chunk.start + chunk.size
                if end - first >= self.max_bytes:
                    break
        body = b""
        if end > first:
            body = b"".join([piece async for piece in audio_bytes(self.edge, self.cast_id, layout, first, end)])
        complete = end >= total
        return _slice(body, end, complete, layout.closed and complete)

    async def _records(self, position: int) -> Slice:
        page = await self.edge.reader.page(self.cast_id, position, self.edge.cfg.max_records_limit)
        items = []
        for entry in page.entries:
            message = public_dict(entry)
            message.pop("body", None)
            items.append(encode_json(message))
        end = page.next_seq
        complete = end >= page.tail
        return _slice(b",".join(items), end, complete, complete and self.layout.closed and page.tail <= self.layout.tail)

    async def wait(self, after: str, seconds: float) -> None:
        """Until the log has a record past the one last seen (or ``seconds``): edge's shared tail."""
        async with self.edge.tail.listen(self.cast_id, self.layout.tail, "ds") as listener:
            await listener.next(seconds)


def _slice(body: bytes, end: int, complete: bool, closed: bool) -> Slice:
    """A read's bytes as one entry, at its end (JSON: the records' messages, comma-separated)."""
    return Slice([(f"0-{end}", body)] if body else [], f"0-{end}", complete, closed)
