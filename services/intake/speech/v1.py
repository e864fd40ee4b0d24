"""OpenAI's speech API as StreamTTS reads it (`/v1/*`): the request, model aliases, voice names, errors.

Pure functions, no I/O (like ``validate.py``): a refused request leaves no key behind. Its
refusals are ``V1Refusal``, a ``Refusal`` that names the field at fault (OpenAI's ``param``).

Lenient, as a drop-in must be: fields of OpenAI's and Kokoro-FastAPI's requests that mean
nothing here (``instructions``, ``normalization_options``, ...) and fields nobody defined are
accepted and named in the response's ``X-Ignored-Fields`` and ``X-Unknown-Fields`` headers;
``/api/casts`` stays strict.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import msgspec
from aiohttp import web

from castlog import (
    MAX_SPEED,
    MIN_SPEED,
    BlendError,
    blend_parts,
    describe_voice,
    is_blend,
    voice_available,
    voice_order,
)
from servicekit import json_response
from servicekit.answers import Model, OpenAIError, OpenAIErrorDetail, V1Voice
from servicekit.forms import MAX_VOLUME, MIN_VOLUME, MODELS, STREAM_FORMATS, SpeechRequest

from ..validate import Refusal, decode
from .formats import FORMATS

MODEL_CREATED = 1_735_689_600  # 2025-01-01: when Kokoro-82M v1.0 was published
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
    "cedar": ("am_michael", "am_fenrir", "am_adam"),
    "marin": ("af_heart", "af_bella", "af_sarah"),
}
# Kokoro-FastAPI's `lang_code`: the first letter of the voice ids of that language.
LANG_CODES = frozenset("abjzefhip")
# Headers that name what a request sent and this server does not use.
IGNORED_HEADER = "X-Ignored-Fields"
UNKNOWN_HEADER = "X-Unknown-Fields"
DOWNLOAD_HEADER = "X-Download-Path"  # Kokoro-FastAPI's, for `return_download_link`
# Unknown field names listed in the header at most (a body may hold thousands).
LISTED_UNKNOWN = 16
# Voice blends GET /v1/audio/voices lists once used (the newest; per tenant, per intake process).
LISTED_BLENDS = 32
# Tenants whose blends are remembered (the most recent; without API keys a tenant is an address).
BLEND_TENANTS = 1024
# OpenAI's error types by status.
_ERROR_TYPES = {401: "authentication_error", 404: "not_found_error", 429: "rate_limit_error"}


@dataclass(frozen=True)
class Speech:
    """A parsed request, and the names of the fields it sent that are not ``SpeechRequest``'s."""

    request: SpeechRequest
    unknown: tuple[str, ...] = ()

    def ignored(self, voice_took_lang: bool) -> list[str]:
        """The known fields that were sent and change nothing here."""
        r = self.request
        out = ["instructions"] if r.instructions else []
        if r.lang_code and not voice_took_lang:
            out.append("lang_code")
        if r.normalization_options is not None:
            out.append("normalization_options")  # the text is always normalised for reading
        if r.download_format is not None:
            out.append("download_format")
        if not r.stream and r.stream_format == "sse":
            out.append("stream")
        return out


class V1Refusal(Refusal):
    """A refusal that names the request field at fault (OpenAI's ``param``)."""

    def __init__(self, status: int, code: str, message: str, param: str | None = None) -> None:
        super().__init__(status, code, message)
        self.param = param


_decode_names = msgspec.json.Decoder(dict[str, msgspec.Raw]).decode
_KNOWN = frozenset(SpeechRequest.__struct_fields__)
SPEECH_SHAPE = 'send {"model", "input": string, "voice": string, ...} (see OpenAI\'s speech API)'


def parse_speech(body: bytes) -> Speech:
    """The request (a 422 names its field in the refusal's message: ``error_response`` finds it), and
    the names of the fields it sent (an object's: once it decoded as one, they do too)."""
    request = decode(body, SpeechRequest, SPEECH_SHAPE)
    names = _decode_names(body)
    _check_choices(request)
    return Speech(request, tuple(sorted(n for n in names if n not in _KNOWN)))


def field_headers(speech: Speech, voice_took_lang: bool) -> dict[str, str]:
    """The headers that name the fields sent but not used (none when all were)."""
    headers = {}
    ignored = speech.ignored(voice_took_lang)
    if ignored:
        headers[IGNORED_HEADER] = ", ".join(ignored)
    if speech.unknown:
        listed = [_header_safe(n) for n in speech.unknown[:LISTED_UNKNOWN]]
        headers[UNKNOWN_HEADER] = ", ".join(listed) + (", ..." if len(speech.unknown) > LISTED_UNKNOWN else "")
    return headers


def _header_safe(name: str) -> str:
    """A field name as a header may carry it: printable ASCII, no commas, bounded."""
    return "".join(c if c.isascii() and c.isprintable() and c != "," else "?" for c in name[:64])


def _check_choices(request: SpeechRequest) -> None:
    if request.model not in MODELS:
        raise V1Refusal(422, "model_not_found", f"no such model; use one of {', '.join(MODELS)}", "model")
    if request.response_format not in FORMATS:
        raise V1Refusal(422, "invalid_field", f"`response_format` must be one of {', '.join(FORMATS)}",
                        "response_format")
    if request.stream_format not in STREAM_FORMATS:
        raise V1Refusal(422, "invalid_field", "`stream_format` must be audio or sse", "stream_format")
    if request.lang_code is not None and request.lang_code.lower() not in LANG_CODES:
        raise V1Refusal(422, "invalid_field", f"`lang_code` must be one of {', '.join(sorted(LANG_CODES))}", "lang_code")
    if not MIN_VOLUME <= request.volume_multiplier <= MAX_VOLUME:
        raise V1Refusal(422, "invalid_field", f"`volume_multiplier` must be from {MIN_VOLUME} to {MAX_VOLUME}",
                        "volume_multiplier")
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


def resolve_voice(voice: str, installed: tuple[str, ...], lang_code: str | None = None) -> str:
    """A voice id as installed: our own ids pass, OpenAI's names map to the closest English pack
    (of ``lang_code``'s language when one is installed), a blend's names each so."""
    if is_blend(voice):
        return _resolve_blend(voice, installed, lang_code)
    if voice in installed:
        return voice
    candidates = OPENAI_VOICES.get(voice.lower())
    if candidates is None:
        raise V1Refusal(422, "unknown_voice", f"no such voice {voice!r}; see GET /v1/audio/voices", "voice")
    for candidate in candidates:
        if candidate in installed:
            return _in_language(candidate, installed, lang_code)
    raise V1Refusal(
        422, "voice_not_installed",
        f"{voice!r} needs one of the English packs {', '.join(candidates)}; install them "
        "(streamtts voices install) or pick a voice from GET /v1/audio/voices", "voice",
    )


def _in_language(voice: str, installed: tuple[str, ...], lang_code: str | None) -> str:
    """``voice``, or the first installed voice of ``lang_code``'s language and the same gender."""
    lang = (lang_code or "").lower()
    if not lang or voice[:1] == lang:
        return voice
    same = sorted((v for v in installed if v[:1] == lang and v[1:2] == voice[1:2]), key=voice_order)
    return same[0] if same else voice


def took_lang(voice: str, lang_code: str | None) -> bool:
    """Whether the resolved voice reads in ``lang_code``'s language (the field was honoured)."""
    return not lang_code or describe_voice(voice).lang == describe_voice(lang_code.lower() + "f_x").lang


def _resolve_blend(voice: str, installed: tuple[str, ...], lang_code: str | None) -> str:
    try:
        parts = blend_parts(voice)
    except BlendError as exc:
        raise V1Refusal(422, "unknown_voice", str(exc), "voice") from None
    resolved = [(resolve_voice(name, installed, lang_code), weight) for name, weight in parts]
    return "+".join(f"{name}({weight:g})" for name, weight in resolved)


def note_blend(blends: dict[str, dict[str, None]], tenant: str, voice: str) -> None:
    """Remember a blend ``tenant`` claimed a cast with (its newest LISTED_BLENDS, for the newest
    BLEND_TENANTS tenants): another tenant's are not listed to it."""
    if not is_blend(voice):
        return
    own = blends.pop(tenant, {})
    blends[tenant] = own
    own.pop(voice, None)
    own[voice] = None
    while len(own) > LISTED_BLENDS:
        own.pop(next(iter(own)))
    while len(blends) > BLEND_TENANTS:
        blends.pop(next(iter(blends)))


def voice_list(installed: tuple[str, ...], blends: Iterable[str] = ()) -> list[V1Voice]:
    """Every voice a request may name: the installed ids, OpenAI's names that map to one, then
    the blends used lately."""
    out = [V1Voice(id=v, name=v) for v in installed]
    for name, candidates in OPENAI_VOICES.items():
        target = next((c for c in candidates if c in installed), None)
        if target is not None:
            out.append(V1Voice(id=name, name=f"{name} ({target})"))
    out += [V1Voice(id=b, name=f"{b} (blend)") for b in blends if voice_available(b, installed)]
    return out


def model_card(model: str) -> Model:
    return Model(id=model, object="model", created=MODEL_CREATED, owned_by="streamtts")


# The request field behind intake's own refusal codes, for OpenAI's ``param``.
_PARAMS = {"empty_text": "input", "text_too_long": "input", "invalid_text": "input", "unknown_voice": "voice"}


def error_response(refusal: Refusal) -> web.Response:
    """Any refusal on ``/v1/*`` in OpenAI's shape: a ``V1Refusal``'s own param, else the field
    that intake's refusal code points at."""
    code, message, status = refusal.code, refusal.message, refusal.status
    named = refusal.param if isinstance(refusal, V1Refusal) else None
    param = named or _PARAMS.get(code) or (_field_of(message) if code == "invalid_field" else None)
    kind = _ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    body = OpenAIError(OpenAIErrorDetail(message=message, type=kind, param=param, code=code))
    return json_response(body, status=status, headers=refusal.headers or None)
