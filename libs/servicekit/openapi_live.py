"""The open (live) casts' part of the OpenAPI document (see castlog.openapi): the HTTP text routes
and the WebSocket, whose messages OpenAPI cannot describe, so its description names them."""

from __future__ import annotations

from typing import Any

Json = dict[str, Any]

_ERROR = {"$ref": "#/components/schemas/LiveError"}


def _json(schema: Json, description: str) -> Json:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


LIVE_SCHEMAS: Json = {
    "LiveOpenRequest": {
        "type": "object",
        "required": ["live"],
        "description": "POST /api/casts with live: true opens a cast without its text (201 with the id)",
        "properties": {
            "live": {"type": "boolean", "const": True},
            "voice": {"type": "string"},
            "title": {"type": "string"},
            "speed": {"type": "number", "minimum": 0.5, "maximum": 2.0},
        },
    },
    "LiveOpened": {
        "type": "object",
        "required": ["id", "url", "status", "offset", "voice", "text", "close", "write_token"],
        "description": "201 to POST /api/casts with live: true",
        "properties": {
            "id": {"type": "string", "description": "the cast's public id: it reads, never writes"},
            "url": {"type": "string"},
            "status": {"type": "string", "const": "open"},
            "offset": {"type": "integer"},
            "voice": {"type": "string"},
            "text": {"type": "string", "description": "the route for fragments"},
            "close": {"type": "string", "description": "the route that closes the text"},
            "write_token": {"type": "string", "description": "secret: send it as Authorization: Bearer "
                            "<write_token> to /text and /close; shown once, never stored in clear"},
        },
    },
    "LiveText": {
        "type": "object",
        "required": ["text", "offset"],
        "properties": {
            "text": {"type": "string"},
            "offset": {"type": "integer", "minimum": 0, "description": "characters sent before this fragment"},
            "flush": {"type": "boolean", "description": "speak what is buffered now, sentence complete or not"},
        },
    },
    "LiveClose": {
        "type": "object",
        "properties": {"offset": {"type": "integer", "minimum": 0, "description": "the text's length as sent"}},
    },
    "LiveState": {
        "type": "object",
        "required": ["id", "status", "offset"],
        "properties": {
            "id": {"type": "string"},
            "status": {"type": "string", "enum": ["appended", "duplicate", "closed"]},
            "offset": {"type": "integer", "description": "the text's end: where the next fragment starts"},
            "content_id": {"type": "string", "description": "close: the content id of the final text"},
        },
    },
    "LiveError": {
        "type": "object",
        "required": ["error", "message"],
        "properties": {
            "error": {"type": "string"},
            "message": {"type": "string"},
            "offset": {"type": "integer", "description": "the text's end: where the next fragment starts"},
        },
    },
}

_REFUSALS: Json = {
    "401": _json(_ERROR, "invalid_write_token: no Authorization: Bearer <write_token>, or not this cast's"),
    "404": _json(_ERROR, "No such cast"),
    "409": _json(_ERROR, "A gap or an overlap (offset says where to go on), the text is closed, or not a live cast"),
    "413": _json(_ERROR, "The text would exceed INTAKE_MAX_CHARS"),
    "415": _json(_ERROR, "Unsupported Content-Type"),
    "422": _json(_ERROR, "A field is missing or of the wrong type"),
}

WS_DESCRIPTION = (
    "A WebSocket (upgrade with GET). Client JSON messages: {type: start, voice, speed, format: mp3|pcm, "
    "title} once, then {type: text, text}, {type: flush}, {type: close}. Server: binary frames of audio "
    "(one standalone MP3 chunk per sentence, or s16le mono 24 kHz PCM) and JSON events {type: cast, id, url, "
    "write_token} (the session itself writes without the token), "
    "{type: sentence, index, text}, {type: sentence_done, index, duration_ms}, {type: done, sentences, "
    "audio_ms}, {type: error, error, message}. Close codes: 1000 done, 1001 server stopping, 4400 bad start, "
    "4408 idle (INTAKE_LIVE_IDLE_S), 4429 slow reader (the reason's seq_num is where to resume listening by "
    "link), 4503 too many sessions."
)


# The write token: a bearer secret per open cast (components.securitySchemes).
WRITE_TOKEN_SCHEME: Json = {
    "type": "http", "scheme": "bearer",
    "description": "the write_token of the 201 that opened the cast (or of the WebSocket's cast event)",
}


def live_paths() -> Json:
    return {
        "/api/casts/{id}/text": {"post": {
            "operationId": "addLiveText", "tags": ["intake"], "security": [{"writeToken": []}],
            "summary": "Add a fragment of an open cast's text at its offset (a resend appends nothing)",
            "parameters": [{"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}],
            "requestBody": {"required": True, "content": {"application/json": {
                "schema": {"$ref": "#/components/schemas/LiveText"}}}},
            "responses": {"200": _json({"$ref": "#/components/schemas/LiveState"}, "Appended, or a resend"),
                          **_REFUSALS},
        }},
        "/api/casts/{id}/close": {"post": {
            "operationId": "closeLiveText", "tags": ["intake"], "security": [{"writeToken": []}],
            "summary": "Close an open cast's text: the rest is spoken, then the cast ends (idempotent)",
            "parameters": [{"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}],
            "requestBody": {"required": False, "content": {"application/json": {
                "schema": {"$ref": "#/components/schemas/LiveClose"}}}},
            "responses": {"200": _json({"$ref": "#/components/schemas/LiveState"}, "Closed"), **_REFUSALS},
        }},
        "/v1/audio/speech/live": {"get": {
            "operationId": "liveSpeech", "tags": ["intake"],
            "summary": "Live speech over a WebSocket: text fragments in, each sentence's audio out",
            "description": WS_DESCRIPTION,
            "responses": {"101": {"description": "Switching to the WebSocket protocol"},
                          "400": {"description": "Not a WebSocket upgrade"}},
        }},
    }  # fmt: skip
