"""Deepgram's REST TTS: ``POST /v1/speak?model=&encoding=&sample_rate=&container=&bit_rate=`` with
``{"text": ...}``, the audio streamed as it is made.

What Pipecat's ``DeepgramHttpTTSService`` and LiveKit's ``deepgram.TTS.synthesize()`` call. The
request walks the whole-text claim path of ``/v1/audio/speech`` (the screen, the body, one submit:
the same text in the same voice is the same cast) with the voices of the ``/v1/speak``
WebSocket (``speak.voice_of``: a voice id or an Aura name); the cast's log is followed as a speech
stream follows it and each chunk converted as it comes: ``linear16``, ``mulaw`` and ``alaw`` at any
rate from 8 to 48 kHz (raw or in a WAV container), ``mp3``, ``opus`` (Ogg),
``flac`` and ``aac`` at the model's 24 kHz (``formats.py``). It holds a speech stream's room (a permit and the client's seat)
(INTAKE_MAX_SPEECH_STREAMS, INTAKE_SPEECH_STREAMS_PER_CLIENT). A client that hangs up mid-stream
(a barge-in) cancels the cast it made; one that joined another request's cast leaves it be.

Refusals take Deepgram's shape, ``{"err_code", "err_msg", "request_id"}`` (``error_response``).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial

from aiohttp import web

from castlog import MAX_SPEED, MIN_SPEED, SAMPLE_RATE, cancel
from servicekit import json_response
from servicekit.answers import DeepgramError
from servicekit.forms import SpeakBody

from ..claim import Claimed, Screen, cast_url, read_body, submit
from ..context import INTAKE
from ..validate import CastForm, Refusal, decode
from .follow import settled_at
from .formats import CONTENT_TYPES, MAX_RATE, MIN_RATE, PHONE_ENCODINGS, Converter, converter, wav_header
from .speak import LISTENER_KIND, ROUTE, voice_of  # its listeners count as the WebSocket's
from .stream import STREAM_HEADERS, stream_cast
from .v1 import V1Refusal
from .views import stream_room

DEFAULT_ENCODING = "mp3"  # Deepgram's, when the query names none
# Deepgram's default rate of each raw encoding (telephony's 8 kHz for G.711).
DEFAULT_RATES = {"linear16": SAMPLE_RATE, "mulaw": 8_000, "alaw": 8_000}
# Raw audio without a container, by encoding.
_RAW_TYPES = {"linear16": "audio/l16", "mulaw": "audio/basic", "alaw": "audio/x-alaw-basic"}
# The encoded formats (Deepgram's names are ours) and the bit rates (bit/s) each takes (None: none).
BIT_RATES: dict[str, tuple[int, int] | None] = {
    "mp3": (32_000, 320_000), "opus": (4_000, 650_000), "aac": (4_000, 192_000), "flac": None,
}
# Containers each encoding takes, its default first.
_CONTAINERS = {**{e: ("wav", "none") for e in PHONE_ENCODINGS}, "opus": ("ogg",), "mp3": ("none",),
               "flac": ("none",), "aac": ("none",)}
ENCODINGS = (*PHONE_ENCODINGS, *BIT_RATES)
# Deepgram's err_code for our refusal codes that have one of its own; others are ours, upper-cased.
_ERR_CODES = {"invalid_api_key": "INVALID_AUTH"}


@dataclass(frozen=True)
class SpeakFormat:
    """What the query asked for: the encoding, its container, rate and bit rate."""

    encoding: str
    container: str
    rate: int
    bit_rate: int | None

    def converter(self) -> Converter:
        # in a `wav` container: behind a header whose sizes are unknown (a stream's, as ffmpeg writes them)
        head = wav_header(self.rate, encoding=self.encoding) if self.container == "wav" else b""
        return converter(self.encoding, bit_rate=self.bit_rate, rate=self.rate, head=head)

    @property
    def content_type(self) -> str:
        if self.encoding in PHONE_ENCODINGS:
            return CONTENT_TYPES["wav"] if self.container == "wav" else f"{_RAW_TYPES[self.encoding]};rate={self.rate}"
        return CONTENT_TYPES[self.encoding]


def _invalid(name: str, message: str) -> V1Refusal:
    return V1Refusal(422, "invalid_query_parameter", message, name)  # Deepgram's err_code, lower-cased


def _int(query: Mapping[str, str], name: str) -> int | None:
    if name not in query:
        return None
    try:
        return int(query[name])
    except ValueError:
        raise _invalid(name, f"{name} must be a whole number, not {query[name][:40]!r}") from None


def parse_audio(query: Mapping[str, str]) -> SpeakFormat:
    """The query's encoding, container, sample_rate and bit_rate, checked together; a 422 naming
    the parameter at fault and what it may be."""
    encoding = query.get("encoding", DEFAULT_ENCODING)
    if encoding not in ENCODINGS:
        raise _invalid("encoding", f"encoding must be one of {', '.join(ENCODINGS)}")
    containers = _CONTAINERS[encoding]
    container = query.get("container", containers[0])
    if container not in containers:
        raise _invalid("container", f"{encoding} comes in container {' or '.join(containers)}")
    rate, bit_rate = _int(query, "sample_rate"), _int(query, "bit_rate")
    if encoding in PHONE_ENCODINGS:
        rate = DEFAULT_RATES[encoding] if rate is None else rate
        if not MIN_RATE <= rate <= MAX_RATE:
            raise _invalid("sample_rate", f"sample_rate must be from {MIN_RATE} to {MAX_RATE}")
    elif rate not in (None, SAMPLE_RATE):
        raise _invalid("sample_rate", f"{encoding} comes at {SAMPLE_RATE} Hz: leave sample_rate out, or use "
                       "linear16, mulaw or alaw for another rate")
    allowed = BIT_RATES.get(encoding)
    if bit_rate is not None and (allowed is None or not allowed[0] <= bit_rate <= allowed[1]):
        what = f"from {allowed[0]} to {allowed[1]}" if allowed else "not set (it applies to mp3, opus and aac)"
        raise _invalid("bit_rate", f"bit_rate for {encoding} must be {what}")
    return SpeakFormat(encoding, container, rate or SAMPLE_RATE, bit_rate)


def parse_speed(query: Mapping[str, str]) -> float:
    try:
        speed = float(query.get("speed", "1.0"))
    except ValueError:
        speed = -1.0
    if not MIN_SPEED <= speed <= MAX_SPEED:
        raise _invalid("speed", f"speed must be a number from {MIN_SPEED} to {MAX_SPEED}")
    return speed


def refused_here(request: web.Request) -> bool:
    """Whether a refusal answers this route (Deepgram's shape) rather than another /v1 one."""
    return request.method == "POST" and request.path == ROUTE


def error_response(refusal: Refusal) -> web.Response:
    request_id = str(uuid.uuid4())
    body = DeepgramError(err_code=_ERR_CODES.get(refusal.code, refusal.code.upper()), err_msg=refusal.message,
                         request_id=request_id)
    return json_response(body, status=refusal.status, headers={**(refusal.headers or {}), "dg-request-id": request_id})


async def post_speak(request: web.Request) -> web.StreamResponse:
    audio, speed = parse_audio(request.query), parse_speed(request.query)  # first: a bad query costs nothing
    intake = request.app[INTAKE]
    async with stream_room(request):
        claimed, headers = await _claim(request, audio, speed)
        settled = await settled_at(intake.reader, claimed.cast_id, claimed.result)
        return await stream_cast(request, claimed.cast_id, settled, audio.converter(), headers,
                                 kind=LISTENER_KIND, hung_up=partial(_hung_up, request, claimed))


async def _claim(request: web.Request, audio: SpeakFormat, speed: float) -> tuple[Claimed, dict[str, str]]:
    """The whole-text claim path with Deepgram's body and model names; the response's headers."""
    intake = request.app[INTAKE]
    async with Screen(request) as client:
        if request.content_type != "application/json":
            raise V1Refusal(415, "unsupported_media_type", 'send the body as application/json: {"text": "..."}')
        body = await read_body(request)
        voices = await intake.voices.required(None)  # 503 warming_up before any worker published
        text = decode(body, SpeakBody, 'send {"text": "..."}').text
        model = request.query.get("model", "")
        voice = voice_of(model, voices.names, voices.default)
        claimed = await submit(request, client, CastForm(text=text, voice=voice, speed=speed))
    headers = {
        **STREAM_HEADERS, "Content-Type": audio.content_type, "dg-request-id": str(uuid.uuid4()),
        "dg-model-name": model or voice, "dg-model-uuid": voice, "dg-char-count": str(len(text)),
        "X-Cast-Id": claimed.cast_id, "Location": cast_url(claimed.cast_id),
    }
    return claimed, headers


async def _hung_up(request: web.Request, claimed: Claimed) -> None:
    """The client left (or stopped reading for INTAKE_SPEECH_WRITE_TIMEOUT_S): the cast this
    request made is cut short, as the WebSocket's turn is on a disconnect. A cast it joined is
    another request's too, and goes on."""
    if claimed.result == "new":
        await asyncio.shield(cancel(request.app[INTAKE].redis, claimed.cast_id))
