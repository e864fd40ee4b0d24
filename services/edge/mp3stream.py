"""``GET /api/casts/{id}/audio.mp3``: the playable audio as one MP3 stream.

Every audio body is a standalone MP3 chunk (24 kHz mono, same bitrate), so the bodies
concatenate into one valid stream.

- A closed cast (last record ``eos`` or ``error``): exactly ``castlog.playable``, with a
  Content-Length and byte ranges (206), so seeking in an ``<audio>`` tag works.
- A cast still being made: chunked, no length. First the playable audio of the log as it is,
  then what the tail brings until the terminal record. The rule while following: each sentence index
  is sent at most once and in increasing order; a later attempt whose ``resume_from`` is at or
  below what was already sent continues the stream at the first index not yet sent (bytes on
  the wire cannot be taken back, and the rewritten sentences say the same text).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

from aiohttp import web

from castlog import Audio, Layout
from servicekit import Refusal

from .context import Edge, known_cast
from .params import cast_id_from
from .streaming import cut_short, observe, write_within

CONTENT_TYPE = "audio/mpeg"
# A finished cast never changes: let browsers and proxies keep it.
FINISHED_CACHE = "public, max-age=86400, immutable"
_RANGE = re.compile(r"bytes=(\d*)-(\d*)")
# Digits of a byte position worth reading: more is past any audio (and Python refuses to parse
# a few thousand digits: that was a 500).
MAX_POSITION_DIGITS = 18


def parse_range(header: str, total: int) -> tuple[int, int] | None:
    """``(first, last)`` inclusive for one ``bytes=`` range, None to send everything (no header,
    or several ranges: RFC 9110 lets a server ignore those). 416 when it cannot be satisfied."""
    match = _RANGE.fullmatch(header.strip())
    if not header or match is None:
        return None
    first_s, last_s = match.groups()
    if not first_s and not last_s:
        return None
    if len(first_s) > MAX_POSITION_DIGITS:
        raise _unsatisfiable(total)
    if len(last_s) > MAX_POSITION_DIGITS:  # past any audio: to the end (as a suffix: all of it)
        last_s = str(total)
    if not first_s:  # a suffix: the last N bytes
        first, last = max(0, total - int(last_s)), total - 1
    else:
        first = int(first_s)
        last = min(int(last_s), total - 1) if last_s else total - 1
    if first > last or first >= total:
        raise _unsatisfiable(total)
    return first, last


def _unsatisfiable(total: int) -> Refusal:
    return Refusal(416, "range_not_satisfiable", f"the audio has {total} bytes",
                   headers={"Content-Range": f"bytes */{total}"})


async def audio(request: web.Request) -> web.StreamResponse:
    cast_id = cast_id_from(request)
    known = await known_cast(request, cast_id)
    edge, layout = known.edge, known.layout
    # a finished cast's download holds a seat too: one client's parallel downloads are bounded
    async with edge.guard.hold_seat(known.client):
        if layout.closed:
            return await _send_closed(request, edge, cast_id, layout)
        return await _send_growing(request, edge, cast_id, layout)


async def _send_closed(request: web.Request, edge: Edge, cast_id: str, layout: Layout) -> web.StreamResponse:
    total = layout.total_bytes
    span = parse_range(request.headers.get("Range", ""), total)
    first, last = span if span is not None else (0, total - 1)
    resp = web.StreamResponse(status=206 if span is not None else 200)
    resp.content_type = CONTENT_TYPE
    resp.headers["Accept-Ranges"] = "bytes"
    resp.headers["Cache-Control"] = FINISHED_CACHE if layout.finished else "no-cache"
    resp.headers["ETag"] = f'"{cast_id}-{layout.tail}"'
    if span is not None:
        resp.headers["Content-Range"] = f"bytes {first}-{last}/{total}"
    resp.content_length = max(0, last - first + 1)
    await resp.prepare(request)
    if request.method == "HEAD" or total == 0:
        return resp
    with cut_short("audio", cast_id):  # a short body tells the client to retry
        async for piece in audio_bytes(edge, cast_id, layout, first, last + 1):
            await write_within(request, resp, piece, edge.cfg.write_timeout_s)
        await resp.write_eof()
    return resp


async def audio_bytes(edge: Edge, cast_id: str, layout: Layout, first: int, end: int) -> AsyncIterator[bytes]:
    """Bytes ``first`` up to ``end`` of a cast's playable audio: straight from the archived blob
    (its playable prefix is the whole MP3), else body by body from the log."""
    if layout.blob is not None:
        async for piece in edge.reader.stream(cast_id, layout.blob, first, end):
            yield piece
        return
    wanted = [c for c in layout.chunks if c.start < end and c.start + c.size > first]
    async for chunk, body in edge.reader.bodies(cast_id, wanted):
        yield body[max(first - chunk.start, 0):min(end - chunk.start, chunk.size)]


async def _send_growing(request: web.Request, edge: Edge, cast_id: str, layout: Layout) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
    resp.content_type = CONTENT_TYPE
    resp.headers["Accept-Ranges"] = "none"
    resp.enable_chunked_encoding()
    await resp.prepare(request)
    if request.method == "HEAD":
        return resp
    timeout = edge.cfg.write_timeout_s
    sent = -1  # the highest sentence index on the wire
    with cut_short("growing audio", cast_id):
        async for chunk, body in edge.reader.bodies(cast_id, layout.chunks):
            await write_within(request, resp, body, timeout)
            edge.metrics.delivered.inc()
            sent = chunk.i
        async with edge.tail.listen(cast_id, layout.tail, "mp3") as listener:
            while not listener.done:
                item = await listener.next(edge.cfg.sse_heartbeat_s)
                if item is None:
                    if request.transport is None or request.transport.is_closing():
                        return resp  # gone while the cast was quiet
                    continue
                record = item.entry.record
                if isinstance(record, Audio) and record.i > sent:
                    await write_within(request, resp, record.body, timeout)
                    observe(edge.metrics, [item])
                    sent = record.i
        await resp.write_eof()
    return resp
