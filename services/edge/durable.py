"""The read side of the Durable Streams protocol under ``/v1/stream/<path>``: HEAD, catch-up
reads, long-poll and SSE. Parse, call ``durablestreams``, answer; writes are intake's. A stream
is a ``Source``: a general one here, a cast's (``durable_casts.py``); one reader (:func:`serve`)
answers for both.

Every waiting reader (a long-poll at the tail, an SSE stream between events) waits on edge's one
shared tail (``fanout.Tail.waiters``; a cast's as a listener); at most ``EDGE_DS_MAX_WAITERS`` at
once, casts' included (503 beyond). The tail's graceful stop wakes them: each answers what there
is and ends.
"""

from __future__ import annotations

import asyncio
import base64
import time
from dataclasses import dataclass

from aiohttp import web

from castlog.keys import id_order
from durablestreams import protocol as ds
from durablestreams.streams import ZERO_ID, Meta, Slice, entry_of, is_json, normal_type, offset_of
from servicekit import Refusal, sse
from servicekit.keys import bearer_key

from .context import CONFIG, EDGE, Edge, known_cast
from .durable_casts import CastSource
from .params import cast_id_from
from .streaming import write_within


def setup(app: web.Application) -> None:
    """Routes (the casts' first: the general route would take their paths too) and the protocol's
    security headers."""
    app.on_response_prepare.append(ds.secure)
    app.router.add_get(ds.PREFIX + ds.CASTS + "/{id}", read_cast)  # HEAD too, as every GET here
    app.router.add_get(ds.PREFIX + ds.CASTS + "/{id}/records", read_cast)
    app.router.add_get(ds.ROUTE, read)
    app.router.add_route("OPTIONS", ds.ROUTE, ds.preflight)


@dataclass
class StreamSource:
    """A general stream, as its meta last said."""

    edge: Edge
    meta: Meta
    max_bytes: int

    @property
    def name(self) -> str:
        return self.meta.path

    @property
    def content_type(self) -> str:
        return self.meta.content_type

    @property
    def tail(self) -> str:
        return self.meta.tail

    @property
    def closed(self) -> bool:
        return self.meta.closed

    def lifetime(self) -> dict[str, str]:
        headers = {}
        if self.meta.ttl is not None:
            headers[ds.TTL] = str(self.meta.ttl)
        if self.meta.expires_at is not None:
            headers[ds.EXPIRES_AT] = self.meta.expires_at
        return headers

    async def read(self, after: str) -> Slice:
        return await self.edge.durable.read(self.meta, after, self.max_bytes)

    async def wait(self, after: str, seconds: float) -> None:
        """On the stream's own log past ``after`` (or its tail): edge's shared tail's waiters."""
        await self.edge.tail.waiters.wait(self.meta.log, max(after, self.meta.tail, key=id_order), seconds)

    async def refresh(self) -> None:
        self.meta = await _opened(self.edge, self.meta.path, touch=True)


# A stream as the reader sees it; positions are entry ids (a cast's: ``0-<n>``).
Source = StreamSource | CastSource


async def _opened(edge: Edge, path: str, touch: bool) -> Meta:
    found = await edge.durable.open(path, touch=touch)
    if found.meta is None:
        raise ds.gone() if found.status == "gone" else ds.missing()
    return found.meta


async def read(request: web.Request) -> web.StreamResponse:
    """GET and HEAD of a general stream, after the client's key where keys are set
    [R:ds-read-keys] and its read token (the same buckets as casts' reads); a HEAD does not slide
    the TTL [R:ds-head]."""
    path = ds.stream_path(request)
    offset, mode = ds.read_query(request)
    edge, cfg = request.app[EDGE], request.app[CONFIG]
    if cfg.api_keys and not bearer_key(request, cfg.api_keys):
        raise Refusal(401, "invalid_api_key", "reading a stream wants a key of STREAMTTS_API_KEYS as "
                                              "Authorization: Bearer <key> (casts' streams are public)")
    client = await edge.guard.take_read(request)
    meta = await _opened(edge, path, touch=request.method != "HEAD")
    after = entry_of(offset or "")
    if after is not None and id_order(after) > id_order(meta.tail):  # no offset it sent: a long-poll waits for ever
        raise ds.bad("offset is past the stream's tail: read from -1, now, or a Stream-Next-Offset of this "
                     "stream (a stream deleted and created again starts anew)")  # [R:ds-catch-up]
    return await serve(request, StreamSource(edge, meta, cfg.ds_read_max_bytes), client, offset, mode)


async def read_cast(request: web.Request) -> web.StreamResponse:
    """GET and HEAD of a cast's audio or records (a cast id holds no ``/``)."""
    offset, mode = ds.read_query(request)
    cast_id = cast_id_from(request)
    known = await known_cast(request, cast_id)
    records = request.path.endswith("/records")
    source = CastSource(known.edge, cast_id, known.layout, records, request.app[CONFIG].ds_read_max_bytes)
    return await serve(request, source, known.client, offset, mode)


async def serve(
    request: web.Request, source: Source, client: str, offset: str | None, mode: str | None
) -> web.StreamResponse:
    """HEAD, catch-up [R:ds-catch-up], ``live=long-poll`` [R:ds-long-poll], ``live=sse`` [R:ds-sse]."""
    tail = offset_of(source.tail)
    state = {**ds.state_headers(source.content_type, tail, source.closed), "Cache-Control": "no-store"}  # as it is now
    if request.method == "HEAD":
        etag = ds.etag(source.name, "-1", tail, source.closed)
        return web.Response(status=200, headers={**state, **source.lifetime(), "ETag": etag})
    after = ZERO_ID if offset in (None, "-1") else source.tail if offset == "now" else entry_of(offset or "")
    assert after is not None
    if mode == "sse":
        return await _sse(request, client, source, after)
    if offset == "now" and mode != "long-poll":
        body = b"[]" if is_json(source.content_type) else b""
        return web.Response(status=200, headers={**state, ds.UP_TO_DATE: "true"}, body=body)
    got = await source.read(after)
    if mode == "long-poll" and not got.entries:
        if not got.closed:
            got = await _long_poll(request, client, source, after, got)
        if not got.entries:
            return ds.timed_out(request, offset_of(got.end), got.closed)
    return _catch_up(request, source, got, offset or "-1", mode == "long-poll")


async def _long_poll(request: web.Request, client: str, source: Source, after: str, got: Slice) -> Slice:
    """Wait for the stream's own next entry; none until the deadline (or a close, or edge's stop):
    the last read, empty."""
    deadline = time.monotonic() + request.app[CONFIG].ds_long_poll_s
    tail = request.app[EDGE].tail
    async with _permit(request), source.edge.guard.hold_seat(client):
        while not tail.closing:  # a stopping edge answers what there is
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            await source.wait(after, remaining)
            await source.refresh()
            got = await source.read(after)
            if got.entries or got.closed:
                break
    return got


def _permit(request: web.Request) -> asyncio.Semaphore:
    """The waiters' semaphore, once it is sure to have room (a waiter never queues)."""
    waiters = request.app[EDGE].ds_waiters
    if waiters.locked():
        raise Refusal(503, "busy", "too many readers wait on this edge; retry shortly", {"Retry-After": "1"})
    return waiters


def _catch_up(request: web.Request, source: Source, got: Slice, start: str, long_poll: bool) -> web.Response:
    headers = ds.state_headers(source.content_type, offset_of(got.end), got.closed)
    if got.complete:
        headers[ds.UP_TO_DATE] = "true"
    if long_poll or not got.closed:
        headers[ds.CURSOR] = ds.cursor_after(request.query.get("cursor"))
    tag = ds.etag(source.name, start, offset_of(got.end), got.closed)
    headers["ETag"] = tag
    if request.headers.get("If-None-Match") == tag:
        return web.Response(status=304, headers={"ETag": tag})
    if is_json(source.content_type):
        body = b"[" + b",".join(data for _, data in got.entries) + b"]"
    else:
        body = b"".join(data for _, data in got.entries)
    return web.Response(status=200, headers=headers, body=body)


def _data_event(data: bytes, json: bool, binary: bool) -> bytes:
    if binary:
        return ds.sse_event("data", base64.b64encode(data))
    if json:
        return ds.sse_event("data", b"[" + data + b"]")  # stored as UTF-8 (``json_entry``)
    return ds.sse_event("data", data.decode("utf-8", errors="replace").encode())  # SSE is UTF-8


async def _sse(request: web.Request, client: str, source: Source, after: str) -> web.StreamResponse:
    """Data events, each followed by a control event; closed at EOF, after EDGE_DS_SSE_MAX_S, or
    when edge stops; text and JSON as text, anything else as base64 [R:ds-sse]."""
    json = is_json(source.content_type)
    binary = not (normal_type(source.content_type).startswith("text/") or json)
    response = web.StreamResponse(status=200, headers=sse.HEADERS)
    if binary:
        response.headers[ds.SSE_ENCODING] = "base64"
    cfg = request.app[CONFIG]
    ends = time.monotonic() + cfg.ds_sse_max_s
    cursor = request.query.get("cursor")
    async with _permit(request), source.edge.guard.hold_seat(client):
        await response.prepare(request)
        while not request.app[EDGE].tail.closing:
            got = await source.read(after)
            out: list[bytes] = []
            for n, (entry, data) in enumerate(got.entries):  # a control event after every data event
                out.append(_data_event(data, json, binary))
                at_tail = got.complete and n == len(got.entries) - 1
                out.append(ds.control_event(offset_of(entry), cursor, at_tail=at_tail, closed=got.closed))
            if not got.entries:
                out.append(ds.control_event(offset_of(got.end), cursor, at_tail=got.complete, closed=got.closed))
            await write_within(request, response, b"".join(out), cfg.write_timeout_s)
            remaining = ends - time.monotonic()
            if got.closed or remaining <= 0:
                break
            after = got.end
            if got.complete:
                await source.wait(after, min(remaining, cfg.sse_heartbeat_s))
            try:
                await source.refresh()
            except Refusal:  # deleted or lapsed meanwhile: its readers' streams end
                break
    await response.write_eof()
    return response
