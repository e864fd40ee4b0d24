"""Intake's routes in the OpenAPI document: submitting a cast, the voices, the document itself."""

from __future__ import annotations

from .openapi_parts import IntakeLimits, Json, error_body, json_body, limit_text, op, ref


def limit_cast_request(request: Json, limits: IntakeLimits | None) -> None:
    """The CastRequest schema (generated from ``forms.CastForm``) with intake's limits on its text and title."""
    text, title = request["properties"]["text"], request["properties"]["title"]
    text["description"] += f"; at most {limit_text(limits.max_chars if limits else None, 'INTAKE_MAX_CHARS')} characters."
    if limits is not None:
        text["maxLength"], title["maxLength"] = limits.max_chars, limits.max_title_chars
    else:
        title["description"] += " At most INTAKE_MAX_TITLE_CHARS characters."


_LOCATION = {"Location": {"schema": {"type": "string"}, "description": "/c/<id>"}}
_SUBMIT_RESPONSES: Json = {
    "201": json_body({"oneOf": [ref("Cast"), ref("LiveOpened")]},
                     "A new cast was claimed and queued (or, for live: true, opened)", _LOCATION),
    "200": json_body(ref("Cast"), "The cast exists already (same text and voice)", _LOCATION),
    "202": json_body(ref("Cast"), "The cast had failed and was queued again", _LOCATION),
    "400": error_body("Malformed body (not JSON, not UTF-8, not a form)"),
    "413": error_body("Body or text too large"),
    "415": error_body("Unsupported Content-Type"),
    "422": error_body("A field is missing, of the wrong type, or not allowed (unknown voice, too long a title)"),
    "429": error_body("Rate limited: retry after the Retry-After header's seconds", retry_after=True),
    "503": error_body("Redis is unreachable, intake is overloaded, or no worker has published its voices yet "
                      "(warming_up): retry after the Retry-After header's seconds", retry_after=True),
}


def intake_paths(limits: IntakeLimits | None) -> Json:
    body_note = f"At most {limit_text(limits.max_body_bytes if limits else None, 'INTAKE_MAX_BODY_BYTES')} bytes."
    json_request = {"schema": {"oneOf": [ref("CastRequest"), ref("LiveOpenRequest")]}}  # {"live": true} opens
    return {
        "/api/casts": {"post": op(
            "createCast", "intake", "Submit text and a voice; get the cast's link at once",
            _SUBMIT_RESPONSES,
            requestBody={"required": True, "description": body_note, "content": {"application/json": json_request}},
        )},
        "/generate": {"post": op(
            "generate", "intake",
            "The paste form's target: a form answers 303 to /c/<id>; JSON answers as POST /api/casts",
            {
                "303": {"description": "Form submitted: see the cast at Location",
                        "headers": {"Location": {"schema": {"type": "string"}}}},
                **_SUBMIT_RESPONSES,
            },
            requestBody={"required": True, "description": body_note,
                         "content": {"application/x-www-form-urlencoded": {"schema": ref("CastRequest")}, "application/json": json_request}},
        )},
        "/api/voices": {"get": op(
            "listVoices", "intake", "The voices a cast may ask for, with the default",
            {"200": json_body(ref("Voices"), "The voices the workers published last"),
             "503": error_body("No worker has published its voices yet (warming_up)", retry_after=True)},
        )},
        "/api/openapi.json": {"get": op(
            "openapi", "intake", "This document",
            {"200": json_body({"type": "object"}, "An OpenAPI 3.1 document")},
        )},
    }  # fmt: skip
