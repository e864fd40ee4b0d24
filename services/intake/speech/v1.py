"""OpenAI's speech API as StreamTTS reads it (`/v1/*`): the request, model aliases, voice names, errors.

Pure functions, no I/O (like ``validate.py``): a refused request leaves no key behind. Its
refusals are ``V1Refusal``, a ``Refusal`` that names the field at fault (OpenAI's ``param``).
"""

from __future__ import annotations

from typing import Any

import msgspec
from aiohttp import web

from castlog import MAX_SPEED, MIN_SPEED
from servicekit import json_response

from ..validate import Refusal
from .formats import FORMATS

# Every name a client may send for the one model (OpenAI's names, and Kokoro-FastAPI's).
MODELS = ("kokoro", "tts-1", "tts-1-hd", "gpt-4o-mini-tts")
MODEL_CREATED = 1_735_689_600  # 2025-01-01: when Kokoro-82M v1.0 was published
STREAM_FORMATS = ("audio", "sse")
# OpenAI's voice names -> Kokoro's English packs, closest first (same name, then same gender
# and accent); the first one installed is used.
OPENAI_VOICES: dict[str, tuple[str, ...]] = {
    "alloy": ("af_alloy", "af_heart", "af_bella", "af_sarah"),
    "ash": ("am_adam", "am_michael", "am_echo"),
    "ballad": ("bm_george", "bm_fable", "bm_lewis"),
    "coral": ("af_kore", "af_heart", "af_bella"),
    "echo": ("am_echo", "am_michael", "am_adam"),
    "fable": ("bm_fable", "bm_george", "bm_lewis", "bf_emma"),
    "onyx": ("am_onyx", "am_fenrir", "am_michael", "am_adam"),
    "nova": ("af_nova", "af_bella", "af_heart", "af_sarah"),
    "sage": ("af_sarah", "af_sky", "af_heart"),
    "shimmer": ("af_sky", "af_nicole", "af_heart", "af_bella"),
    "verse": ("am_puck", "am_liam", "am_michael"),
}
# OpenAI's error types by status.
_ERROR_TYPES = {401: "authentication_error", 404: "not_found_error", 429: "rate_limit_error"}


class SpeechRequest(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``POST /v1/audio/speech``'s body. ``timestamps`` (our own, sent through the SDK's
    ``extra_body``) asks for word timings in the ``sse`` events."""

    model: str
    input: str
    voice: str
    response_format: str = "mp3"
    speed: float = 1.0
    stream_format: str = "audio"
    instructions: str | None = None
    timestamps: bool = False


class V1Refusal(Refusal):
    """A refusal that names the request field at fault (OpenAI's ``param``)."""

    def __init__(self, status: int, code: str, message: str, param: str | None = None) -> None:
        super().__init__(status, code, message)
        self.param = param


_decode = msgspec.json.Decoder(SpeechRequest).decode


def parse_speech(body: bytes) -> SpeechRequest:
    try:
        request = _decode(body)
    except msgspec.ValidationError as exc:
        raise V1Refusal(422, "invalid_field", str(exc), _field_of(str(exc))) from None
    except (msgspec.DecodeError, RecursionError) as exc:
        raise V1Refusal(400, "malformed_json", f"the body is not valid UTF-8 JSON ({exc})") from None
    _check_choices(request)
    return request


def _check_choices(request: SpeechRequest) -> None:
    if request.model not in MODELS:
        raise V1Refusal(422, "model_not_found", f"no such model; use one of {', '.join(MODELS)}", "model")
    if request.response_format not in FORMATS:
        raise V1Refusal(422, "invalid_field", f"`response_format` must be one of {', '.join(FORMATS)}",
                        "response_format")
    if request.stream_format not in STREAM_FORMATS:
        raise V1Refusal(422, "invalid_field", "`stream_format` must be audio or sse", "stream_format")
    if request.instructions:
        raise V1Refusal(422, "unsupported_field", "Kokoro takes no `instructions`; leave them out", "instructions")
    if not MIN_SPEED <= request.speed <= MAX_SPEED:
        raise V1Refusal(422, "invalid_field", f"`speed` must be from {MIN_SPEED} to {MAX_SPEED}", "speed")
    if request.timestamps and request.stream_format != "sse":
        raise V1Refusal(422, "invalid_field", "`timestamps` come in the sse events: set stream_format=sse",
                        "timestamps")


def _field_of(message: str) -> str | None:
    """The field a msgspec error names: ``... at `$.speed``` or ``unknown field `x```."""
    for marker in ("`$.", "field `"):
        at = message.find(marker)
        if at >= 0:
            rest = message[at + len(marker):]
            return rest[: rest.find("`")] if "`" in rest else rest
    return None


def resolve_voice(voice: str, installed: tuple[str, ...]) -> str:
    """A voice id as installed: our own ids pass, OpenAI's names map to the closest English pack."""
    if voice in installed:
        return voice
    candidates = OPENAI_VOICES.get(voice.lower())
    if candidates is None:
        raise V1Refusal(422, "unknown_voice", f"no such voice {voice!r}; see GET /v1/audio/voices", "voice")
    for candidate in candidates:
        if candidate in installed:
            return candidate
    raise V1Refusal(
        422, "voice_not_installed",
        f"{voice!r} needs one of the English packs {', '.join(candidates)}; install them "
        "(streamtts voices install) or pick a voice from GET /v1/audio/voices", "voice",
    )


def voice_list(installed: tuple[str, ...]) -> list[dict[str, str]]:
    """Every voice a request may name: the installed ids, then OpenAI's names that map to one."""
    out = [{"id": v, "name": v} for v in installed]
    for name, candidates in OPENAI_VOICES.items():
        target = next((c for c in candidates if c in installed), None)
        if target is not None:
            out.append({"id": name, "name": f"{name} ({target})"})
    return out


def model_list() -> dict[str, Any]:
    return {"object": "list", "data": [model_card(m) for m in MODELS]}


def model_card(model: str) -> dict[str, Any]:
    return {"id": model, "object": "model", "created": MODEL_CREATED, "owned_by": "streamtts"}


def error_body(status: int, code: str, message: str, param: str | None = None) -> dict[str, Any]:
    """OpenAI's error shape."""
    kind = _ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


# The request field behind intake's own refusal codes, for OpenAI's ``param``.
_PARAMS = {"empty_text": "input", "text_too_long": "input", "invalid_text": "input", "unknown_voice": "voice"}


def param_of(code: str, message: str) -> str | None:
    return _PARAMS.get(code) or (_field_of(message) if code == "invalid_field" else None)


def error_response(refusal: Refusal) -> web.Response:
    """Any refusal on ``/v1/*`` in OpenAI's shape: a ``V1Refusal``'s own param, else the field
    that intake's refusal code points at."""
    named = refusal.param if isinstance(refusal, V1Refusal) else None
    body = error_body(refusal.status, refusal.code, refusal.message, named or param_of(refusal.code, refusal.message))
    return json_response(body, status=refusal.status, headers=refusal.headers or None)
