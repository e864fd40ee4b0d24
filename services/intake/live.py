"""Open (live) casts over HTTP: open one, add text fragments at their offsets, close it.

``POST /api/casts`` with ``{"live": true, ...}`` opens a cast (201 with its id); fragments go to
``POST /api/casts/{id}/text`` with the offset where they start, so that a resend after a lost
reply appends nothing and a gap is refused; ``POST /api/casts/{id}/close`` ends the text.
Both writes need ``Authorization: Bearer <write_token>``, the secret of the 201 (the id is the
public link: it reads, never writes). Listeners use the usual routes (SSE, records, audio.mp3). The speech room's WebSocket session
(:mod:`intake.speech.livews`) calls the same functions. Every refusal is a ``Refusal``; those of
the text log are ``TextRefusal``, which tells the client the ``offset`` to go on from.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import msgspec
from aiohttp import web

from castlog import LiveText, Meta, RateLimited, TooManyOpen, catalog_key, is_cast_id
from castlog.batching import NotReplicated
from servicekit import json_response
from servicekit.answers import LiveClosed, LiveError, LiveOpened, LiveState
from servicekit.forms import LIVE_MAX_SPEED, LIVE_MIN_SPEED, CloseForm, OpenForm, TextForm

from .claim import bearer, cast_url, not_replicated, rate_limited, read_body
from .context import INTAKE, request_client
from .validate import CONTROLS, Refusal, check_title, decode, refuse_surrogates

# A title for an open cast that was given none (there is no text yet to take one from).
LIVE_TITLE = "Live cast"
# What a flush or a close costs of a client's live text characters: each makes the worker speak
# a piece however short, so a stream of empty flushes is not free.
FLUSH_COST = 50
# A client at its cap of open casts may retry once it closed one.
OPEN_RETRY_AFTER_S = 5


@dataclass(frozen=True)
class Opened:
    """An open cast: its id, the voice it reads in and the secret that writes to it."""

    cast_id: str
    voice: str
    write_token: str


class TextRefusal(Refusal):
    """A fragment or close the text log refused; ``offset`` is the text's end, where to go on."""

    def __init__(self, status: int, code: str, message: str, offset: int) -> None:
        super().__init__(status, code, message)
        self.offset = offset

    def body(self) -> LiveError:
        return LiveError(self.code, self.message, offset=self.offset)


def asks_live(body: bytes) -> bool:
    """Whether a ``POST /api/casts`` body asks for an open cast (cheap: most bodies lack the word)."""
    if b'"live"' not in body:
        return False
    try:
        return bool(msgspec.json.decode(body, type=dict).get("live"))
    except (msgspec.DecodeError, RecursionError):
        return False  # the whole-text path refuses it with its own words


async def open_cast(app: web.Application, client: str, voice: str | None, title: str | None, speed: float) -> Opened:
    """Check the fields, take the client's token and its place among its open casts, then open the
    cast (each its own step: the client's slot, then the cast's key lane)."""
    if not LIVE_MIN_SPEED <= speed <= LIVE_MAX_SPEED:
        raise Refusal(422, "invalid_speed", f"speed must be between {LIVE_MIN_SPEED} and {LIVE_MAX_SPEED}, not {speed}")
    intake = app[INTAKE]
    voices = await intake.voices.required(voice)  # 503 warming_up before any worker published
    voice = voice or voices.default
    if voice not in voices.names:
        raise Refusal(422, "unknown_voice", "no such voice; pick one of GET /api/voices")
    title = check_title(title, intake.cfg.max_title_chars) if title else LIVE_TITLE
    meta = Meta(title=title, voice=voice, chars=0, sentences=0, created_at=time.time_ns() // 1_000_000, live=True,
                speed=speed)  # the state shows it (the worker takes it from the recipe)
    asked_at = intake.cooldowns.clock()
    try:
        opened = await intake.live.open(voice, meta, speed=speed, limit=(intake.limiter, client),
                                        max_open=intake.cfg.live_max_open_per_client)
    except TooManyOpen:
        cap = intake.cfg.live_max_open_per_client
        raise Refusal(429, "too_many_open_casts", f"your address holds {cap} open casts; close one first",
                      {"Retry-After": str(OPEN_RETRY_AFTER_S)}) from None
    except RateLimited as limited:  # the same bucket as a whole text's submit, and the same answer
        intake.cooldowns.refused(client, asked_at, limited.verdict)
        raise rate_limited(limited.verdict.retry_after_s) from None
    except NotReplicated:  # opened, but not known to survive a failover: its token is never handed out
        raise not_replicated(intake.cfg.wait_replicas, "a new open makes a new cast") from None
    return Opened(opened.cast_id, voice, opened.write_token)


_ANSWERS = {
    "gap": (409, "offset_gap", "text is missing before this offset; send the text from offset {end} first"),
    "overlap": (409, "offset_overlap", "this fragment overlaps text already sent; send the part from offset {end}"),
    "too_long": (413, "text_too_long", "the text would exceed {limit} characters; close this cast and open another"),
    "closed": (409, "cast_closed", "this cast's text is closed; open a new cast for more text"),
    "not_live": (409, "not_live", "this cast was submitted as a whole text; it takes no fragments"),
    "missing": (404, "not_found", "no such cast; open one with POST /api/casts {{\"live\": true}}"),
}


def refusal_of(answer: str, end: int, limit: int) -> TextRefusal:
    status, code, message = _ANSWERS[answer]
    return TextRefusal(status, code, message.format(end=end, limit=limit), end)


def text_limited(wait_s: int) -> Refusal:
    return Refusal(429, "rate_limited", f"too much live text from your address; retry in {wait_s} s",
                   {"Retry-After": str(wait_s)})


async def add_text(
    app: web.Application, cast_id: str, offset: int, fragment: str, flush: bool, *, client: str
) -> tuple[str, int]:
    """Append one fragment at ``offset``, its characters (a flush's FLUSH_COST) taken from
    ``client``'s bucket just before (its own step); ("appended" or "duplicate", the text's end) or a
    refusal (TextRefusal for the text log's answers)."""
    if offset < 0:
        raise Refusal(422, "invalid_offset", "offset counts characters sent before this fragment: 0 or more")
    intake = app[INTAKE]
    limit = intake.cfg.max_chars
    cost = len(fragment) + (FLUSH_COST if flush else 0) or FLUSH_COST
    refuse_surrogates(fragment)
    try:
        # Kept without controls (the offsets count them, as sent); \r goes too, not made a \n as in a whole
        # text: a \r\n cut between two fragments must not count as two line breaks.
        answer, end = await intake.live.append_text(
            cast_id, offset, len(fragment), CONTROLS.sub("", fragment), max_chars=limit, flush=flush,
            limit=(intake.text_limiter, client, min(cost, intake.text_limiter.burst)),
        )
    except RateLimited as limited:
        raise text_limited(limited.verdict.retry_after_s) from None
    if answer == "ok":
        return "appended", end
    if answer == "duplicate":
        return "duplicate", end
    raise refusal_of(answer, end, limit)


async def close_text(app: web.Application, cast_id: str, voice: str, seen: LiveText | None = None) -> tuple[int, str]:
    """Close the text (idempotent); (its length, the final text's content id) or TextRefusal.
    Never refused for its cost: a session that ends must close its text (post_close charges a client's)."""
    intake = app[INTAKE]
    answer, end, cid = await intake.live.close_text(cast_id, voice, seen)
    if answer in ("ok", "closed"):
        return end, cid
    raise refusal_of(answer, end, intake.cfg.max_chars)


# ---- the HTTP handlers ------------------------------------------------------------------------

def _no_write_token(message: str) -> Refusal:
    return Refusal(401, "invalid_write_token", message, {"WWW-Authenticate": 'Bearer realm="live cast"'})


async def _written_cast(request: web.Request) -> str:
    """The cast ``{id}`` the request writes to, once its ``Authorization: Bearer <write_token>`` may:
    checked before the body is read, so a stranger's body is never read and nothing is written."""
    cast_id = request.match_info["id"]
    if not is_cast_id(cast_id):
        raise Refusal(404, "not_found", "no such cast; a cast id is 12 characters of A-Z, a-z, 0-9, - and _")
    if request.content_type != "application/json" and request.can_read_body:
        raise Refusal(415, "unsupported_media_type", "send the body with Content-Type: application/json")
    token = bearer(request)
    if not token:
        raise _no_write_token("send the write_token that opened this cast as Authorization: Bearer <write_token>")
    failures, client = request.app[INTAKE].auth_failures, request_client(request)
    failures.check(client)
    answer = await request.app[INTAKE].live.writer(cast_id, token)
    if answer == "forbidden":
        await failures.failed(client, "write_token")
        raise _no_write_token("this write_token does not write to this cast; only its opener's does")
    if answer != "ok":
        raise refusal_of(answer, 0, 0)
    return cast_id


async def open_from_body(app: web.Application, client: str, body: bytes) -> web.Response:
    """``POST /api/casts`` with ``{"live": true}`` (its body read): open a cast; 201 with its id,
    routes and write token (Cache-Control: no-store: a secret)."""
    form = decode(body, OpenForm, 'send {"live": true, "voice", "title", "speed" (all optional)}')
    opened = await open_cast(app, client, form.voice, form.title, form.speed)
    url = cast_url(opened.cast_id)
    answer = LiveOpened(
        id=opened.cast_id, url=url, status="open", offset=0, voice=opened.voice,
        text=f"/api/casts/{opened.cast_id}/text", close=f"/api/casts/{opened.cast_id}/close",
        write_token=opened.write_token,
    )
    return json_response(answer, 201, {"Location": url, "Cache-Control": "no-store"})


async def post_text(request: web.Request) -> web.Response:
    """``POST /api/casts/{id}/text`` ``{"text", "offset", "flush"}``: 200 with the text's end."""
    cast_id = await _written_cast(request)
    form = decode(await read_body(request) or b"{}", TextForm,
                  'send {"text": string, "offset": integer, "flush": boolean (optional)}')
    status, end = await add_text(request.app, cast_id, form.offset, form.text, form.flush, client=request_client(request))
    return json_response(LiveState(id=cast_id, status=status, offset=end))


async def post_close(request: web.Request) -> web.Response:
    """``POST /api/casts/{id}/close`` (optionally ``{"offset"}``, the length the client sent)."""
    cast_id = await _written_cast(request)
    form = decode(await read_body(request) or b"{}", CloseForm, 'send {} or {"offset": integer}')
    # a close costs FLUSH_COST of the client's live text: it makes the worker speak the rest
    verdict = await request.app[INTAKE].text_limiter.take(request_client(request), FLUSH_COST)
    if not verdict.allowed:
        raise text_limited(verdict.retry_after_s)
    store = request.app[INTAKE].live
    text = await store.read_text(cast_id)
    if text is None:
        answer = "not_live" if await store.redis.exists(catalog_key(cast_id)) else "missing"
        raise refusal_of(answer, 0, 0)
    if form.offset is not None and text.closed is None and form.offset != text.end:
        raise refusal_of("gap" if form.offset > text.end else "overlap", text.end, 0)
    end, cid = await close_text(request.app, cast_id, text.voice, text)  # the log read once
    return json_response(LiveClosed(id=cast_id, url=cast_url(cast_id), status="closed", offset=end, content_id=cid))
