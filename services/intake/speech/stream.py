"""One speech response on its way (``/v1/audio/speech``'s, and Deepgram's ``POST /v1/speak``'s): the
cast's log followed through intake's shared tail (``fanout.Tail``: one blocked read per process,
however many streams), each audio record converted (``formats.py``) and written at once, as audio
or as OpenAI's SSE events.

The cast was claimed first (``views.post_speech``); a client that leaves stops the cast only where
its route says so (``hung_up``: Deepgram's barge-in). The response names the cast (``X-Cast-Id``)
and its player (``Location``).
"""

from __future__ import annotations

import asyncio
import base64
import logging
from collections.abc import Awaitable, Callable, Mapping
from contextlib import aclosing
from dataclasses import dataclass

from aiohttp import web

from castlog import Audio
from servicekit import encode_json, sse

from ..claim import cast_url
from ..context import INTAKE
from .follow import CastFailed, TailClosed, cast_audio
from .formats import CONTENT_TYPES, Converter, Passthrough, converter
from .v1 import SpeechRequest

log = logging.getLogger(__name__)

LISTENER_KIND = "speech"  # streamtts_intake_listeners{kind}
STREAM_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
HangUp = Callable[[], Awaitable[None]]  # what a client's leaving does (Deepgram's: cancel the cast it made)



@dataclass
class _Stream:
    """One response on its way: what was sent, and how."""

    request: web.Request
    cast_id: str
    headers: Mapping[str, str]  # the response's
    sse_of: SpeechRequest | None  # the request whose SSE events carry the audio; None: the audio as it is
    resp: web.StreamResponse | None = None


async def stream_speech(
    request: web.Request, speech: SpeechRequest, cast_id: str, settled: int, headers: Mapping[str, str]
) -> web.StreamResponse:
    """``/v1/audio/speech``'s stream, in ``speech``'s format and stream format; ``headers`` name the
    fields it did not use (``v1.field_headers``)."""
    events = speech.stream_format == "sse"
    audio = {**STREAM_HEADERS, "Content-Type": CONTENT_TYPES[speech.response_format]}
    headers = {**(sse.HEADERS if events else audio), "X-Cast-Id": cast_id, "Location": cast_url(cast_id), **headers}
    convert = converter(speech.response_format, speech.volume_multiplier)
    return await stream_cast(request, cast_id, settled, convert, headers, speech if events else None)


async def stream_cast(
    request: web.Request, cast_id: str, settled: int, convert: Converter, headers: Mapping[str, str],
    sse_of: SpeechRequest | None = None, kind: str = LISTENER_KIND, hung_up: HangUp | None = None,
) -> web.StreamResponse:
    """Follow the cast's log from its start and answer with its audio (in ``sse_of``'s events, if
    given); an ``error`` record at or before ``settled`` is history (a failure the claim
    re-enqueued), not this request's answer. ``hung_up`` runs when the client leaves mid-stream or
    stops reading for INTAKE_SPEECH_WRITE_TIMEOUT_S."""
    s = _Stream(request, cast_id, headers, sse_of)
    intake = request.app[INTAKE]
    try:
        async with aclosing(cast_audio(intake.tail, intake.reader, cast_id, settled, kind)) as records:
            async for record in records:
                await _send(s, _delta(s, await convert_chunk(convert, record.body), record))
        return await _finish(s, convert)
    except (CastFailed, TailClosed) as ended:  # (a stop: the same request replays the cast)
        return await _ended(s, ended)
    except (ConnectionError, asyncio.TimeoutError) as exc:
        if hung_up is not None:
            await hung_up()
        if isinstance(exc, ConnectionResetError) and s.resp is not None:
            return s.resp  # the client hung up mid-stream: not intake's error (no 500, no logged traceback)
        raise
    except asyncio.CancelledError:  # a shutdown (the cast goes on), or a server that cancels on a hang-up
        if hung_up is not None and (request.transport is None or request.transport.is_closing()):
            await hung_up()
        raise


async def _send(s: _Stream, data: bytes) -> web.StreamResponse:
    """``data`` out, the response opened first if it is not yet."""
    if s.resp is None:
        s.resp = web.StreamResponse(headers=s.headers)
        s.resp.enable_chunked_encoding()
        await s.resp.prepare(s.request)
    await _write(s, data)
    return s.resp


async def convert_chunk(convert: Converter, body: bytes) -> bytes:
    if isinstance(convert, Passthrough):
        return convert.feed(body)
    # decoding and encoding take milliseconds: off the event loop, which serves every submit
    return await asyncio.get_running_loop().run_in_executor(None, convert.feed, body)


def _delta(s: _Stream, data: bytes, record: Audio | None) -> bytes:
    """``data`` as the response carries it; ``record`` gives its words (none for the converter's rest)."""
    if s.sse_of is None:
        return data
    if not data:
        return b""
    event: dict[str, object] = {"type": "speech.audio.delta", "audio": base64.b64encode(data).decode("ascii")}
    if s.sse_of.timestamps and record is not None:
        event["words"] = [{"word": w, "start": (record.o + a) / 1000, "end": (record.o + b) / 1000}
                          for w, a, b in record.w]
    return sse.frame(encode_json(event))


async def _write(s: _Stream, data: bytes) -> None:
    """``data`` out within INTAKE_SPEECH_WRITE_TIMEOUT_S (asyncio.TimeoutError: a client that stopped reading)."""
    if data and s.resp is not None:
        await asyncio.wait_for(s.resp.write(data), s.request.app[INTAKE].cfg.speech_write_timeout_s)


async def _finish(s: _Stream, convert: Converter) -> web.StreamResponse:
    resp = await _send(s, _delta(s, convert.close(), None))
    if s.sse_of is not None:
        tokens = len(s.sse_of.input)
        usage = {"input_tokens": tokens, "output_tokens": 0, "total_tokens": tokens}
        await _write(s, sse.frame(encode_json({"type": "speech.audio.done", "usage": usage})))
    await resp.write_eof()
    return resp


async def _ended(s: _Stream, ended: CastFailed | TailClosed) -> web.StreamResponse:
    """The cast failed or intake stops: the refusal before the first byte; after it an SSE stream's
    failure is its ``error`` event, anything else a cut connection (the only signal once the audio's
    headers are out)."""
    if s.resp is None:
        raise ended
    log.warning("speech stream of %s cut short: %s", s.cast_id, ended.message)
    if s.sse_of is not None and isinstance(ended, CastFailed):
        await _write(s, sse.frame(encode_json({"type": "error", "error": {"message": ended.message, "code": ended.code}})))
        await s.resp.write_eof()
    elif s.request.transport is not None:
        s.request.transport.abort()
    return s.resp
