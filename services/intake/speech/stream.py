"""One ``/v1/audio/speech`` response on its way: the cast's log followed through intake's shared
tail (``fanout.Tail``: one blocked read per process, however many streams), each audio record
converted (``formats.py``) and written at once, in the format and stream format asked for.

The cast was claimed first (``views.post_speech``); a client that leaves never stops the cast.
The response names the cast (``X-Cast-Id``) and its player (``Location``).
"""

from __future__ import annotations

import asyncio
import base64
import logging
from collections.abc import Mapping
from contextlib import aclosing
from dataclasses import dataclass, field

from aiohttp import web

from castlog import Audio, LogReader
from fanout import Tail
from servicekit import encode_json, sse

from ..claim import cast_url
from ..context import INTAKE
from .follow import CastFailed, TailClosed, cast_audio
from .formats import CONTENT_TYPES, Converter, Passthrough, converter
from .v1 import SpeechRequest, V1Refusal

log = logging.getLogger(__name__)

LISTENER_KIND = "speech"  # streamtts_intake_listeners{kind}
STREAM_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}



@dataclass
class _Stream:
    """One response on its way: what was sent, and how."""

    request: web.Request
    speech: SpeechRequest
    cast_id: str
    resp: web.StreamResponse | None = None
    headers: Mapping[str, str] = field(default_factory=dict)  # more response headers (v1.field_headers)


async def stream_cast(
    request: web.Request, speech: SpeechRequest, cast_id: str, tail: Tail, reader: LogReader, settled: int,
    headers: Mapping[str, str] | None = None,
) -> web.StreamResponse:
    """Follow the cast's log from its start and answer with its audio; an ``error`` record at or
    before ``settled`` is history (a failure the claim re-enqueued), not this request's answer."""
    s = _Stream(request, speech, cast_id, headers=headers or {})
    convert = converter(s.speech.response_format, s.speech.volume_multiplier)
    try:
        async with aclosing(cast_audio(tail, reader, s.cast_id, settled, LISTENER_KIND)) as records:
            async for record in records:
                await _send_audio(s, convert, record)
    except CastFailed as failed:
        return await _failed(s, failed.reason)
    except TailClosed:  # intake is stopping: the same request replays the cast
        return _stopped(s)
    except ConnectionResetError:  # the client hung up mid-stream (aiohttp's ClientConnectionResetError):
        if s.resp is None:  # nobody to answer, and not intake's error (no 500, no logged traceback)
            raise
        return s.resp
    return await _finish(s, convert)


def _stopped(s: _Stream) -> web.StreamResponse:
    if s.resp is None:
        raise V1Refusal(503, "shutting_down", "intake is stopping; send the same request again")
    if s.request.transport is not None:
        s.request.transport.abort()  # the audio's headers are out: a cut stream is the only signal
    return s.resp


async def _open(s: _Stream) -> web.StreamResponse:
    audio = {**STREAM_HEADERS, "Content-Type": CONTENT_TYPES[s.speech.response_format]}
    resp = web.StreamResponse(headers={
        **(sse.HEADERS if s.speech.stream_format == "sse" else audio),
        "X-Cast-Id": s.cast_id,
        "Location": cast_url(s.cast_id),
        **s.headers,
    })
    resp.enable_chunked_encoding()
    await resp.prepare(s.request)
    s.resp = resp
    return resp


async def convert_chunk(convert: Converter, body: bytes) -> bytes:
    if isinstance(convert, Passthrough):
        return convert.feed(body)
    # decoding and encoding take milliseconds: off the event loop, which serves every submit
    return await asyncio.get_running_loop().run_in_executor(None, convert.feed, body)


async def _send_audio(s: _Stream, convert: Converter, record: Audio) -> None:
    data = await convert_chunk(convert, record.body)
    resp = s.resp or await _open(s)
    await _write(s, resp, _delta(s, data, record))


def _delta(s: _Stream, data: bytes, record: Audio | None) -> bytes:
    """``data`` as the response carries it; ``record`` gives its words (none for the converter's rest)."""
    if s.speech.stream_format != "sse":
        return data
    if not data:
        return b""
    event: dict[str, object] = {"type": "speech.audio.delta", "audio": base64.b64encode(data).decode("ascii")}
    if s.speech.timestamps and record is not None:
        event["words"] = [{"word": w, "start": (record.o + a) / 1000, "end": (record.o + b) / 1000}
                          for w, a, b in record.w]
    return sse.frame(encode_json(event))


async def _write(s: _Stream, resp: web.StreamResponse, data: bytes) -> None:
    if data:
        await asyncio.wait_for(resp.write(data), s.request.app[INTAKE].cfg.speech_write_timeout_s)


async def _finish(s: _Stream, convert: Converter) -> web.StreamResponse:
    rest = convert.close()
    resp = s.resp or await _open(s)
    await _write(s, resp, _delta(s, rest, None))
    if s.speech.stream_format == "sse":
        tokens = len(s.speech.input)
        usage = {"input_tokens": tokens, "output_tokens": 0, "total_tokens": tokens}
        await _write(s, resp, sse.frame(encode_json({"type": "speech.audio.done", "usage": usage})))
    await resp.write_eof()
    return resp


async def _failed(s: _Stream, reason: str) -> web.StreamResponse:
    message = f"the synthesis failed ({reason}); send the same request again to retry it"
    if s.resp is None:
        raise V1Refusal(500, "synthesis_failed", message)
    log.warning("speech stream of %s cut short: the cast failed (%s)", s.cast_id, reason)
    if s.speech.stream_format == "sse":
        error = {"message": message, "code": "synthesis_failed"}
        await _write(s, s.resp, sse.frame(encode_json({"type": "error", "error": error})))
        await s.resp.write_eof()
    elif s.request.transport is not None:
        s.request.transport.abort()  # the audio's headers are out: a cut stream is the only signal
    return s.resp
