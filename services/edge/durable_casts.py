"""Casts as read-only durable streams [R:ds-casts]:

- ``/v1/stream/casts/<id>``: the cast's playable MP3 (``audio/mpeg``), the same bytes as
  ``/api/casts/<id>/audio.mp3``; an offset is a byte position in it, so a resume from any offset
  gets exactly the rest of that file (a rewritten tail or an archived log included);
- ``/v1/stream/casts/<id>/records``: its log as a JSON-mode stream of records (seq, kind, ts,
  headers; no bodies); an offset is the entry id of the next record's predecessor.

Both are closed when the log ends in a terminal record. Catch-up, long-poll and SSE as the
general streams (``durable.py``); a waiting reader listens on edge's shared tail, like every
other listener of a cast. Writes are refused (intake answers 405).
"""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

from aiohttp import web

from castlog import Layout, public_dict
from durablestreams import protocol as ds
from durablestreams.streams import entry_of, id_key, offset_of
from servicekit import encode_json, sse

from .context import CONFIG, EDGE, Edge, known_cast
from .params import cast_id_from

AUDIO = "audio/mpeg"
RECORDS = "application/json"


def add_routes(router: web.UrlDispatcher) -> None:
    """Before the general stream route, which would take these paths too."""
    router.add_get(ds.PREFIX + ds.CASTS + "/{id}", audio)
    router.add_get(ds.PREFIX + ds.CASTS + "/{id}/records", records)


@dataclass
class Got:
    """What one read found: data events' payloads, the position after them, and the state."""

    items: list[bytes]
    end: int
    complete: bool
    closed: bool


@dataclass
class CastSource:
    """A cast read as a stream of bytes (audio) or of records; positions are ints."""

    edge: Edge
    cast_id: str
    layout: Layout
    records: bool
    max_bytes: int

    @property
    def content_type(self) -> str:
        return RECORDS if self.records else AUDIO

    def position(self, offset: str | None) -> int:
        if offset in (None, "-1"):
            return 0
        if offset == "now":
            return self.tail
        entry = entry_of(offset or "")
        assert entry is not None
        return id_key(entry)[1]

    def offset(self, position: int) -> str:
        """Bytes: ``0-<byte>``; records: ``0-<next seq>``, the entry id of the last record read."""
        return offset_of(f"0-{position}")

    @property
    def tail(self) -> int:
        return self.layout.tail if self.records else self.layout.total_bytes

    async def refresh(self) -> None:
        self.layout = await self.edge.layouts.get(self.cast_id)

    async def read(self, position: int) -> Got:
        return await (self._records(position) if self.records else self._audio(position))

    async def _audio(self, position: int) -> Got:
        layout = self.layout
        total = layout.total_bytes
        first = min(position, total)
        end = first
        for chunk in layout.chunks:  # whole chunks up to about max_bytes
            if chunk.start + chunk.size > first:
                end = chunk.start + chunk.size
                if end - first >= self.max_bytes:
                    break
        items = [piece async for piece in self._bytes(first, end)] if end > first else []
        complete = end >= total
        return Got(items, end, complete, layout.closed and complete)

    async def _bytes(self, first: int, end: int) -> AsyncIterator[bytes]:
        layout = self.layout
        if layout.blob is not None:  # archived: the blob's prefix is the playable MP3
            async for piece in self.edge.reader.stream(self.cast_id, layout.blob, first, end):
                yield piece
            return
        wanted = [c for c in layout.chunks if c.start < end and c.start + c.size > first]
        async for chunk, body in self.edge.reader.bodies(self.cast_id, wanted):
            yield body[max(first - chunk.start, 0):min(end - chunk.start, chunk.size)]

    async def _records(self, position: int) -> Got:
        page = await self.edge.reader.page(self.cast_id, position, self.edge.cfg.max_records_limit)
        items = []
        for entry in page.entries:
            message = public_dict(entry)
            message.pop("body", None)
            items.append(encode_json(message))
        end = page.next_seq
        complete = end >= page.tail
        return Got(items, end, complete, complete and self.layout.closed and page.tail <= self.layout.tail)

    def body(self, got: Got) -> bytes:
        return b"[" + b",".join(got.items) + b"]" if self.records else b"".join(got.items)

    def event(self, got: Got) -> bytes:
        body = self.body(got)
        return ds.sse_event("data", body if self.records else base64.b64encode(body))

    async def wait(self, seconds: float) -> None:
        """Until the log has a record past the one last seen (or ``seconds``): edge's shared tail."""
        async with self.edge.tail.listen(self.cast_id, self.layout.tail, "ds") as listener:
            await listener.next(seconds)


async def audio(request: web.Request) -> web.StreamResponse:
    return await _serve(request, records=False)


async def records(request: web.Request) -> web.StreamResponse:
    return await _serve(request, records=True)


async def _serve(request: web.Request, records: bool) -> web.StreamResponse:
    offset = ds.read_offset(request)
    mode = request.query.get("live")  # the protocol's live mode: long-poll or sse
    if mode in ("long-poll", "sse") and offset is None:
        raise ds.bad(f"live={mode} needs an offset")
    cast_id = cast_id_from(request)
    known = await known_cast(request, cast_id)
    edge, layout = known.edge, known.layout
    cfg = request.app[CONFIG]
    source = CastSource(edge, cast_id, layout, records, cfg.ds_read_max_bytes)
    if request.method == "HEAD":
        return web.Response(headers=_state_headers(source, source.tail, closed=layout.closed, cache="no-store"))
    position = source.position(offset)
    if mode == "sse":
        async with known.read_pass.stream_seat():
            return await _sse(request, source, position)
    got = await source.read(position)
    if mode == "long-poll" and not got.items:
        if not got.closed:
            async with known.read_pass.stream_seat():
                got = await _long_poll(request, source, position)
        if not got.items:
            return ds.timed_out(request, source.offset(got.end), got.closed)
    headers = _state_headers(source, got.end, closed=got.closed)
    if got.complete:
        headers[ds.UP_TO_DATE] = "true"
    if not got.closed:
        headers[ds.CURSOR] = ds.cursor_after(request.query.get("cursor"))
    name = ds.CASTS + "/" + cast_id + ("/records" if records else "")
    tag = ds.etag(name, offset or "-1", source.offset(got.end), got.closed)
    headers["ETag"] = tag
    if request.headers.get("If-None-Match") == tag:
        return web.Response(status=304, headers={"ETag": tag})
    return web.Response(headers=headers, body=source.body(got))


def _state_headers(source: CastSource, end: int, *, closed: bool, cache: str | None = None) -> dict[str, str]:
    headers = {"Content-Type": source.content_type, ds.NEXT_OFFSET: source.offset(end)}
    if closed:
        headers[ds.CLOSED] = "true"
    if cache:
        headers["Cache-Control"] = cache
    return headers


async def _long_poll(request: web.Request, source: CastSource, position: int) -> Got:
    deadline = time.monotonic() + request.app[CONFIG].ds_long_poll_s
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return await source.read(position)
        await source.wait(remaining)
        await source.refresh()
        got = await source.read(position)
        if got.items or got.closed:
            return got


async def _sse(request: web.Request, source: CastSource, position: int) -> web.StreamResponse:
    """Each read as one data event (base64 for the audio) and its control event; ends at EOF."""
    cfg = request.app[CONFIG]
    response = web.StreamResponse(status=200, headers=sse.HEADERS)
    if not source.records:
        response.headers[ds.SSE_ENCODING] = "base64"
    await response.prepare(request)
    ends = time.monotonic() + cfg.ds_sse_max_s
    cursor = request.query.get("cursor")
    while not request.app[EDGE].tail.closing:
        got = await source.read(position)
        out = [source.event(got)] if got.items else []
        position = got.end
        out.append(ds.control_event(source.offset(position), cursor, at_tail=got.complete, closed=got.closed))
        await asyncio.wait_for(response.write(b"".join(out)), cfg.write_timeout_s)
        remaining = ends - time.monotonic()
        if got.closed or remaining <= 0:
            break
        if got.complete:
            await source.wait(min(remaining, cfg.sse_heartbeat_s))
        await source.refresh()
    await response.write_eof()
    return response
