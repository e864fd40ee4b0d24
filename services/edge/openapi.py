"""Edge's part of the OpenAPI document, as data (served at ``/api/edge/openapi.json``).

Intake serves the main document at ``/api/openapi.json``; these paths and schemas are meant to
be merged into it.
"""

from __future__ import annotations

from typing import Any

CAST_ID = {
    "name": "id", "in": "path", "required": True,
    "description": "the cast id: 12 URL-safe base64 characters",
    "schema": {"type": "string", "pattern": "^[A-Za-z0-9_-]{12}$"},
}
SEQ_NUM = {
    "name": "seq_num", "in": "query", "required": False,
    "description": "the first record to return (0: the start of the log)",
    "schema": {"type": "integer", "minimum": 0, "default": 0},
}
LIMIT = {
    "name": "limit", "in": "query", "required": False,
    "description": "records per page (at most EDGE_MAX_RECORDS_LIMIT, 100 by default)",
    "schema": {"type": "integer", "minimum": 1, "maximum": 100, "default": 100},
}
WAIT = {
    "name": "wait", "in": "query", "required": False,
    "description": "seconds to long-poll when seq_num is at the tail (at most EDGE_MAX_WAIT_S)",
    "schema": {"type": "number", "minimum": 0, "maximum": 30, "default": 0},
}


def _error(description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}


RATE_LIMITED = {
    **_error("too many reads, or too many open streams, from this address"),
    "headers": {"Retry-After": {"schema": {"type": "integer"}, "description": "seconds"}},
}
NOT_FOUND = _error("no such cast (or not a readable stream name)")
BAD_REQUEST = _error("a parameter is malformed")


def _json(ref: str, description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{ref}"}}}}


RECORDS_GET = {
    "summary": "Records of a cast from seq_num, as JSON",
    "parameters": [CAST_ID, SEQ_NUM, LIMIT, WAIT],
    "responses": {
        "200": _json("RecordPage", "records from seq_num"),
        "400": BAD_REQUEST, "404": NOT_FOUND, "429": RATE_LIMITED,
    },
}

PATHS: dict[str, Any] = {
    "/api/casts/{id}": {"get": {
        "summary": "A cast's state, derived from its log",
        "parameters": [CAST_ID],
        "responses": {"200": _json("CastState", "the cast's state"), "404": NOT_FOUND, "429": RATE_LIMITED},
    }},
    "/api/casts/{id}/records": {"get": RECORDS_GET},
    "/s2/records": {"get": {
        **RECORDS_GET,
        "summary": "The original design's gateway path: records of pub/casts/<id>",
        "parameters": [
            {"name": "stream", "in": "query", "required": True,
             "description": "pub/casts/<id>; every other stream is a 404",
             "schema": {"type": "string", "pattern": "^pub/casts/[A-Za-z0-9_-]{12}$"}},
            SEQ_NUM, LIMIT, WAIT,
        ],
    }},
    "/api/casts/{id}/events": {"get": {
        "summary": "The cast as Server-Sent Events: replay from seq_num (or Last-Event-ID), then live",
        "description": "id: the seq_num; event: the kind; data: a Record as JSON. A heartbeat comment "
                       "every 15 s. The response ends after the log's terminal record (eos or error).",
        "parameters": [CAST_ID, SEQ_NUM, {
            "name": "Last-Event-ID", "in": "header", "required": False,
            "description": "resume after this seq_num (EventSource sends it on reconnect)",
            "schema": {"type": "string", "pattern": "^[0-9]+$"},
        }],
        "responses": {
            "200": {"description": "an event stream", "content": {"text/event-stream": {"schema": {"type": "string"}}}},
            "204": {"description": "past the end of a finished log: nothing will come"},
            "400": BAD_REQUEST, "404": NOT_FOUND, "429": RATE_LIMITED,
        },
    }},
    "/api/casts/{id}/audio.mp3": {"get": {
        "summary": "The playable audio as one MP3",
        "description": "While the cast is made: chunked, following the live edge until eos. Once it "
                       "ended: a Content-Length and byte ranges.",
        "parameters": [CAST_ID, {
            "name": "Range", "in": "header", "required": False,
            "description": "one bytes=first-last range (closed casts only)", "schema": {"type": "string"},
        }],
        "responses": {
            "200": {"description": "the MP3", "content": {"audio/mpeg": {"schema": {"type": "string", "format": "binary"}}}},
            "206": {"description": "a byte range of the MP3",
                    "content": {"audio/mpeg": {"schema": {"type": "string", "format": "binary"}}}},
            "404": NOT_FOUND,
            "416": _error("the range lies outside the audio"),
            "429": RATE_LIMITED,
        },
    }},
    "/healthz": {"get": {
        "summary": "Edge is up: Redis answers and the shared tail runs",
        "responses": {"200": {"description": "healthy"}, "503": _error("not healthy")},
    }},
    "/metrics": {"get": {
        "summary": "Prometheus metrics",
        "responses": {"200": {"description": "Prometheus text", "content": {"text/plain": {"schema": {"type": "string"}}}}},
    }},
    "/api/edge/openapi.json": {"get": {
        "summary": "This document",
        "responses": {"200": {"description": "OpenAPI 3.1", "content": {"application/json": {"schema": {"type": "object"}}}}},
    }},
}

SCHEMAS: dict[str, Any] = {
    "Error": {
        "type": "object", "required": ["error", "message"],
        "properties": {"error": {"type": "string"}, "message": {"type": "string"}},
    },
    "Record": {
        "type": "object", "required": ["seq_num", "kind", "ts", "headers", "body"],
        "properties": {
            "seq_num": {"type": "integer", "minimum": 0},
            "kind": {"type": "string", "enum": ["meta", "start", "audio", "eos", "error"]},
            "ts": {"type": "integer", "description": "ms since the epoch when Redis appended it"},
            "headers": {"type": "object", "description": "the record's fields without e and body"},
            "body": {"type": ["string", "null"], "description": "audio: the MP3 chunk in base64"},
        },
    },
    "RecordPage": {
        "type": "object", "required": ["records", "next_seq_num", "tail", "closed"],
        "properties": {
            "records": {"type": "array", "items": {"$ref": "#/components/schemas/Record"}},
            "next_seq_num": {"type": "integer", "description": "where the next page starts"},
            "tail": {"type": "integer", "description": "records in the log"},
            "closed": {"type": "boolean", "description": "the log ended (eos or error) and all was read"},
        },
    },
    "CastState": {
        "type": "object",
        "required": ["id", "title", "voice", "chars", "status", "planned", "finished", "audio_ms", "attempts", "tail"],
        "properties": {
            "id": {"type": "string"},
            "title": {"type": "string"},
            "voice": {"type": "string"},
            "chars": {"type": "integer"},
            "status": {"type": "string", "enum": ["queued", "generating", "done", "error"]},
            "planned": {"type": "integer", "description": "planned sentences"},
            "finished": {"type": "integer", "description": "sentences in the playable audio"},
            "audio_ms": {"type": "integer"},
            "attempts": {"type": "integer"},
            "resume_from": {"type": "integer"},
            "error": {"type": ["string", "null"]},
            "tail": {"type": "integer", "description": "the next seq_num"},
            "links": {"type": "object", "additionalProperties": {"type": "string"}},
        },
    },
}

SPEC: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {
        "title": "StreamTTS edge",
        "version": "0.1.0",
        "description": "The public read path: replay and follow a cast's log, its audio, its state.",
    },
    "paths": PATHS,
    "components": {"schemas": SCHEMAS},
}
