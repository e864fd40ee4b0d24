"""Handlers of the read API (JSON), the pages and the service endpoints: parse, call, respond.

The SSE and MP3 streams have their own modules (``sse.py``, ``mp3stream.py``).
"""

from __future__ import annotations

from pathlib import Path

import msgspec
from aiohttp import web

from castlog import is_terminal
from fanout import Item
from servicekit import Problem, json_response, probe, redis_answers
from servicekit.answers import CastState, Health, Links, RecordPage

from .context import EDGE, Edge, known_cast
from .errors import not_found
from .params import cast_id_from, records_query

STATIC = Path(__file__).resolve().parent / "static"
PAGE_HEADERS = {"Cache-Control": "no-cache"}


async def cast_state(request: web.Request) -> web.Response:
    cast_id = cast_id_from(request)
    s = (await known_cast(request, cast_id)).layout.state
    api = f"/api/casts/{cast_id}"
    links = Links(player=f"/c/{cast_id}", audio=f"{api}/audio.mp3", events=f"{api}/events", records=f"{api}/records",
                  captions=f"{api}/captions")
    # Every other field is the state's own (or derived) field of the same name.
    fields = {name: getattr(s, name) for name in CastState.__struct_fields__ if name not in ("id", "links")}
    return json_response(CastState(id=cast_id, links=links, **fields))


async def records(request: web.Request) -> web.Response:
    """``…/records``, and the original design's gateway path (``/s2/records?stream=pub/casts/<id>``)."""
    edge = request.app[EDGE]
    q = records_query(request, edge.cfg)
    cast_id, seq, limit, wait = q.cast_id, q.seq, q.limit, q.wait
    client = await edge.guard.take_read(request)
    page = await edge.reader.page(cast_id, seq, limit)  # one round trip (an archived log: two)
    if page.tail == 0:
        raise not_found("no such cast")
    edge.played.mark(cast_id)
    items = [Item(e) for e in page.entries]
    next_seq, tail = page.next_seq, page.tail
    closed = await _closed(edge, cast_id, items, next_seq, tail)
    if next_seq == seq and wait > 0 and seq >= tail and not closed:  # nothing there yet
        items = await _long_poll(client, edge, cast_id, seq, limit, wait)
        if items:
            next_seq = items[-1].seq + 1
            tail = max(tail, next_seq)
            closed = is_terminal(items[-1].entry.record)
    edge.metrics.delivered.inc(len(items))
    records = [msgspec.Raw(i.json()) for i in items]
    return json_response(RecordPage(records=records, next_seq_num=next_seq, tail=tail, closed=closed))


async def _closed(edge: Edge, cast_id: str, items: list[Item], next_seq: int, tail: int) -> bool:
    """Whether the log ends with a terminal record that the client has reached."""
    if next_seq < tail:
        return False
    if items and items[-1].seq == tail - 1:
        return is_terminal(items[-1].entry.record)
    last = await edge.reader.last(cast_id, bodies=False)
    return last is not None and is_terminal(last.record)


async def _long_poll(client: str, edge: Edge, cast_id: str, seq: int, limit: int, wait: float) -> list[Item]:
    """At the tail: wait up to ``wait`` seconds for the next record, then take what is ready."""
    async with edge.guard.hold_seat(client):
        async with edge.tail.listen(cast_id, seq, "poll") as listener:
            first = await listener.next(wait)
            if first is None:
                return []
            items = [first]
            while len(items) < limit and not listener.done:
                more = await listener.next(0)
                if more is None:
                    break
                items.append(more)
            return items


async def _tail_runs(app: web.Application) -> Problem | None:
    return None if app[EDGE].tail.stream.running else Problem("tail_down", "the shared tail stopped; restart edge")


async def _listening(app: web.Application) -> Health:
    tail = app[EDGE].tail
    return Health(status="ok", listeners=len(tail.listeners), watched=len(tail.watches))


healthz = probe(
    _tail_runs, redis_answers(lambda app: app[EDGE].redis, Problem("redis_unavailable", "Redis does not answer")),
    info=_listening,
)
# Ready to serve reads: the same checks (edge has nothing to load).
readyz = healthz


async def index_page(request: web.Request) -> web.FileResponse:
    return web.FileResponse(STATIC / "index.html", headers=PAGE_HEADERS)


async def player_page(request: web.Request) -> web.FileResponse:
    cast_id_from(request)  # a malformed link is a 404 here too, before any Redis call
    return web.FileResponse(STATIC / "player.html", headers=PAGE_HEADERS)
