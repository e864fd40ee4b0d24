"""Edge's routes in the OpenAPI document: the read path (state, records, events, audio,
captions) and the pages."""

from __future__ import annotations

from castlog import MAX_SEQ_NUM

from .openapi_parts import CAST_ID_PARAM, EdgeLimits, Json, error_body, json_body, limit_text, op, ref

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


def _read_parameters(limits: EdgeLimits | None) -> list[Json]:
    """seq_num, limit and wait: the query of a JSON page of records."""
    max_records = limit_text(limits.max_records_limit if limits else None, "EDGE_MAX_RECORDS_LIMIT")
    max_wait = limit_text(limits.max_wait_s if limits else None, "EDGE_MAX_WAIT_S")
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


def edge_paths(limits: EdgeLimits | None) -> Json:
    mp3 = {"audio/mpeg": {"schema": {"type": "string", "format": "binary"}}}
    # What every read of a cast may answer: no cast, or this address has read too much.
    refused = {"404": error_body("no such cast (or not a readable stream name)"),
               "429": error_body("too many reads, or too many open streams, from this address", retry_after=True)}
    malformed = error_body("a parameter is malformed")
    full = error_body("this edge serves its maximum of listeners", retry_after=True)
    page = {
        "200": json_body(ref("RecordPage"), "records from seq_num"), "400": malformed, **refused,
        "503": error_body("a long-poll found this edge at its maximum of listeners", retry_after=True),
    }
    html = {"200": {"description": "the page", "content": {"text/html": {"schema": {"type": "string"}}}}}
    file = {"200": {"description": "the file"}, "404": error_body("no such file")}
    return {
        "/api/casts/{id}": {"get": op(
            "castState", "edge", "A cast's state, derived from its log",
            {"200": json_body(ref("CastState"), "the cast's state"), **refused}, parameters=[CAST_ID_PARAM],
        ), "delete": op(
            "deleteCast", "intake", "Admin: delete a cast (its audio, log and claim); an identical submit makes it again",
            {"200": json_body(ref("Deleted"), "deleted"),
             "202": json_body(ref("Deleted"), "asked, not confirmed in time (no worker running?): send it again if "
                              "the cast stays"),
             "404": error_body("no such cast, or no admin token configured or given (Authorization: Bearer <token>)")},
            parameters=[CAST_ID_PARAM],
        )},
        "/api/casts/{id}/records": {"get": op(
            "castRecords", "edge", "Records of a cast from seq_num, as JSON", page,
            parameters=[CAST_ID_PARAM, *_read_parameters(limits)],
        )},
        "/s2/records": {"get": op(
            "s2Records", "edge", "The original design's gateway path: records of pub/casts/<id>", page,
            parameters=[_STREAM, *_read_parameters(limits)],
        )},
        "/api/casts/{id}/events": {"get": op(
            "castEvents", "edge", "The cast as Server-Sent Events: replay from seq_num (or Last-Event-ID), then following",
            {
                "200": {"description": "an event stream",
                        "content": {"text/event-stream": {"schema": {"type": "string"}}}},
                "204": {"description": "past the end of a finished log: nothing will come"},
                "400": malformed, **refused, "503": full,
            },
            description="id: the seq_num; event: the kind; data: a Record as JSON. A heartbeat comment "
            "every 15 s. The response ends after the log's terminal record (eos or error).",
            parameters=[CAST_ID_PARAM, _SEQ_NUM, _LAST_EVENT_ID],
        )},
        "/api/casts/{id}/audio.mp3": {"get": op(
            "castAudio", "edge", "The playable audio as one MP3",
            {
                "200": {"description": "the MP3", "content": mp3},
                "206": {"description": "a byte range of the MP3", "content": mp3},
                "416": error_body("the range lies outside the audio"), **refused, "503": full,
            },
            description="While the cast is made: chunked, following the tail until eos. Once it ended: "
            "a Content-Length and byte ranges.",
            parameters=[CAST_ID_PARAM, _RANGE],
        )},
        "/api/casts/{id}/captions": {"get": op(
            "castCaptions", "edge", "The cast's words and sentences as WebVTT cues (so far, while it is made)",
            {"200": {"description": "WebVTT", "content": {"text/vtt": {"schema": {"type": "string"}}}},
             "400": error_body("cues is not all, words or sentences"), **refused},
            parameters=[CAST_ID_PARAM, {"name": "cues", "in": "query", "required": False,
                                        "schema": {"type": "string", "enum": ["all", "words", "sentences"]}}],
        )},
        "/api/edge/openapi.json": {"get": op(
            "edgeOpenapi", "edge", "This document, from edge",
            {"200": json_body({"type": "object"}, "An OpenAPI 3.1 document")},
        )},
        "/": {"get": op("pastePage", "edge", "The paste page: a form that POSTs to /generate", html)},
        "/docs": {"get": op("apiPage", "edge", "This document as an interactive page (Swagger UI)",
                            {**html, "404": error_body("swagger-ui-py is not installed")})},
        "/docs/assets/{name}": {"get": op(
            "apiPageAsset", "edge", "Swagger UI's files, from the swagger-ui-py wheel", file,
            parameters=[{"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}],
        )},
        "/c/{id}": {"get": op(
            "playerPage", "edge", "A cast's player page", {**html, "404": refused["404"]}, parameters=[CAST_ID_PARAM],
        )},
        "/static/{file}": {"get": op(
            "staticFile", "edge", "The pages' scripts and styles", file,
            parameters=[{"name": "file", "in": "path", "required": True, "schema": {"type": "string"}}],
        )},
    }  # fmt: skip
