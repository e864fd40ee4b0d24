"""The OpenAPI 3.1 document of the public origin: intake's routes and edge's, as plain data.

Intake serves it at ``/api/openapi.json`` (the front proxy sends that path to intake) and edge
the same document at ``/api/edge/openapi.json``. Services never import each other, so both route
tables live here. Each service fills in the limits it knows from its own config; a limit of the
other service is named by its setting instead of a number the serving process cannot know.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

from castlog import MAX_SEQ_NUM

from .openapi_live import LIVE_SCHEMAS, live_paths
from .openapi_v1 import V1_PATHS, V1_SCHEMAS
from .schemas import cast_state_properties, header_schemas, record_kinds

OPENAPI_VERSION = "3.1.0"
API_VERSION = "1.0.0"
ERROR_CODES = (
    "malformed_json", "malformed_form", "invalid_field", "invalid_text", "empty_text", "text_too_long",
    "title_too_long", "unknown_voice", "unsupported_media_type", "body_too_large", "too_large", "bad_request",
    "rate_limited", "too_many_streams", "range_not_satisfiable", "not_found", "method_not_allowed", "busy",
    "unavailable", "redis_unavailable", "tail_down", "internal", "warming_up",
)  # fmt: skip
CAST_ID_PATTERN = "^[A-Za-z0-9_-]{12}$"

Json = dict[str, Any]


@dataclass(frozen=True)
class IntakeLimits:
    """Intake's documented limits (INTAKE_MAX_CHARS, INTAKE_MAX_TITLE_CHARS, INTAKE_MAX_BODY_BYTES)."""

    max_chars: int
    max_title_chars: int
    max_body_bytes: int


@dataclass(frozen=True)
class EdgeLimits:
    """Edge's documented limits (EDGE_MAX_RECORDS_LIMIT, EDGE_MAX_WAIT_S)."""

    max_records_limit: int
    max_wait_s: float


def document(intake: IntakeLimits | None = None, edge: EdgeLimits | None = None) -> Json:
    """A fresh document of every public route, with the limits given (a caller may change it freely)."""
    doc = {
        "openapi": OPENAPI_VERSION,
        "info": {
            "title": "StreamTTS",
            "version": API_VERSION,
            "description": "Submit a text and get its cast's link at once (intake); replay and follow the "
            "cast's log, its audio and its state (edge).",
        },
        "tags": [
            {"name": "intake", "description": "Submissions: answered by intake"},
            {"name": "edge", "description": "The read path and the pages: answered by edge"},
            {"name": "ops", "description": "Each service answers these on its port; the public origin's are edge's"},
            {"name": "openai", "description": "OpenAI-compatible speech API: answered by intake"},
        ],
        "paths": {**_intake_paths(intake), **live_paths(), **_edge_paths(edge), **OPS_PATHS, **V1_PATHS},
        "components": {"schemas": {
            **COMMON_SCHEMAS, **_intake_schemas(intake), **LIVE_SCHEMAS, **_edge_schemas(), **V1_SCHEMAS,
        }},
    }
    # A round trip through JSON: plain data that shares no object with another document or this module.
    return msgspec.json.decode(msgspec.json.encode(doc))  # type: ignore[no-any-return]


# --- building blocks -----------------------------------------------------------------------------


def _ref(name: str) -> Json:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: Json, description: str, headers: Json | None = None) -> Json:
    out: Json = {"description": description, "content": {"application/json": {"schema": schema}}}
    if headers:
        out["headers"] = headers
    return out


def _error(description: str, retry_after: bool = False) -> Json:
    retry = {"Retry-After": {"schema": {"type": "integer"}, "description": "seconds"}}
    return _json(_ref("Error"), description, retry if retry_after else None)


def _limit(value: float | None, setting: str) -> str:
    """A limit as documented: the number when this process knows it, else its setting's name."""
    if value is None:
        return setting
    return f"{value:g}" if isinstance(value, float) else str(value)


def _op(operation_id: str, tag: str, summary: str, responses: Json, **more: Any) -> Json:
    return {"operationId": operation_id, "tags": [tag], "summary": summary, **more, "responses": responses}


# Answered by both services.
COMMON_SCHEMAS: Json = {
    "Error": {
        "type": "object",
        "required": ["error", "message"],
        "properties": {
            "error": {"type": "string", "description": "A stable code, e.g. " + ", ".join(ERROR_CODES)},
            "message": {"type": "string", "description": "What to do about it"},
        },
    },
    "Health": {
        "type": "object",
        "required": ["status"],
        "properties": {
            "status": {"type": "string", "enum": ["ok"]},
            "listeners": {"type": "integer", "description": "edge: live listeners of this process"},
            "watched": {"type": "integer", "description": "edge: casts its shared tail follows"},
            "voices": {"type": ["integer", "null"], "description": "intake /readyz: voices published (null: none yet)"},
            "default": {"type": ["string", "null"], "description": "intake /readyz: the default voice"},
        },
    },
}


# --- intake ----------------------------------------------------------------------------------------


def _intake_schemas(limits: IntakeLimits | None) -> Json:
    text: Json = {
        "type": "string",
        "description": "The text to read out, at most "
        f"{_limit(limits.max_chars if limits else None, 'INTAKE_MAX_CHARS')} characters. Normalised (NFC, control "
        "characters but newlines and tabs removed, stripped); must not be empty after that.",
    }
    title: Json = {"type": ["string", "null"], "description": "Defaults to the first words of the text."}
    if limits is not None:
        text["maxLength"], title["maxLength"] = limits.max_chars, limits.max_title_chars
    else:
        title["description"] += " At most INTAKE_MAX_TITLE_CHARS characters."
    return {
        "CastRequest": {
            "type": "object",
            "required": ["text"],
            "properties": {
                "text": text,
                "voice": {"type": ["string", "null"], "description": "One of GET /api/voices; the default when empty."},
                "title": title,
                "speed": {"type": ["number", "null"], "minimum": 0.25, "maximum": 4.0,
                          "description": "1.0 when absent; part of the cast's identity"},
            },
            "additionalProperties": False,
        },
        "Cast": {
            "type": "object",
            "required": ["id", "url", "status"],
            "properties": {
                "id": {"type": "string", "pattern": CAST_ID_PATTERN},
                "url": {"type": "string", "description": "The cast's page, /c/<id>"},
                "status": {"type": "string", "enum": ["new", "existing", "reenqueued"]},
            },
        },
        "Voices": {
            "type": "object",
            "required": ["voices", "default", "source"],
            "properties": {
                "voices": {"type": "array", "items": {"type": "string"}},
                "default": {"type": "string"},
                "source": {"type": "string", "enum": ["worker", "config"]},
                "backend": {"type": ["string", "null"]},
                "details": {"type": "array", "description": "each voice of `voices`, in the same order",
                            "items": {"type": "object", "required": ["id", "language", "lang", "gender", "name"],
                                      "properties": {
                                          "id": {"type": "string"},
                                          "language": {"type": "string", "description": "American English, …"},
                                          "lang": {"type": "string", "description": "BCP 47 tag; empty if unknown"},
                                          "gender": {"type": "string", "enum": ["female", "male", ""]},
                                          "name": {"type": "string", "description": "display name: Heart"},
                                      }}},
            },
        },
    }


def _submit_responses() -> Json:
    location = {"Location": {"schema": {"type": "string"}, "description": "/c/<id>"}}
    return {
        "201": _json(_ref("Cast"), "A new cast was claimed and queued", location),
        "200": _json(_ref("Cast"), "The cast exists already (same text and voice)", location),
        "202": _json(_ref("Cast"), "The cast had failed and was queued again", location),
        "400": _error("Malformed body (not JSON, not UTF-8, not a form)"),
        "413": _error("Body or text too large"),
        "415": _error("Unsupported Content-Type"),
        "422": _error("A field is missing, of the wrong type, or not allowed (unknown voice, too long a title)"),
        "429": _error("Rate limited: retry after the Retry-After header's seconds", retry_after=True),
        "503": _error("Redis is unreachable, intake is overloaded, or no worker has published its voices yet "
                      "(warming_up): retry after the Retry-After header's seconds", retry_after=True),
    }


def _intake_paths(limits: IntakeLimits | None) -> Json:
    body_note = f"At most {_limit(limits.max_body_bytes if limits else None, 'INTAKE_MAX_BODY_BYTES')} bytes."
    json_body = {"schema": _ref("CastRequest")}
    return {
        "/api/casts": {"post": _op(
            "createCast", "intake", "Submit text and a voice; get the cast's link at once",
            _submit_responses(),
            requestBody={"required": True, "description": body_note, "content": {"application/json": json_body}},
        )},
        "/generate": {"post": _op(
            "generate", "intake",
            "The paste form's target: a form answers 303 to /c/<id>; JSON answers as POST /api/casts",
            {
                "303": {"description": "Form submitted: see the cast at Location",
                        "headers": {"Location": {"schema": {"type": "string"}}}},
                **_submit_responses(),
            },
            requestBody={"required": True, "description": body_note,
                         "content": {"application/x-www-form-urlencoded": json_body, "application/json": json_body}},
        )},
        "/api/voices": {"get": _op(
            "listVoices", "intake", "The voices a cast may ask for, with the default",
            {"200": _json(_ref("Voices"), "The voices the workers published last"),
             "503": _error("No worker has published its voices yet (warming_up)", retry_after=True)},
        )},
        "/api/openapi.json": {"get": _op(
            "openapi", "intake", "This document",
            {"200": _json({"type": "object"}, "An OpenAPI 3.1 document")},
        )},
    }  # fmt: skip


# --- edge ------------------------------------------------------------------------------------------


_CAST_ID = {
    "name": "id", "in": "path", "required": True, "description": "the cast id: 12 URL-safe base64 characters",
    "schema": {"type": "string", "pattern": CAST_ID_PATTERN},
}
_SEQ_NUM = {
    "name": "seq_num", "in": "query", "required": False,
    "description": "the first record to return (0: the start of the log)",
    "schema": {"type": "integer", "minimum": 0, "maximum": MAX_SEQ_NUM, "default": 0},
}
_STREAM = {
    "name": "stream", "in": "query", "required": True, "description": "pub/casts/<id>; every other stream is a 404",
    "schema": {"type": "string", "pattern": "^pub/casts/[A-Za-z0-9_-]{12}$"},
}
_LAST_EVENT_ID = {
    "name": "Last-Event-ID", "in": "header", "required": False,
    "description": "resume after this seq_num (EventSource sends it on reconnect)",
    "schema": {"type": "string", "pattern": "^[0-9]+$"},
}
_RANGE = {
    "name": "Range", "in": "header", "required": False,
    "description": "one bytes=first-last range (closed casts only)", "schema": {"type": "string"},
}  # fmt: skip
_RATE_LIMITED = "too many reads, or too many open streams, from this address"
_NO_CAST = "no such cast (or not a readable stream name)"

# Descriptions of CastState's fields where the name alone does not say it.
_STATE_NOTES = {
    "planned": "planned sentences",
    "tail": "the next seq_num",
    "resume_from": "the first sentence index the latest attempt writes",
}


def _edge_schemas() -> Json:
    """What edge's JSON routes answer: a record's kinds and headers and a cast's state are
    generated from castlog's types (schemas.py); the wrapping is written here."""
    state = cast_state_properties()
    for name, note in _STATE_NOTES.items():
        state[name]["description"] = note
    headers = header_schemas()
    return {
        **headers,
        "Record": {
            "type": "object",
            "required": ["seq_num", "kind", "ts", "headers", "body"],
            "properties": {
                "seq_num": {"type": "integer", "minimum": 0},
                "kind": {"type": "string", "enum": record_kinds()},
                "ts": {"type": "integer", "description": "ms since the epoch when Redis appended it"},
                "headers": {"anyOf": [_ref(name) for name in headers],
                            "description": "the record's fields without e and body (the schema of its kind)"},
                "body": {"type": ["string", "null"], "description": "audio: the MP3 chunk in base64"},
            },
        },
        "RecordPage": {
            "type": "object",
            "required": ["records", "next_seq_num", "tail", "closed"],
            "properties": {
                "records": {"type": "array", "items": _ref("Record")},
                "next_seq_num": {"type": "integer", "description": "where the next page starts"},
                "tail": {"type": "integer", "description": "records in the log"},
                "closed": {"type": "boolean", "description": "the log ended (eos or error) and all was read"},
            },
        },
        "CastState": {
            "type": "object",
            "required": ["id", *state, "finished", "audio_ms", "links"],
            "properties": {
                "id": {"type": "string", "pattern": CAST_ID_PATTERN},
                **state,
                "finished": {"type": "integer", "description": "sentences in the playable audio"},
                "audio_ms": {"type": "integer"},
                "links": {"type": "object", "additionalProperties": {"type": "string"}},
            },
        },
    }


def _read_parameters(limits: EdgeLimits | None) -> list[Json]:
    """seq_num, limit and wait: the query of a JSON page of records."""
    max_records = _limit(limits.max_records_limit if limits else None, "EDGE_MAX_RECORDS_LIMIT")
    max_wait = _limit(limits.max_wait_s if limits else None, "EDGE_MAX_WAIT_S")
    limit: Json = {"type": "integer", "minimum": 1}
    wait: Json = {"type": "number", "minimum": 0, "default": 0}
    if limits is not None:
        limit.update(maximum=limits.max_records_limit, default=limits.max_records_limit)
        wait["maximum"] = limits.max_wait_s
    return [
        _SEQ_NUM,
        {"name": "limit", "in": "query", "required": False, "schema": limit,
         "description": f"records per page, at most {max_records} (also the default)"},
        {"name": "wait", "in": "query", "required": False, "schema": wait,
         "description": f"seconds to long-poll when seq_num is at the tail, at most {max_wait}"},
    ]  # fmt: skip


def _html(description: str) -> Json:
    return {"description": description, "content": {"text/html": {"schema": {"type": "string"}}}}


def _edge_paths(limits: EdgeLimits | None) -> Json:
    mp3 = {"audio/mpeg": {"schema": {"type": "string", "format": "binary"}}}
    page = {
        "200": _json(_ref("RecordPage"), "records from seq_num"),
        "400": _error("a parameter is malformed"),
        "404": _error(_NO_CAST),
        "429": _error(_RATE_LIMITED, retry_after=True),
        "503": _error("a long-poll found this edge at its maximum of live listeners", retry_after=True),
    }
    return {
        "/api/casts/{id}": {"get": _op(
            "castState", "edge", "A cast's state, derived from its log",
            {"200": _json(_ref("CastState"), "the cast's state"), "404": _error(_NO_CAST),
             "429": _error(_RATE_LIMITED, retry_after=True)},
            parameters=[_CAST_ID],
        ), "delete": _op(
            "deleteCast", "intake", "Admin: delete a cast (its audio, log and claim); an identical submit makes it again",
            {"200": {"description": "deleted"},
             "404": _error("no such cast, or no admin token configured or given (Authorization: Bearer <token>)")},
            parameters=[_CAST_ID],
        )},
        "/api/casts/{id}/records": {"get": _op(
            "castRecords", "edge", "Records of a cast from seq_num, as JSON", page,
            parameters=[_CAST_ID, *_read_parameters(limits)],
        )},
        "/s2/records": {"get": _op(
            "s2Records", "edge", "The original design's gateway path: records of pub/casts/<id>", page,
            parameters=[_STREAM, *_read_parameters(limits)],
        )},
        "/api/casts/{id}/events": {"get": _op(
            "castEvents", "edge", "The cast as Server-Sent Events: replay from seq_num (or Last-Event-ID), then live",
            {
                "200": {"description": "an event stream",
                        "content": {"text/event-stream": {"schema": {"type": "string"}}}},
                "204": {"description": "past the end of a finished log: nothing will come"},
                "400": _error("a parameter is malformed"),
                "404": _error(_NO_CAST),
                "429": _error(_RATE_LIMITED, retry_after=True),
                "503": _error("this edge serves its maximum of live listeners", retry_after=True),
            },
            description="id: the seq_num; event: the kind; data: a Record as JSON. A heartbeat comment "
            "every 15 s. The response ends after the log's terminal record (eos or error).",
            parameters=[_CAST_ID, _SEQ_NUM, _LAST_EVENT_ID],
        )},
        "/api/casts/{id}/audio.mp3": {"get": _op(
            "castAudio", "edge", "The playable audio as one MP3",
            {
                "200": {"description": "the MP3", "content": mp3},
                "206": {"description": "a byte range of the MP3", "content": mp3},
                "404": _error(_NO_CAST),
                "416": _error("the range lies outside the audio"),
                "429": _error(_RATE_LIMITED, retry_after=True),
                "503": _error("this edge serves its maximum of live listeners", retry_after=True),
            },
            description="While the cast is made: chunked, following the live edge until eos. Once it ended: "
            "a Content-Length and byte ranges.",
            parameters=[_CAST_ID, _RANGE],
        )},
        "/api/casts/{id}/captions": {"get": _op(
            "castCaptions", "edge", "The cast's words and sentences as WebVTT cues (so far, while it is made)",
            {"200": {"description": "WebVTT", "content": {"text/vtt": {"schema": {"type": "string"}}}},
             "400": _error("cues is not all, words or sentences"), "404": _error(_NO_CAST),
             "429": _error(_RATE_LIMITED, retry_after=True)},
            parameters=[_CAST_ID, {"name": "cues", "in": "query", "required": False,
                                   "schema": {"type": "string", "enum": ["all", "words", "sentences"]}}],
        )},
        "/api/edge/openapi.json": {"get": _op(
            "edgeOpenapi", "edge", "This document, from edge",
            {"200": _json({"type": "object"}, "An OpenAPI 3.1 document")},
        )},
        "/": {"get": _op("pastePage", "edge", "The paste page: a form that POSTs to /generate",
                         {"200": _html("the page")})},
        "/docs": {"get": _op("apiPage", "edge", "This document as an interactive page (Swagger UI)",
                             {"200": _html("the page"), "404": _error("swagger-ui-py is not installed")})},
        "/docs/assets/{name}": {"get": _op(
            "apiPageAsset", "edge", "Swagger UI's files, from the swagger-ui-py wheel",
            {"200": {"description": "the file"}, "404": _error("no such file")},
            parameters=[{"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}],
        )},
        "/c/{id}": {"get": _op(
            "playerPage", "edge", "A cast's player page", {"200": _html("the page"), "404": _error(_NO_CAST)},
            parameters=[_CAST_ID],
        )},
        "/static/{file}": {"get": _op(
            "staticFile", "edge", "The pages' scripts and styles",
            {"200": {"description": "the file"}, "404": _error("no such file")},
            parameters=[{"name": "file", "in": "path", "required": True, "schema": {"type": "string"}}],
        )},
    }  # fmt: skip


# --- both: each service answers these on its own port; on the public origin, edge does ---------------

OPS_PATHS: Json = {
    "/healthz": {"get": _op(
        "health", "ops", "200 when the service's Redis answers (and, for edge, its shared tail runs); else 503",
        {"200": _json(_ref("Health"), "healthy"), "503": _error("not healthy")},
    )},
    "/readyz": {"get": _op(
        "ready", "ops", "200 when the service can do its work now (synth: the model is warm); else 503 with why",
        {"200": _json(_ref("Health"), "ready"), "503": _error("not ready yet")},
    )},
    "/metrics": {"get": _op(
        "metrics", "ops", "Prometheus metrics",
        {"200": {"description": "Prometheus text", "content": {"text/plain": {"schema": {"type": "string"}}}}},
    )},
}  # fmt: skip
