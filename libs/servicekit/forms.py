"""The request bodies and the live session's messages the services decode, each defined once:
intake decodes with these Structs, and the OpenAPI document's schemas are generated from them
(``schemas.py``), so the two cannot drift.

A field's bounds and choices are documented here (``extra_json_schema``), not checked by msgspec:
the services check them after decoding and refuse with their own words (``invalid_speed``,
``model_not_found``, ...), which a ``msgspec.Meta`` constraint would replace with msgspec's.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from castlog import MAX_SPEED, MIN_SPEED

# Every name a client may send for the one model (OpenAI's names, and Kokoro-FastAPI's).
MODELS = ("kokoro", "tts-1", "tts-1-hd", "gpt-4o-mini-tts")
# The audio formats of /v1/audio/speech (intake's speech/formats.py has a MIME type for each).
SPEECH_FORMATS = ("mp3", "opus", "aac", "flac", "wav", "pcm")
STREAM_FORMATS = ("audio", "sse")
# `volume_multiplier` (Kokoro-FastAPI's): a gain on the samples, clipped.
MIN_VOLUME, MAX_VOLUME = 0.0, 4.0
# An open cast's speed factor: below and above these, Kokoro's live speech turns unintelligible.
LIVE_MIN_SPEED, LIVE_MAX_SPEED = 0.5, 2.0
# A live session's audio: a standalone MP3 chunk per sentence, or s16le mono 24 kHz PCM.
LIVE_FORMATS = ("mp3", "pcm")


def _about(description: str | None = None, **schema: Any) -> msgspec.Meta:
    """A field's description and its documented bounds: the schema's alone, never checked on decode."""
    return msgspec.Meta(description=description, extra_json_schema=schema or None)


class CastForm(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The fields of a submission as sent; unknown fields and wrong types are refused (422)."""

    text: Annotated[str, _about("The text to read out: normalised (NFC, control characters but newlines and tabs "
                                "removed, stripped), it must not be empty after that")]
    voice: Annotated[str | None, _about("One of GET /api/voices; the default when empty.")] = None
    title: Annotated[str | None, _about("Defaults to the first words of the text.")] = None
    speed: Annotated[float | None, _about("1.0 when absent; part of the cast's identity",
                                          minimum=MIN_SPEED, maximum=MAX_SPEED)] = None


class OpenForm(msgspec.Struct, frozen=True):
    """POST /api/casts with live: true opens a cast without its text (201 with the id)"""

    live: Annotated[bool, _about(const=True)]
    voice: str | None = None
    title: str | None = None
    speed: Annotated[float, _about(minimum=LIVE_MIN_SPEED, maximum=LIVE_MAX_SPEED)] = 1.0


class TextForm(msgspec.Struct, frozen=True):
    """A fragment of an open cast's text, at the offset where it starts"""

    text: str
    offset: Annotated[int, _about("characters sent before this fragment", minimum=0)]
    flush: Annotated[bool, _about("speak what is buffered now, sentence complete or not")] = False


class CloseForm(msgspec.Struct, frozen=True):
    """Closes an open cast's text; with offset, only if the text is that long"""

    offset: Annotated[int | None, _about("the text's length as sent", minimum=0)] = None


class SpeechRequest(msgspec.Struct, frozen=True):
    """``POST /v1/audio/speech``'s body: OpenAI's fields, ``timestamps`` (our own, sent through the
    SDK's ``extra_body``) and Kokoro-FastAPI's (``lang_code`` to ``download_format``). Fields that
    change nothing here are named in the X-Ignored-Fields header; unknown ones are accepted and
    named in X-Unknown-Fields."""

    model: Annotated[str, _about("all the one model, Kokoro-82M", enum=MODELS)]
    input: Annotated[str, _about("the text (at most INTAKE_MAX_CHARS)")]
    voice: Annotated[str, _about("a voice id (GET /v1/audio/voices), or one of OpenAI's names (alloy, ash, ballad, "
                                 "coral, echo, fable, onyx, nova, sage, shimmer, verse, cedar, marin): the closest "
                                 "English pack installed; or a weighted blend, af_bella(2)+af_sky(1)")]
    response_format: Annotated[str, _about(enum=SPEECH_FORMATS)] = "mp3"
    speed: Annotated[float, _about("part of the cast's identity", minimum=MIN_SPEED, maximum=MAX_SPEED)] = 1.0
    stream_format: Annotated[str, _about("sse: speech.audio.delta events, then speech.audio.done",
                                         enum=STREAM_FORMATS)] = "audio"
    instructions: Annotated[str | None, _about("accepted and not used")] = None
    timestamps: Annotated[bool, _about("sse only: each delta event carries its words with start and end seconds")] = False
    lang_code: Annotated[str | None, _about("a, b, j, z, e, f, h, i or p: an OpenAI name picks a voice of that "
                                            "language")] = None
    stream: Annotated[bool, _about("false answers one whole file with its Content-Length")] = True
    volume_multiplier: Annotated[float, _about("a gain on the samples (clipped)", minimum=MIN_VOLUME,
                                               maximum=MAX_VOLUME)] = 1.0
    normalization_options: Annotated[dict[str, Any] | None, _about("accepted and not used: the text is always "
                                                                   "normalised")] = None
    return_download_link: Annotated[bool, _about("X-Download-Path names the cast's MP3")] = False
    download_format: Annotated[str | None, _about("accepted and not used")] = None


class SpeakBody(msgspec.Struct, frozen=True):
    """Deepgram's body; other fields are accepted and ignored, as Deepgram does."""

    text: Annotated[str, _about("the whole text (INTAKE_MAX_CHARS at most)")]


# ---- the live session's client messages (the WebSocket's and the WebRTC control channel's) -----


class StartMessage(msgspec.Struct, frozen=True, tag="start", tag_field="type"):
    """First, once: the session's cast"""

    voice: str | None = None
    title: str | None = None
    speed: Annotated[float, _about(minimum=LIVE_MIN_SPEED, maximum=LIVE_MAX_SPEED)] = 1.0
    format: Annotated[str | None, _about("mp3 when not given", enum=[*LIVE_FORMATS, None])] = None
    keep: Annotated[bool, _about("the cast goes on when the client disconnects (else it is cancelled)")] = False


class TextMessage(msgspec.Struct, frozen=True, tag="text", tag_field="type"):
    """A fragment of the text (the session counts the offsets)"""

    text: str
    flush: bool = False


class FlushMessage(msgspec.Struct, frozen=True, tag="flush", tag_field="type"):
    """Speak what the text holds now, however short."""


class CloseMessage(msgspec.Struct, frozen=True, tag="close", tag_field="type"):
    """The text is complete: the rest is spoken, then ``done``."""


class CancelMessage(msgspec.Struct, frozen=True, tag="cancel", tag_field="type"):
    """Barge-in: the text not yet spoken is dropped, the cast ends at the chunk in hand."""


LiveMessage = StartMessage | TextMessage | FlushMessage | CloseMessage | CancelMessage
