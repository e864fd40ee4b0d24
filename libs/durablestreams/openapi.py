"""The Durable Streams routes (``/v1/stream/*``: reads by edge, writes by intake) in the OpenAPI
document. The protocol itself is durable-streams' PROTOCOL.md; this names the routes, their
parameters and headers, and what StreamTTS adds (casts, read-only)."""

from __future__ import annotations

from typing import Any

from servicekit.openapi_parts import CAST_ID_PARAM, ApiPart, Json, error_body, op

TAG = "durable-streams"
_OFFSET = {"name": "offset", "in": "query", "required": False,
           "description": "-1 (the start, the default), now (the tail), or a Stream-Next-Offset",
           "schema": {"type": "string"}}
_LIVE = {"name": "live", "in": "query", "required": False, "schema": {"type": "string", "enum": ["long-poll", "sse"]}}
_CURSOR = {"name": "cursor", "in": "query", "required": False, "description": "the last Stream-Cursor",
           "schema": {"type": "string"}}
_PATH = {"name": "path", "in": "path", "required": True, "description": "the stream's name (/-separated)",
         "schema": {"type": "string", "maxLength": 256}}
_STATE = {h: {"schema": {"type": "string"}} for h in ("Stream-Next-Offset", "Stream-Up-To-Date", "Stream-Closed",
                                                       "Stream-Cursor", "ETag")}
_BYTES = {"*/*": {"schema": {"type": "string", "format": "binary"}}}
_REFUSED = {"400": error_body("a bad offset (one past the tail too), header or body"),
            "404": error_body("no such stream"),
            "429": error_body("too many reads", retry_after=True),
            "503": error_body("too many readers wait on this edge (a `live=` read)", retry_after=True)}


def _read(operation_id: str, summary: str, params: list[Json], media: str | None = None) -> Json:
    content = {media: {"schema": {"type": "string", "format": "binary"}}} if media else _BYTES
    return {
        "get": op(operation_id, TAG, summary, {
            "200": {"description": "the data after the offset, or an SSE stream (live=sse)", "headers": _STATE,
                    "content": {**content, "text/event-stream": {"schema": {"type": "string"}}}},
            "204": {"description": "a long-poll that timed out, or reached the end of a closed stream",
                    "headers": _STATE},
            "304": {"description": "If-None-Match matched the ETag"},
            **_REFUSED,
        }, parameters=[*params, _OFFSET, _LIVE, _CURSOR]),
        "head": op(operation_id + "Head", TAG, "the stream's metadata", {
            "200": {"description": "its content type, tail offset, TTL, expiry and closure", "headers": _STATE},
            **_REFUSED,
        }, parameters=params),
    }


def durable_part() -> ApiPart:
    """The part both services give ``servicekit.openapi_document`` (``parts``)."""
    general: dict[str, Any] = _read("readStream", "read a durable stream (catch-up, long-poll, SSE)", [_PATH])
    for read in (general["get"], general["head"]):  # the casts' streams want none
        read["responses"]["401"] = error_body("with STREAMTTS_API_KEYS set, a key is wanted (invalid_api_key)")
    written = {"201": {"description": "created"}, "200": {"description": "appended (a producer's new data)"},
               "204": {"description": "appended, closed, deleted, or a producer's duplicate"},
               "400": error_body("a bad name, header or body"),
               "401": error_body("a key is wanted (STREAMTTS_API_KEYS)"),
               "403": error_body("a stale producer epoch, a stream of another owner (not_owner: only its creator "
                                 "writes, closes, deletes or forks it), or a write from another site's page "
                                 "(cross_site)"),
               "408": error_body("the body took longer than INTAKE_BODY_TIMEOUT_S to arrive"),
               "409": {"description": "another configuration, content type, sequence, or a closed stream"},
               "410": {"description": "deleted while forks still read it"},
               "415": error_body("a create's Content-Type is not one a stream may have (unsupported_type)"),
               "413": error_body("the body, or the stream, is too large; or, with no API keys set, the client's "
                                 "bytes per hour are spent (bytes_quota)", retry_after=True),
               "429": error_body("with no API keys set, the client's streams per hour are spent (streams_quota)",
                                 retry_after=True)}
    general.update({
        "put": op("createStream", TAG, "create a stream (or a fork: Stream-Forked-From)", written,
                  parameters=[_PATH]),
        "post": op("appendStream", TAG, "append (Stream-Closed: true closes; Producer-* make it idempotent)",
                   written, parameters=[_PATH]),
        "delete": op("deleteStream", TAG, "delete a stream", written, parameters=[_PATH]),
        "options": op("preflightStream", TAG, "CORS preflight", {"204": {"description": "allowed"}},
                      parameters=[_PATH]),
    })
    paths = {
        "/v1/stream/{path}": general,
        "/v1/stream/casts/{id}": _read(
            "readCastStream", "a cast's playable MP3 as a read-only durable stream (offsets are byte positions)",
            [CAST_ID_PARAM], "audio/mpeg"),
        "/v1/stream/casts/{id}/records": _read(
            "readCastRecordsStream", "a cast's records (no bodies) as a read-only JSON-mode durable stream",
            [CAST_ID_PARAM], "application/json"),
    }
    return ApiPart({"name": TAG, "description": "Durable Streams (/v1/stream/*): reads by edge, writes by intake"},
                   paths)
