"""The speech room's HTTP handlers: ``POST /v1/audio/speech`` and OpenAI's model and voice lists.

A speech request is a submit like ``POST /api/casts``: it walks the claim path (``claim.py``)
with OpenAI's body, so an identical request is the same cast (it joins the live one or replays
the finished one); then ``stream.py`` answers with the cast's audio as it is made.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from aiohttp import web

from castlog import canonical_voice
from servicekit import json_response
from servicekit.answers import AudioModel, AudioModels, ModelList, V1Voices

from ..claim import Claimed, Screen, read_body, request_tag, submit
from ..context import INTAKE, request_client
from ..validate import CastForm
from . import v1
from .follow import settled_at
from .stream import stream_speech
from .v1 import SpeechRequest, V1Refusal, parse_speech, resolve_voice
from .whole import whole_cast


async def post_speech(request: web.Request) -> web.StreamResponse:
    intake = request.app[INTAKE]
    async with stream_room(request):
        speech, claimed, headers = await _claim(request)
        settled = await settled_at(intake.reader, claimed.cast_id, claimed.result)
        if not speech.stream and speech.stream_format == "audio":
            return await whole_cast(speech, claimed.cast_id, intake.tail, intake.reader, settled, headers)
        return await stream_speech(request, speech, claimed.cast_id, settled, headers)


@asynccontextmanager
async def stream_room(request: web.Request) -> AsyncIterator[None]:
    """A speech stream's places for the block's length: one of INTAKE_MAX_SPEECH_STREAMS and one of
    the client's INTAKE_SPEECH_STREAMS_PER_CLIENT (``/v1/audio/speech`` and Deepgram's HTTP
    ``/v1/speak`` alike); the block's task is among the streams a shutdown ends (``close_streams``)."""
    intake = request.app[INTAKE]
    permits, seats = intake.speech_permits, intake.speech_seats
    if permits.locked():
        limit = intake.cfg.max_speech_streams
        raise V1Refusal(429, "too_many_streams", f"{limit} speech streams are open; retry when one ends")
    async with permits:
        seat, _ = await seats.acquire(request_client(request))
        if seat is None:
            raise V1Refusal(429, "too_many_streams", f"your address has {seats.cap} speech streams open; "
                            "retry when one ends")
        task = asyncio.current_task()
        assert task is not None  # (a handler runs in a task)
        intake.speech_streams.add(task)
        try:
            yield
        finally:
            intake.speech_streams.discard(task)
            await seats.release(seat)


async def close_streams(app: web.Application) -> None:
    """On shutdown: end every speech stream now (a stream waits on the cast for as long as it
    takes; the cast goes on, and the same request replays it)."""
    if INTAKE not in app:  # Redis never answered: no stream opened
        return
    for task in list(app[INTAKE].speech_streams):
        task.cancel()


async def _claim(request: web.Request) -> tuple[SpeechRequest, Claimed, dict[str, str]]:
    """The claim path with OpenAI's body: the screen, the body, the voice list, parse, submit;
    with the headers that name what the request sent and this server did not use."""
    intake = request.app[INTAKE]
    async with Screen(request) as client:
        if request.content_type != "application/json":
            raise V1Refusal(415, "unsupported_media_type", "send the body as application/json")
        body = await read_body(request)
        installed = (await intake.voices.required(None)).names  # 503 warming_up before any list
        parsed = parse_speech(body)
        speech = parsed.request
        voice = resolve_voice(speech.voice, installed, speech.lang_code)
        form = CastForm(text=speech.input, voice=voice, speed=speech.speed)
        claimed = await submit(request, client, form)
        v1.note_blend(intake.blends, request_tag(request, client), canonical_voice(voice))
        headers = v1.field_headers(parsed, v1.took_lang(voice, speech.lang_code))
        if speech.return_download_link:
            headers[v1.DOWNLOAD_HEADER] = f"/api/casts/{claimed.cast_id}/audio.mp3"
        return speech, claimed, headers


async def get_v1_voices(request: web.Request) -> web.Response:
    """Open WebUI's and Kokoro-FastAPI's shape: ``{"voices": [{"id", "name"}]}``."""
    voices = await request.app[INTAKE].voices.required(None)  # 503 warming_up before any worker published
    tag = request_tag(request, request_client(request))
    blends = list(request.app[INTAKE].blends.get(tag, ()))  # only those this tenant used
    return json_response(V1Voices(voices=v1.voice_list(voices.names, blends), default=voices.default))


async def get_v1_audio_models(request: web.Request) -> web.Response:
    return json_response(AudioModels(models=[AudioModel(id=m) for m in v1.MODELS]))


async def get_v1_models(request: web.Request) -> web.Response:
    return json_response(ModelList(object="list", data=[v1.model_card(m) for m in v1.MODELS]))


async def get_v1_model(request: web.Request) -> web.Response:
    model = request.match_info["model"]
    if model not in v1.MODELS:
        raise V1Refusal(404, "model_not_found", f"no such model; use one of {', '.join(v1.MODELS)}", "model")
    return json_response(v1.model_card(model))
