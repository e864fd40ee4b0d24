"""The OpenAPI 3.1 document of intake's routes, kept as plain data.

Edge serves the public origin's full document by merging its own paths into this one; it must not
import intake, so everything here is JSON-ready dicts and lists (``document()`` is pure).
"""

from __future__ import annotations

from typing import Any

from .config import MAX_BODY_BYTES, MAX_CHARS, MAX_TITLE_CHARS

OPENAPI_VERSION = "3.1.0"
API_VERSION = "1.0.0"
ERROR_CODES = (
    "malformed_json", "malformed_form", "invalid_field", "invalid_text", "empty_text", "text_too_long",
    "title_too_long", "unknown_voice", "unsupported_media_type", "body_too_large", "rate_limited",
    "not_found", "method_not_allowed", "busy", "unavailable",
)  # fmt: skip

Json = dict[str, Any]


def _ref(name: str) -> Json:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: Json, description: str, headers: Json | None = None) -> Json:
    out: Json = {"description": description, "content": {"application/json": {"schema": schema}}}
    if headers:
        out["headers"] = headers
    return out


def _refusals(*statuses: int) -> Json:
    meaning = {
        400: "Malformed body (not JSON, not UTF-8, not a form)",
        413: "Body or text too large",
        415: "Unsupported Content-Type",
        422: "A field is missing, of the wrong type, or not allowed (unknown voice, too long a title)",
        429: "Rate limited: retry after the Retry-After header's seconds",
        503: "Redis is unreachable or intake is overloaded: retry shortly",
    }
    out = {str(s): _json(_ref("Error"), meaning[s]) for s in statuses}
    out["429"]["headers"] = {"Retry-After": {"schema": {"type": "integer"}, "description": "seconds"}}
    return out


def _schemas(max_chars: int, max_title_chars: int) -> Json:
    return {
        "CastRequest": {
            "type": "object",
            "required": ["text"],
            "properties": {
                "text": {
                    "type": "string",
                    "maxLength": max_chars,
                    "description": "The text to read out. Normalised (NFC, control characters but "
                    "newlines and tabs removed, stripped); must not be empty after that.",
                },
                "voice": {
                    "type": ["string", "null"],
                    "description": "One of GET /api/voices; the default voice when absent or empty.",
                },
                "title": {
                    "type": ["string", "null"],
                    "maxLength": max_title_chars,
                    "description": "Defaults to the first words of the text.",
                },
            },
            "additionalProperties": True,
        },
        "Cast": {
            "type": "object",
            "required": ["id", "url", "status"],
            "properties": {
                "id": {"type": "string", "pattern": "^[A-Za-z0-9_-]{12}$"},
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
            },
        },
        "Error": {
            "type": "object",
            "required": ["error", "message"],
            "properties": {
                "error": {"type": "string", "description": "A stable code, e.g. " + ", ".join(ERROR_CODES)},
                "message": {"type": "string", "description": "What to do about it"},
            },
        },
        "Health": {"type": "object", "required": ["status"], "properties": {"status": {"type": "string"}}},
    }


def _cast_responses() -> Json:
    location = {"Location": {"schema": {"type": "string"}, "description": "/c/<id>"}}
    return {
        "201": _json(_ref("Cast"), "A new cast was claimed and queued", location),
        "200": _json(_ref("Cast"), "The cast exists already (same text and voice)", location),
        "202": _json(_ref("Cast"), "The cast had failed and was queued again", location),
        **_refusals(400, 413, 415, 422, 429, 503),
    }


def _paths(max_body_bytes: int) -> Json:
    body_note = f"At most {max_body_bytes} bytes."
    json_body = {"schema": _ref("CastRequest")}
    return {
        "/api/casts": {
            "post": {
                "operationId": "createCast",
                "summary": "Submit text and a voice; get the cast's link at once",
                "requestBody": {
                    "required": True,
                    "description": body_note,
                    "content": {"application/json": json_body},
                },
                "responses": _cast_responses(),
            }
        },
        "/generate": {
            "post": {
                "operationId": "generate",
                "summary": "The paste form's target: a form answers 303 to /c/<id>; JSON answers as POST /api/casts",
                "requestBody": {
                    "required": True,
                    "description": body_note,
                    "content": {"application/x-www-form-urlencoded": json_body, "application/json": json_body},
                },
                "responses": {
                    "303": {
                        "description": "Form submitted: see the cast at Location",
                        "headers": {"Location": {"schema": {"type": "string"}}},
                    },
                    **_cast_responses(),
                },
            }
        },
        "/api/voices": {
            "get": {
                "operationId": "listVoices",
                "summary": "The voices a cast may ask for, with the default",
                "responses": {"200": _json(_ref("Voices"), "The published voices (or the configured ones)")},
            }
        },
        "/api/openapi.json": {
            "get": {
                "operationId": "intakeOpenapi",
                "summary": "This document",
                "responses": {"200": _json({"type": "object"}, "An OpenAPI 3.1 document")},
            }
        },
        "/healthz": {
            "get": {
                "operationId": "intakeHealth",
                "summary": "200 when Redis answers, else 503",
                "responses": {"200": _json(_ref("Health"), "Healthy"), "503": _json(_ref("Error"), "Redis is down")},
            }
        },
        "/metrics": {
            "get": {
                "operationId": "intakeMetrics",
                "summary": "Prometheus metrics",
                "responses": {
                    "200": {
                        "description": "Prometheus text",
                        "content": {"text/plain": {"schema": {"type": "string"}}},
                    }
                },
            }
        },
    }


def document(
    max_chars: int = MAX_CHARS, max_title_chars: int = MAX_TITLE_CHARS, max_body_bytes: int = MAX_BODY_BYTES
) -> Json:
    """A fresh OpenAPI document of intake's routes (a caller may merge into it freely)."""
    return {
        "openapi": OPENAPI_VERSION,
        "info": {
            "title": "StreamTTS intake",
            "version": API_VERSION,
            "description": "Accept a cast in one atomic step and hand back its link.",
        },
        "paths": _paths(max_body_bytes),
        "components": {"schemas": _schemas(max_chars, max_title_chars)},
    }
