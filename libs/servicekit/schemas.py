"""The OpenAPI schemas that msgspec types define: generated, so that they cannot drift.

A record's kind and headers come from castlog's ``Record`` union (a new kind or field appears here
by itself; edge's wrapping of it, the seq_num and the rest, is written here), a request body from
the Struct that decodes it (``forms.py``) and a JSON answer from the Struct that encodes it
(``answers.py``). What a route adds around them (a body's configured limits) is written in
``openapi*.py``.
"""

from __future__ import annotations

import typing

import msgspec

from castlog import Record

from .answers import ANSWERS
from .forms import CastForm, CloseForm, LiveMessage, OpenForm, SpeakBody, SpeechRequest, TextForm
from .openapi_parts import REF_TEMPLATE, Json, ref

# What a record's public headers leave out: the tag (it is the record's `kind`) and the audio body
# (the record's `body`, base64).
NOT_HEADERS = ("e", "body")
# Each request body by the name the document gives it (its Struct is named for how it is decoded).
BODIES: dict[str, type[msgspec.Struct]] = {
    "CastRequest": CastForm, "LiveOpenRequest": OpenForm, "LiveText": TextForm, "LiveClose": CloseForm,
    "SpeechRequest": SpeechRequest, "DeepgramSpeakRequest": SpeakBody,
}
RECORD_TYPES: tuple[type[msgspec.Struct], ...] = typing.get_args(Record)


def record_schemas() -> Json:
    """A record as edge's JSON routes give it (``Record``): its kinds, and ``<Kind>Headers`` for each
    record type, its fields as a reader gets them in ``headers``."""
    _, components = msgspec.json.schema_components(RECORD_TYPES, ref_template=REF_TEMPLATE)
    headers: Json = {}
    for cls in RECORD_TYPES:
        schema = components[cls.__name__]
        schema["properties"] = {k: v for k, v in schema["properties"].items() if k not in NOT_HEADERS}
        schema["required"] = [k for k in schema.get("required", []) if k not in NOT_HEADERS]
        schema["title"] = f"{cls.__name__}Headers"
        schema["description"] = f"the headers of a {cls.__struct_config__.tag} record (a field at its default is left out)"
        headers[f"{cls.__name__}Headers"] = schema
    return {
        **headers,
        "Record": {
            "type": "object",
            "required": ["seq_num", "kind", "ts", "headers", "body"],
            "properties": {
                "seq_num": {"type": "integer", "minimum": 0},
                "kind": {"type": "string", "enum": [cls.__struct_config__.tag for cls in RECORD_TYPES]},
                "ts": {"type": "integer", "description": "ms since the epoch when Redis appended it"},
                "headers": {"anyOf": [ref(name) for name in headers],
                            "description": "the record's fields without e and body (the schema of its kind)"},
                "body": {"type": ["string", "null"], "description": "audio: the MP3 chunk in base64"},
            },
        },
    }


def generated_schemas() -> Json:
    """The schema of each JSON answer (``answers.py``), named by its Struct, with those it nests; of
    each request body, named as ``BODIES`` says; and of the live session's client messages
    (``LiveMessage``) with each of its members."""
    (messages, *_), components = msgspec.json.schema_components(
        [LiveMessage, *ANSWERS, *BODIES.values()], ref_template=REF_TEMPLATE
    )
    for name, form in BODIES.items():
        components[name] = {**components.pop(form.__name__), "title": name}
    return {**components, "LiveMessage": messages}
