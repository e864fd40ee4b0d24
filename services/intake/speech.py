"""``POST /v1/audio/speech``: a submit like ``POST /api/casts``, then the cast's audio as it is made.

The cast is claimed by the same one script as every submit (an identical request is the same
cast: it joins the live one or replays the finished one), then its log is followed with
castlog's reader and each audio record is converted (``formats.py``) and written at once. A
client that leaves never stops the cast. The response names the cast (``X-Cast-Id``) and its
player (``Location``).
"""

from __future__ import annotations

import asyncio
import base64
import logging
from dataclasses import dataclass

from aiohttp import web

from castlog import Audio, Eos, Error, LogReader
from castlog import Entry as LogEntry

from . import views
from .context import INTAKE
from .formats import CONTENT_TYPES, Converter, Passthrough, converter
from .v1 import SpeechRequest, V1Refusal, parse_speech, resolve_voice
from .validate import CastForm

log = logging.getLogger(__name__)

SSE_TYPE = "text/event-stream; charset=utf-8"
STREAM_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


@dataclass
class _Stream:
    """One response on its way: what was sent, and how."""

    request: web.Request
    speech: SpeechRequest
    cast_id: str
    resp: web.StreamResponse | None = None
    sent: int = -1  # the highest sentence index written
    audio_bytes: int = 0


async def post_speech(request: web.Request) -> web.StreamResponse:
    intake = request.app[INTAKE]
    slots = intake.speech_slots
    if slots.locked():
        limit = intake.cfg.max_speech_streams
        raise V1Refusal(429, "too_many_streams", f"{limit} speech streams are open; retry when one ends")
    async with slots:
        speech, cast_id, result = await _submit(request)
        reader = intake.speech_log
        # A log that ended in `error` before this request was re-enqueued by its submit: that
        # error is history, not this request's answer.
        last = None if result == "new" else await reader.last(cast_id)
        settled = last.seq_num if last is not None and isinstance(last.record, Error) else -1
        task = asyncio.current_task()
        streams = intake.speech_streams
        if task is not None:
            streams.add(task)
        try:
            return await _stream(_Stream(request, speech, cast_id), reader, settled)
        finally:
            streams.discard(task)  # type: ignore[arg-type]


async def close_streams(app: web.Application) -> None:
    """On shutdown: end every speech stream now (a stream waits on the cast for as long as it
    takes; the cast goes on, and the same request replays it)."""
    if INTAKE not in app:  # Redis never answered: no stream opened
        return
    for task in list(app[INTAKE].speech_streams):
        task.cancel()


async def _submit(request: web.Request) -> tuple[SpeechRequest, str, str]:
    parsed: list[SpeechRequest] = []
    installed: list[tuple[str, ...]] = []

    async def read() -> bytes:
        if request.content_type != "application/json":
            raise V1Refusal(415, "unsupported_media_type", "send the body as application/json")
        body = await views.read_body(request)
        installed.append((await request.app[INTAKE].voices.required(None)).names)  # 503 warming_up before any list
        return body

    def parse(body: bytes) -> CastForm:
        speech = parse_speech(body)
        parsed.append(speech)
        voice = resolve_voice(speech.voice, installed[0])
        return CastForm(text=speech.input, voice=voice, speed=speech.speed)

    cast_id, result = await views.accept(request, read, parse)
    return parsed[0], cast_id, result


async def _stream(s: _Stream, reader: LogReader, settled: int) -> web.StreamResponse:
    convert = converter(s.speech.response_format)
    async for entry in reader.follow(s.cast_id, 0, stop_at_terminal=False):
        record = entry.record
        if isinstance(record, Audio) and record.i > s.sent:
            await _send_audio(s, convert, entry)
        elif isinstance(record, Eos):
            await _finish(s, convert)
            break
        elif isinstance(record, Error) and entry.seq_num > settled:
            if await reader.tail(s.cast_id) > entry.seq_num + 1:
                continue  # a later attempt follows it: history too
            return await _failed(s, record.reason)
    assert s.resp is not None
    return s.resp


async def _open(s: _Stream) -> web.StreamResponse:
    sse = s.speech.stream_format == "sse"
    resp = web.StreamResponse(headers={
        **STREAM_HEADERS,
        "Content-Type": SSE_TYPE if sse else CONTENT_TYPES[s.speech.response_format],
        "X-Cast-Id": s.cast_id,
        "Location": views.cast_url(s.cast_id),
    })
    resp.enable_chunked_encoding()
    await resp.prepare(s.request)
    s.resp = resp
    return resp


async def _convert(convert: Converter, body: bytes) -> bytes:
    if isinstance(convert, Passthrough):
        return convert.feed(body)
    # decoding and encoding take milliseconds: off the event loop, which serves every submit
    return await asyncio.get_running_loop().run_in_executor(None, convert.feed, body)


async def _send_audio(s: _Stream, convert: Converter, entry: LogEntry) -> None:
    record = entry.record
    assert isinstance(record, Audio)
    data = await _convert(convert, record.body)
    resp = s.resp or await _open(s)
    s.sent = record.i
    await _write(s, resp, _delta(s, data, record))


def _delta(s: _Stream, data: bytes, record: Audio) -> bytes:
    s.audio_bytes += len(data)
    if s.speech.stream_format != "sse":
        return data
    if not data:
        return b""
    event: dict[str, object] = {"type": "speech.audio.delta", "audio": base64.b64encode(data).decode("ascii")}
    if s.speech.timestamps:
        event["words"] = [{"word": w, "start": (record.o + a) / 1000, "end": (record.o + b) / 1000}
                          for w, a, b in record.w]
    return _sse(event)


def _sse(event: dict[str, object]) -> bytes:
    return b"data: " + views.encode(event) + b"\n\n"


async def _write(s: _Stream, resp: web.StreamResponse, data: bytes) -> None:
    if data:
        await asyncio.wait_for(resp.write(data), s.request.app[INTAKE].cfg.speech_write_timeout_s)


async def _finish(s: _Stream, convert: Converter) -> None:
    rest = convert.close()
    resp = s.resp or await _open(s)
    if s.speech.stream_format == "sse":
        if rest:
            await _write(s, resp, _sse({"type": "speech.audio.delta", "audio": base64.b64encode(rest).decode()}))
        tokens = len(s.speech.input)
        usage = {"input_tokens": tokens, "output_tokens": 0, "total_tokens": tokens}
        await _write(s, resp, _sse({"type": "speech.audio.done", "usage": usage}))
    else:
        await _write(s, resp, rest)
    await resp.write_eof()


async def _failed(s: _Stream, reason: str) -> web.StreamResponse:
    message = f"the synthesis failed ({reason}); send the same request again to retry it"
    if s.resp is None:
        raise V1Refusal(500, "synthesis_failed", message)
    log.warning("speech stream of %s cut short: the cast failed (%s)", s.cast_id, reason)
    if s.speech.stream_format == "sse":
        await _write(s, s.resp, _sse({"type": "error", "error": {"message": message, "code": "synthesis_failed"}}))
        await s.resp.write_eof()
    elif s.request.transport is not None:
        s.request.transport.abort()  # the audio's headers are out: a cut stream is the only signal
    return s.resp
