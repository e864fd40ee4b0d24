"""The read side of the Durable Streams protocol under ``/v1/stream/<path>``: HEAD, catch-up
reads, long-poll and SSE. Parse, call ``durablestreams``, answer; writes are intake's.

Every waiting reader (a long-poll at the tail, an SSE stream between events) waits on edge's one
shared tail (``fanout.Tail.waiters``), as the casts' listeners do; at most ``EDGE_DS_MAX_WAITERS``
at once (503 beyond). The tail's graceful stop wakes them: each answers what there is and ends.
"""

from __future__ import annotations

import asyncio
import base64
import time

from aiohttp import web

from durablestreams import protocol as ds
from durablestreams.streams import ZERO_ID, Meta, Slice, entry_of, id_key, normal_type, offset_of, served_type
from servicekit import Refusal, sse
from servicekit.keys import bearer_key

from . import durable_casts
from .context import CONFIG, EDGE
from .guards import Pass


def setup(app: web.Application) -> None:
    """Routes (casts' first) and the protocol's security headers."""
    app.on_response_prepare.append(ds.secure)
    durable_casts.add_routes(app.router)
    app.router.add_get(ds.ROUTE, read, allow_head=False)
    app.router.add_head(ds.ROUTE, head)
    app.router.add_route("OPTIONS", ds.ROUTE, ds.preflight)


async def _open(request: web.Request, path: str, touch: bool) -> tuple[Meta, Pass]:
    """The stream's meta, after the client's key where keys are set [R:ds-read-keys] and its
    read token (the same buckets as casts' reads)."""
    keys = request.app[CONFIG].api_keys
    if keys and not bearer_key(request, keys):
        raise Refusal(401, "invalid_api_key", "reading a stream wants a key of STREAMTTS_API_KEYS as "
                                              "Authorization: Bearer <key> (casts' streams are public)")
    read_pass = await request.app[EDGE].guard.take_read(request)
    found = await request.app[EDGE].durable.open(path, touch=touch)
    if found.meta is None:
        raise ds.gone() if found.status == "gone" else ds.missing()
    return found.meta, read_pass


def _meta_headers(meta: Meta) -> dict[str, str]:
    headers = {"Content-Type": served_type(meta.content_type), ds.NEXT_OFFSET: meta.tail_offset}
    if meta.closed:
        headers[ds.CLOSED] = "true"
    return headers


async def head(request: web.Request) -> web.Response:
    """Metadata only; a HEAD does not slide the TTL [R:ds-head]."""
    meta, _ = await _open(request, ds.stream_path(request), touch=False)
    headers = _meta_headers(meta)
    headers["Cache-Control"] = "no-store"
    if meta.ttl is not None:
        headers[ds.TTL] = str(meta.ttl)
    if meta.expires_at is not None:
        headers[ds.EXPIRES_AT] = meta.expires_at
    headers["ETag"] = ds.etag(meta.path, "-1", meta.tail_offset, meta.closed)
    return web.Response(status=200, headers=headers)


async def read(request: web.Request) -> web.StreamResponse:
    """GET: catch-up [R:ds-catch-up], ``live=long-poll`` [R:ds-long-poll], ``live=sse`` [R:ds-sse]."""
    path = ds.stream_path(request)
    offset = ds.read_offset(request)
    mode = request.query.get("live")  # the protocol's live mode: long-poll or sse
    if mode in ("long-poll", "sse") and offset is None:
        raise ds.bad(f"live={mode} needs an offset")
    meta, read_pass = await _open(request, path, touch=True)
    after = ZERO_ID if offset in (None, "-1") else meta.tail if offset == "now" else entry_of(offset or "")
    assert after is not None
    if id_key(after) > id_key(meta.tail):  # no offset this stream sent: a long-poll would wait for ever
        raise ds.bad("offset is past the stream's tail: read from -1, now, or a Stream-Next-Offset of this "
                     "stream (a stream deleted and created again starts anew)")  # [R:ds-catch-up]
    if mode == "sse":
        return await _sse(request, read_pass, meta, after)
    if offset == "now" and mode != "long-poll":
        headers = _meta_headers(meta)
        headers.update({ds.UP_TO_DATE: "true", "Cache-Control": "no-store"})
        return web.Response(status=200, headers=headers, body=b"[]" if meta.json else b"")
    got = await request.app[EDGE].durable.read(meta, after, request.app[CONFIG].ds_read_max_bytes)
    if mode == "long-poll" and not got.entries:
        meta, got = await _long_poll(request, read_pass, meta, after)
        if not got.entries:
            return ds.timed_out(request, meta.tail_offset, meta.closed)
    return _catch_up(request, meta, got, offset or "-1", mode == "long-poll")


async def _long_poll(request: web.Request, read_pass: Pass, meta: Meta, after: str) -> tuple[Meta, Slice]:
    """Wait for the stream's own next entry; none until the deadline (or a close): empty slice."""
    cfg = request.app[CONFIG]
    deadline = time.monotonic() + cfg.ds_long_poll_s
    empty = Slice([], complete=True)
    tail = request.app[EDGE].tail
    async with _permit(request), read_pass.stream_seat():
        while not meta.closed and not tail.closing:  # a stopping edge answers what there is
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            await _wait(request, meta, after, remaining)
            found = await request.app[EDGE].durable.open(meta.path, touch=True)
            if found.meta is None:
                raise ds.gone() if found.status == "gone" else ds.missing()
            meta = found.meta
            got = await request.app[EDGE].durable.read(meta, after, cfg.ds_read_max_bytes)
            if got.entries:
                return meta, got
    return meta, empty


def _permit(request: web.Request) -> asyncio.Semaphore:
    """The waiters' semaphore, once it is sure to have room (a waiter never queues)."""
    waiters = request.app[EDGE].ds_waiters
    if waiters.locked():
        raise Refusal(503, "busy", "too many readers wait on this edge; retry shortly", {"Retry-After": "1"})
    return waiters


async def _wait(request: web.Request, meta: Meta, after: str, seconds: float) -> bool:
    """Block on the stream's own log past ``after`` (or its tail), at most ``seconds``."""
    since = max(after, meta.tail, key=id_key)
    return await request.app[EDGE].tail.waiters.wait(meta.log, since, seconds)


def _catch_up(request: web.Request, meta: Meta, got: Slice, start: str, long_poll: bool) -> web.Response:
    end = offset_of(got.entries[-1][0]) if got.entries else meta.tail_offset
    closed = meta.closed and got.complete and end == meta.tail_offset
    headers = {"Content-Type": served_type(meta.content_type), ds.NEXT_OFFSET: end}
    if got.complete:
        headers[ds.UP_TO_DATE] = "true"
    if closed:
        headers[ds.CLOSED] = "true"
    if long_poll or not closed:
        headers[ds.CURSOR] = ds.cursor_after(request.query.get("cursor"))
    tag = ds.etag(meta.path, start, end, closed)
    headers["ETag"] = tag
    if request.headers.get("If-None-Match") == tag:
        return web.Response(status=304, headers={"ETag": tag})
    return web.Response(status=200, headers=headers, body=_body(meta, got))


def _body(meta: Meta, got: Slice) -> bytes:
    if meta.json:
        return b"[" + b",".join(data for _, data in got.entries) + b"]"
    return b"".join(data for _, data in got.entries)


def _data_event(meta: Meta, data: bytes, binary: bool) -> bytes:
    if binary:
        return ds.sse_event("data", base64.b64encode(data))
    if meta.json:
        return ds.sse_event("data", b"[" + data + b"]")  # stored as UTF-8 (``json_entry``)
    return ds.sse_event("data", data.decode("utf-8", errors="replace").encode())  # SSE is UTF-8


async def _sse(request: web.Request, read_pass: Pass, meta: Meta, after: str) -> web.StreamResponse:
    """Data events, each followed by a control event; closed at EOF, after EDGE_DS_SSE_MAX_S, or
    when edge stops; text and JSON as text, anything else as base64 [R:ds-sse]."""
    binary = not (normal_type(meta.content_type).startswith("text/") or meta.json)
    response = web.StreamResponse(status=200, headers=sse.HEADERS)
    if binary:
        response.headers[ds.SSE_ENCODING] = "base64"
    async with _permit(request), read_pass.stream_seat():
        await response.prepare(request)
        await _events(request, response, meta, after, binary)
    await response.write_eof()
    return response


async def _events(
    request: web.Request, response: web.StreamResponse, meta: Meta, after: str, binary: bool
) -> None:
    cfg = request.app[CONFIG]
    streams, tail = request.app[EDGE].durable, request.app[EDGE].tail
    ends = time.monotonic() + cfg.ds_sse_max_s
    cursor = request.query.get("cursor")
    while not tail.closing:
        got = await streams.read(meta, after, cfg.ds_read_max_bytes)
        out: list[bytes] = []
        at_tail = got.complete
        for n, (entry, data) in enumerate(got.entries):  # a control event after every data event
            last = n == len(got.entries) - 1
            after = entry
            out.append(_data_event(meta, data, binary))
            out.append(ds.control_event(offset_of(entry), cursor, at_tail=at_tail and last, closed=meta.closed))
        if not got.entries:
            out.append(ds.control_event(meta.tail_offset, cursor, at_tail=at_tail, closed=meta.closed))
        closed = meta.closed and at_tail
        await asyncio.wait_for(response.write(b"".join(out)), cfg.write_timeout_s)
        if closed:
            break
        remaining = ends - time.monotonic()
        if remaining <= 0:
            break
        if at_tail:
            after = max(after, meta.tail, key=id_key)
            await _wait(request, meta, after, min(remaining, cfg.sse_heartbeat_s))
        found = await streams.open(meta.path, touch=True)
        if found.meta is None:
            break
        meta = found.meta
