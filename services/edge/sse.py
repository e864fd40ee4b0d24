"""``GET /api/casts/{id}/events``: the cast as Server-Sent Events, replayed then live.

``id:`` is the seq_num, ``event:`` the kind, ``data:`` the public JSON of the record. A client
resumes with ``Last-Event-ID`` (what EventSource sends on reconnect) or ``?seq_num=N``. The
response ends after the log's terminal record; asking past the end of a finished log answers
204, which tells EventSource to stop reconnecting.
"""

from __future__ import annotations

from aiohttp import web

from castlog import MAX_SEQ_NUM, is_terminal

from .context import EDGE, Edge
from .errors import bad_request, not_found
from .limits import cast_id_from, int_param
from .streaming import cut_short, observe, write_within

# EventSource's reconnect delay after a dropped stream (the edge restarting, a proxy timeout).
RETRY_MS = 2_000
HEARTBEAT = b": heartbeat\n\n"
GOODBYE = b": edge stopping; reconnect with Last-Event-ID to resume\n\n"
SSE_HEADERS = {
    "Content-Type": "text/event-stream; charset=utf-8",
    "Cache-Control": "no-cache",
    "X-Accel-Buffering": "no",  # nginx and friends: pass each event through at once
}
# Records joined into one write when a listener finds several waiting.
WRITE_BATCH = 16
# The longest Last-Event-ID taken: any such number + 1 is a valid seq_num (below MAX_SEQ_NUM).
LAST_EVENT_ID_DIGITS = 18


def start_seq(request: web.Request) -> int:
    """Where to start: after ``Last-Event-ID`` if the client sent one, else ``seq_num`` (0)."""
    last_id = request.headers.get("Last-Event-ID", "").strip()
    if last_id:
        # ASCII digits only: str.isdigit() also takes "²", which int() refuses
        if not (last_id.isascii() and last_id.isdigit()) or len(last_id) > LAST_EVENT_ID_DIGITS:
            raise bad_request("Last-Event-ID must be the seq_num of the last event received")
        return int(last_id) + 1
    return int_param(request, "seq_num", 0, 0, MAX_SEQ_NUM)


async def events(request: web.Request) -> web.StreamResponse:
    cast_id = cast_id_from(request)
    start = start_seq(request)
    edge = request.app[EDGE]
    await edge.guard.take(request)
    async with edge.guard.stream_slot(request):
        last = await edge.reader.last(cast_id)
        if last is None:
            raise not_found("no such cast")
        edge.played.mark(cast_id)  # for retention
        if is_terminal(last.record) and start > last.seq_num:
            return web.Response(status=204)  # nothing will ever come: EventSource stops here
        if request.method == "HEAD":
            return web.Response(headers=SSE_HEADERS)
        resp = web.StreamResponse(headers=SSE_HEADERS)
        await resp.prepare(request)
        with cut_short("SSE stream", cast_id):
            await resp.write(b"retry: %d\n\n" % RETRY_MS)
            await _stream(request, resp, edge, cast_id, start)
            await resp.write_eof()
        return resp


async def _stream(request: web.Request, resp: web.StreamResponse, edge: Edge, cast_id: str, start: int) -> None:
    timeout = edge.cfg.write_timeout_s
    async with edge.tail.listen(cast_id, start, "sse") as listener:
        while not listener.done:
            item = await listener.next(edge.cfg.sse_heartbeat_s)
            if item is None:
                if not listener.done:
                    await write_within(request, resp, HEARTBEAT, timeout)
                continue
            batch = [item, *listener.ready(WRITE_BATCH)]  # what queued up meanwhile: one write
            await write_within(request, resp, b"".join(i.sse() for i in batch), timeout)
            observe(edge.metrics, batch)
        if listener.closed and not listener.finished:
            await write_within(request, resp, GOODBYE, timeout)

