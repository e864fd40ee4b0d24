"""The Durable Streams protocol's HTTP vocabulary, shared by edge (reads) and intake (writes):
header names, the route prefix, the security headers every answer carries, and the refusals
that carry protocol headers. The storage side is ``streams.py``.
"""

from __future__ import annotations

import base64
import random
import time

from aiohttp import web

from servicekit import Refusal, encode_json, sse

from .streams import entry_of, served_type, valid_path

PREFIX = "/v1/stream/"
ROUTE = PREFIX + "{path:.+}"
# Casts are served read-only under this sub-path; nobody may create a stream there.
CASTS = "casts"

NEXT_OFFSET = "Stream-Next-Offset"
CURSOR = "Stream-Cursor"
UP_TO_DATE = "Stream-Up-To-Date"
CLOSED = "Stream-Closed"
SEQ = "Stream-Seq"
TTL = "Stream-TTL"
EXPIRES_AT = "Stream-Expires-At"
FORKED_FROM = "Stream-Forked-From"
FORK_OFFSET = "Stream-Fork-Offset"
FORK_SUB_OFFSET = "Stream-Fork-Sub-Offset"
SSE_ENCODING = "Stream-SSE-Data-Encoding"
PRODUCER_ID = "Producer-Id"
PRODUCER_EPOCH = "Producer-Epoch"
PRODUCER_SEQ = "Producer-Seq"
PRODUCER_EXPECTED_SEQ = "Producer-Expected-Seq"
PRODUCER_RECEIVED_SEQ = "Producer-Received-Seq"

# Every answer under the prefix, errors included [R:ds-security-headers]. A stream's bytes are
# its writer's: opened as a page they get an opaque origin that runs nothing and loads nothing
# (the CSP's sandbox), and they are never sniffed into another type.
STREAM_CSP = "sandbox; default-src 'none'"
SECURITY_HEADERS = {"X-Content-Type-Options": "nosniff", "Cross-Origin-Resource-Policy": "cross-origin",
                    "Content-Security-Policy": STREAM_CSP}
EXPOSED = ", ".join((NEXT_OFFSET, CURSOR, UP_TO_DATE, CLOSED, PRODUCER_EPOCH, PRODUCER_SEQ, PRODUCER_EXPECTED_SEQ,
                     PRODUCER_RECEIVED_SEQ, SSE_ENCODING, "ETag", "Content-Type", "Location"))

ALLOW_METHODS = "GET, HEAD, POST, PUT, DELETE, OPTIONS"
ALLOW_HEADERS = ", ".join(("Content-Type", "Authorization", "If-None-Match", SEQ, TTL, EXPIRES_AT, CLOSED, PRODUCER_ID,
                           PRODUCER_EPOCH, PRODUCER_SEQ, FORKED_FROM, FORK_OFFSET, FORK_SUB_OFFSET))

# Cursors count 20-second intervals from the protocol's epoch (2024-10-09T00:00:00Z); a client
# that echoes a cursor not behind the clock gets one strictly ahead, by up to an hour's jitter.
CURSOR_INTERVAL_S = 20
CURSOR_EPOCH_S = 1_728_432_000
MAX_JITTER_S = 3600
# A client's cursor longer than this is no cursor this server sent (the clock's is 8 digits for
# millennia): it counts as none.
MAX_CURSOR_DIGITS = 15


def cursor_after(client: str | None, now_s: float | None = None) -> str:
    """The cursor for a ``live=`` answer: never behind the client's, so CDN cache keys move on
    [R:ds-cursor]."""
    current = int(((time.time() if now_s is None else now_s) - CURSOR_EPOCH_S) // CURSOR_INTERVAL_S)
    if (client is None or not (client.isascii() and client.isdigit()) or len(client) > MAX_CURSOR_DIGITS
            or int(client) < current):
        return str(current)
    jitter = max(1, -(-random.randint(1, MAX_JITTER_S) // CURSOR_INTERVAL_S))  # noqa: S311 (not a secret)
    return str(int(client) + jitter)


def etag(path: str, start: str, end: str, closed: bool) -> str:
    """Varies with the range and with the closure, so a 304 never hides an EOF [R:ds-etag]."""
    return f'"{base64.b64encode(path.encode()).decode()}:{start}:{end}{":c" if closed else ""}"'


def stream_path(request: web.Request) -> str:
    """The stream a request names; 400 for a name out of bounds."""
    path = request.match_info["path"]
    if not valid_path(path):
        raise Refusal(400, "bad_stream_name", "a stream name is at most 256 URL-safe characters in /-separated "
                                              "segments, none of them . or ..")
    return path


def flag(request: web.Request, name: str) -> bool:
    """A presence header: set only when its value is exactly ``true`` (any case)."""
    return request.headers.get(name, "").strip().lower() == "true"


def missing() -> Refusal:
    return Refusal(404, "not_found", "no such stream")


def gone() -> Refusal:
    return Refusal(410, "gone", "the stream was deleted; its forks still read it")


def bad(message: str) -> Refusal:
    return Refusal(400, "bad_request", message)


def read_query(request: web.Request) -> tuple[str | None, str | None]:
    """A read's ``offset`` and its live mode (``live``: long-poll or sse, which want an offset)."""
    offsets = request.query.getall("offset", [])
    if len(offsets) > 1:
        raise bad("send one offset")
    offset = offsets[0] if offsets else None
    if offset not in (None, "-1", "now") and entry_of(offset or "") is None:
        raise bad("offset must be -1, now, or a Stream-Next-Offset this server sent")
    mode = request.query.get("live")
    if mode in ("long-poll", "sse") and offset is None:
        raise bad(f"live={mode} needs an offset")
    return offset, mode


def sse_event(kind: str, payload: bytes) -> bytes:
    """A Durable Streams event: no id, data lines without the space."""
    return sse.frame(payload, event=kind, field=sse.DATA_TIGHT)


def control_event(position: str, cursor: str | None, *, at_tail: bool, closed: bool) -> bytes:
    """The control event after each data event (and alone at the tail) [R:ds-sse]."""
    control: dict[str, object] = {"streamNextOffset": position}
    if closed and at_tail:
        control["streamClosed"] = True
    else:
        control["streamCursor"] = cursor_after(cursor)
        if at_tail:
            control["upToDate"] = True
    return sse_event("control", encode_json(control))


def state_headers(content_type: str, next_offset: str, closed: bool) -> dict[str, str]:
    """What a read or a create answers about the stream: its served type, where the next read
    starts, and its closure."""
    headers = {"Content-Type": served_type(content_type), NEXT_OFFSET: next_offset}
    if closed:
        headers[CLOSED] = "true"
    return headers


def timed_out(request: web.Request, offset: str, closed: bool) -> web.Response:
    """A long poll's 204: nothing came before its deadline, or the stream is closed at its end."""
    headers = {NEXT_OFFSET: offset, UP_TO_DATE: "true"}
    if closed:
        headers[CLOSED] = "true"
    else:
        headers[CURSOR] = cursor_after(request.query.get("cursor"))
    return web.Response(status=204, headers=headers)


async def preflight(request: web.Request) -> web.Response:
    """OPTIONS: CORS preflight for any stream (no key needed: it reads and writes nothing)."""
    return web.Response(status=204, headers={
        "Access-Control-Allow-Methods": ALLOW_METHODS, "Access-Control-Allow-Headers": ALLOW_HEADERS,
        "Access-Control-Max-Age": "600",
    })


def public_url(request: web.Request) -> str:
    """The stream's URL as its client sees it, through a proxy that says where it was asked."""
    proto = request.headers.get("X-Forwarded-Proto", request.scheme).split(",")[0].strip()
    host = request.headers.get("X-Forwarded-Host", request.host).split(",")[0].strip()
    return f"{proto}://{host}{request.path}"


def is_cast(path: str) -> bool:
    """A path (under the prefix) of the read-only casts' streams."""
    return path == CASTS or path.startswith(CASTS + "/")


async def secure(request: web.Request, response: web.StreamResponse) -> None:
    """``on_response_prepare``: the protocol's browser security headers; CORS for the casts only.

    A cast's streams are public to whoever has its link (an unguessable id), as its MP3 is; the
    general streams have guessable names, so no other site's page may read them through a
    visitor's browser (a server on a private network included): no ``Access-Control-Allow-Origin``
    [R:ds-cors-casts-only]. A stream's read is a download when opened directly."""
    if not request.path.startswith(PREFIX):
        return
    response.headers.update(SECURITY_HEADERS)
    if is_cast(request.path[len(PREFIX):]):
        response.headers.setdefault("Access-Control-Allow-Origin", "*")
        response.headers.setdefault("Access-Control-Expose-Headers", EXPOSED)
    elif request.method in ("GET", "HEAD"):
        response.headers.setdefault("Content-Disposition", "attachment")
