"""The JSON bodies the services answer, each defined once: a handler encodes one of these Structs,
and the OpenAPI document's response schemas are generated from them (``schemas.py``), so the bytes
and the schema cannot drift. ``forms.py`` holds the request bodies.

``forbid_unknown_fields`` puts ``additionalProperties: false`` in the schema: a body has no field
its Struct lacks, as it is encoded from one. A field that only some answers carry is ``UNSET``
(left out of the bytes and of the schema's ``required``).
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import UNSET, Meta, UnsetType

from castlog import SubmitResult
from castlog.state import Status
from castlog.streams import CastId
from castlog.voicemeta import VoiceInfo

ERROR_CODES = (
    "malformed_json", "malformed_form", "invalid_field", "invalid_text", "empty_text", "text_too_long",
    "title_too_long", "unknown_voice", "unsupported_media_type", "body_too_large", "too_large", "bad_request",
    "rate_limited", "too_many_streams", "range_not_satisfiable", "not_found", "method_not_allowed", "busy",
    "unavailable", "redis_unavailable", "tail_down", "internal", "warming_up",
)  # fmt: skip

TextEnd = Annotated[int, Meta(description="the text's end: where the next fragment starts")]


class Answer(msgspec.Struct, forbid_unknown_fields=True):
    """The base of every answer: no field beyond its own."""


class Error(Answer):
    """Every refusal's body (but /v1's and Deepgram's, in their own shapes)."""

    error: Annotated[str, Meta(description="A stable code, e.g. " + ", ".join(ERROR_CODES))]
    message: Annotated[str, Meta(description="What to do about it")]


class LiveError(Error):
    """A live text route's refusal: where the text ends, to go on from, when the text log refused."""

    offset: TextEnd | UnsetType = UNSET


class Health(Answer):
    """/healthz and /readyz when all is well, with what the service adds."""

    status: Literal["ok"]
    listeners: Annotated[int | UnsetType, Meta(description="edge: listeners of this process")] = UNSET
    watched: Annotated[int | UnsetType, Meta(description="edge: casts its shared tail follows")] = UNSET
    voices: Annotated[int | None | UnsetType, Meta(description="intake /readyz: voices published (null: none yet)")] = UNSET
    default: Annotated[str | None | UnsetType, Meta(description="intake /readyz: the default voice")] = UNSET
    phase: Annotated[str | UnsetType, Meta(description="synth /healthz: loading, warming or running")] = UNSET
    consumer: Annotated[str | UnsetType, Meta(description="synth: the worker's consumer name")] = UNSET
    backend: Annotated[str | None | UnsetType, Meta(description="synth /readyz: the model's backend")] = UNSET
    active_casts: Annotated[int | UnsetType, Meta(description="synth /readyz: casts the worker makes now")] = UNSET


class Cast(Answer):
    """A submitted cast: its link."""

    id: CastId
    url: Annotated[str, Meta(description="The cast's page, /c/<id>")]
    status: SubmitResult


class Voices(Answer):
    """The voices a cast may ask for (GET /api/voices)."""

    voices: list[str]
    default: str
    source: Annotated[str, Meta(extra_json_schema={"enum": ["worker", "config"]})]
    backend: str | None
    details: Annotated[list[VoiceInfo], Meta(description="each voice of `voices`, in the same order: its language "
                                             "(American English, …), lang (a BCP 47 tag; empty if unknown), gender "
                                             "(female, male or empty) and display name (Heart)")]


class Deleted(Answer):
    """An admin's delete: done (200), or asked and not confirmed in time (202)."""

    id: CastId
    deleted: bool
    status: Literal["asked"] | UnsetType = UNSET
    message: str | UnsetType = UNSET


class Cancelled(Answer):
    """A cancel taken: the worker cuts the cast short at the chunk in hand."""

    id: CastId
    url: str
    cancelled: Literal[True]


class LiveOpened(Answer):
    """201 to POST /api/casts with live: true"""

    id: Annotated[str, Meta(description="the cast's public id: it reads, never writes")]
    url: str
    status: Literal["open"]
    offset: int
    voice: str
    text: Annotated[str, Meta(description="the route for fragments")]
    close: Annotated[str, Meta(description="the route that closes the text")]
    write_token: Annotated[str, Meta(description="secret: send it as Authorization: Bearer <write_token> to /text "
                                     "and /close; shown once, never stored in clear")]


class LiveState(Answer):
    """A fragment taken (appended), or a resend (duplicate)."""

    id: str
    status: Annotated[str, Meta(extra_json_schema={"enum": ["appended", "duplicate"]})]
    offset: TextEnd


class LiveClosed(Answer):
    """An open cast's text closed (idempotent)."""

    id: str
    url: str
    status: Literal["closed"]
    offset: TextEnd
    content_id: Annotated[str, Meta(description="the content id of the final text")]


class Links(Answer):
    """A cast's routes."""

    player: str
    audio: str
    events: str
    records: str
    captions: str


# castlog's CastState: each of its public fields and properties, by the same name (edge copies them).
class CastState(Answer):
    """A cast's state, derived from its log."""

    id: CastId
    title: str
    voice: str
    speed: float
    chars: int
    status: Status
    planned: Annotated[int, Meta(description="planned sentences")]
    finished: Annotated[int, Meta(description="sentences in the playable audio")]
    reused: Annotated[int, Meta(description="of those, made from synth's chunk cache (not the model)")]
    audio_ms: int
    attempts: int
    resume_from: Annotated[int, Meta(description="the first sentence index the latest attempt writes")]
    error: str | None
    cancelled: Annotated[bool, Meta(description="the cast was cut short by a cancel: it replays what was spoken")]
    tail: Annotated[int, Meta(description="the next seq_num")]
    queue_position: Annotated[int | None, Meta(description="waiting before its first audio: its place in line "
                                               "(1: next); null otherwise")]
    starts_in_ms: Annotated[int | None, Meta(description="waiting: about how long until its audio starts, as of "
                                             "queue_at (null: not known yet)")]
    queue_at: Annotated[int, Meta(description="ms since the epoch when the place and estimate were noted (0: never "
                                  "queued)")]
    links: Links


class RecordPage(Answer):
    """A page of a cast's records, from seq_num."""

    # Each record comes encoded already (fanout's ``Item``: once, however many read it).
    records: list[Annotated[msgspec.Raw, Meta(extra_json_schema={"$ref": "#/components/schemas/Record"})]]
    next_seq_num: Annotated[int, Meta(description="where the next page starts")]
    tail: Annotated[int, Meta(description="records in the log")]
    closed: Annotated[bool, Meta(description="the log ended (eos or error) and all was read")]


# ---- OpenAI's shapes (/v1/*) and Deepgram's (POST /v1/speak) ------------------------------------


class OpenAIErrorDetail(Answer):
    message: str
    type: str
    param: str | None
    code: str


class OpenAIError(Answer):
    """OpenAI's error shape: every refusal of /v1/* (but POST /v1/speak)."""

    error: OpenAIErrorDetail


class Model(Answer):
    id: str
    object: Literal["model"]
    created: int
    owned_by: str


class ModelList(Answer):
    """The model's names, as OpenAI lists models."""

    object: Literal["list"]
    data: list[Model]


class AudioModel(Answer):
    id: str


class AudioModels(Answer):
    """Models as Open WebUI reads them."""

    models: list[AudioModel]


class V1Voice(Answer):
    id: str
    name: str


class V1Voices(Answer):
    """Voices as Open WebUI and Kokoro-FastAPI read them: the installed ids, OpenAI's names that map
    to one, the blends used lately."""

    voices: list[V1Voice]
    default: str


class DeepgramError(Answer):
    """Deepgram's error shape: every refusal of POST /v1/speak"""

    err_code: Annotated[str, Meta(description="INVALID_QUERY_PARAMETER, INVALID_AUTH, or intake's refusal code "
                                  "upper-cased (TOO_MANY_STREAMS, RATE_LIMITED, ...)")]
    err_msg: Annotated[str, Meta(description="what is wrong and what to do")]
    request_id: Annotated[str, Meta(description="also the dg-request-id header")]


ANSWERS: tuple[type[Answer], ...] = (
    Error, LiveError, Health, Cast, Voices, Deleted, Cancelled, LiveOpened, LiveState, LiveClosed, CastState,
    RecordPage, OpenAIError, ModelList, AudioModels, V1Voices, DeepgramError,
)  # fmt: skip
