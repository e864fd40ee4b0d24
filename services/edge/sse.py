"""``GET /api/casts/{id}/events``: the cast as Server-Sent Events, replayed then live.

``id:`` is the seq_num, ``event:`` the kind, ``data:`` the public JSON of the record. A client
resumes with ``Last-Event-ID`` (what EventSource sends on reconnect) or ``?seq_num=N``. The
response ends after the log's terminal record; asking past the end of a finished log answers
204, which tells EventSource to stop reconnecting.
"""

from __future__ import annotations

import asyncio
import logging
import time

from aiohttp import web
from redis.exceptions import RedisError

from castlog import MAX_SEQ_NUM, is_terminal

from .context import EDGE, Edge
from .errors import bad_request, not_found
from .limits import cast_id_from, int_param
from .public import Item

log = logging.getLogger(__name__)

# EventSource's reconnect delay after a dropped stream (the edge restarting, a proxy timeout).
RETRY_MS = 2_000
HEARTBEAT = b": heartbeat\n\n"
GOODBYE = b": edge stopping; reconnect with Last-Event-ID to resume\n\n"
SSE_HEADERS = {
    "Content-Type": "text/event-stream; charset=utf-8",
    "Cache-Control": "no-cache",
    "X-Accel-Buffering": "no",  # nginx and friends: pass each event through at once
}
# Below this and with nothing queued, a write cannot wait on a slow client (asyncio's default
# high-water mark), so it skips the timeout machinery: the common case stays cheap.
WRITE_FAST_BYTES = 64 * 1024
# Records joined into one write when a listener finds several waiting.
WRITE_BATCH = 16
# The longest Last-Event-ID taken: any such number + 1 is a valid seq_num (below MAX_SEQ_NUM).
LAST_EVENT_ID_DIGITS = 18


async def write_within(request: web.Request, resp: web.StreamResponse, data: bytes, timeout_s: float) -> None:
    """Write ``data``; a client that does not drain within ``timeout_s`` gets its stream closed
    (it resumes from the last id it received) so that it cannot pin memory or a slot forever."""
    transport = request.transport
    if transport is None or transport.is_closing():
        raise ConnectionResetError("client went away")
    if transport.get_write_buffer_size() == 0 and len(data) <= WRITE_FAST_BYTES:
        await resp.write(data)
        return
    try:
        await asyncio.wait_for(resp.write(data), timeout_s)
    except asyncio.TimeoutError:
        transport.abort()  # drop what it did not take: waiting for it to drain could take forever
        raise


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
        last = await edge.log.last(cast_id)
        if last is None:
            raise not_found("no such cast")
        edge.played.mark(cast_id)  # for retention
        if is_terminal(last.record) and start > last.seq_num:
            return web.Response(status=204)  # nothing will ever come: EventSource stops here
        if request.method == "HEAD":
            return web.Response(headers=SSE_HEADERS)
        resp = web.StreamResponse(headers=SSE_HEADERS)
        await resp.prepare(request)
        try:
            await resp.write(b"retry: %d\n\n" % RETRY_MS)
            await _stream(request, resp, edge, cast_id, start)
            await resp.write_eof()
        except (ConnectionResetError, asyncio.TimeoutError):
            pass  # the client left or stopped reading; it resumes from its last id
        except RedisError as exc:  # the headers are out: end the stream, EventSource resumes
            log.warning("SSE stream of %s ended: Redis failed (%s)", cast_id, exc)
        except Exception:  # noqa: BLE001 - headers are sent: a 500 can't follow; end the stream
            log.exception("SSE stream of %s failed", cast_id)
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
            observe(edge, batch)
        if listener.closed and not listener.finished:
            await write_within(request, resp, GOODBYE, timeout)


def observe(edge: Edge, items: list[Item]) -> None:
    """Count written records; latency only for live ones (a replay of old records is not late)."""
    edge.metrics.delivered.inc(len(items))
    now = time.time()
    for item in items:
        if item.live:
            edge.metrics.observe_delivery(item.entry.ts, now)
