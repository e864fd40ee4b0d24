"""``GET /api/casts/{id}/events``: the cast as Server-Sent Events, replayed then followed.

``id:`` is the seq_num, ``event:`` the kind, ``data:`` the public JSON of the record. A client
resumes with ``Last-Event-ID`` (what EventSource sends on reconnect) or ``?seq_num=N``. The
response ends after the log's terminal record; asking past the end of a finished log answers
204, which tells EventSource to stop reconnecting.
"""

from __future__ import annotations

from aiohttp import web

from castlog import is_terminal
from servicekit import sse

from .context import EDGE, Edge
from .errors import not_found
from .params import events_query
from .streaming import DirectSse, cut_short, observe, write_within

# EventSource's reconnect delay after a dropped stream (the edge restarting, a proxy timeout).
RETRY_MS = 2_000
HEARTBEAT = sse.comment("heartbeat")
GOODBYE = sse.comment("edge stopping; reconnect with Last-Event-ID to resume")
# Records joined into one write when a listener finds several waiting.
WRITE_BATCH = 16


async def events(request: web.Request) -> web.StreamResponse:
    q = events_query(request)
    cast_id, start = q.cast_id, q.start
    edge = request.app[EDGE]
    client = await edge.guard.take_read(request)
    async with edge.guard.hold_seat(client):
        last = await edge.reader.last(cast_id, bodies=False)
        if last is None:
            raise not_found("no such cast")
        edge.played.mark(cast_id)  # for retention
        if is_terminal(last.record) and start > last.seq_num:
            return web.Response(status=204)  # nothing will ever come: EventSource stops here
        if request.method == "HEAD":
            return web.Response(headers=sse.HEADERS)
        resp = web.StreamResponse(headers=sse.HEADERS)
        await resp.prepare(request)
        with cut_short("SSE stream", cast_id):
            await resp.write(sse.retry(RETRY_MS))
            await _stream(request, resp, edge, cast_id, start)
            await resp.write_eof()
        return resp


async def _stream(request: web.Request, resp: web.StreamResponse, edge: Edge, cast_id: str, start: int) -> None:
    timeout = edge.cfg.write_timeout_s
    async with edge.tail.listen(cast_id, start, "sse") as listener:
        listener.direct = DirectSse.of(request, resp, edge.metrics)
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

