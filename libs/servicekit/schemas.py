"""The OpenAPI schemas that msgspec types define: generated, so that they cannot drift.

A record's kind and headers come from castlog's ``Record`` union (a new kind or field appears here
by itself), a request body from the Struct that decodes it (``forms.py``) and a JSON answer from
the Struct that encodes it (``answers.py``). What a route adds around them (the seq_num of a
record, a body's configured limits) is written in ``openapi*.py``.
"""

from __future__ import annotations

import typing
from typing import Any

import msgspec

from castlog import Record

from .answers import ANSWERS
from .forms import CastForm, CloseForm, LiveMessage, OpenForm, SpeakBody, SpeechRequest, TextForm

Json = dict[str, Any]

REF_TEMPLATE = "#/components/schemas/{name}"
# What a record's public headers leave out: the tag (it is the record's `kind`) and the audio body
# (the record's `body`, base64).
NOT_HEADERS = ("e", "body")
# Each request body by the name the document gives it (its Struct is named for how it is decoded).
BODIES: dict[str, type[msgspec.Struct]] = {
    "CastRequest": CastForm, "LiveOpenRequest": OpenForm, "LiveText": TextForm, "LiveClose": CloseForm,
    "SpeechRequest": SpeechRequest, "DeepgramSpeakRequest": SpeakBody,
}
RECORD_TYPES: tuple[type[msgspec.Struct], ...] = typing.get_args(Record)


def record_kinds() -> list[str]:
    """Every kind of the cast log, in the union's order: meta, start, audio, eos, error."""
    return [t.__struct_config__.tag for t in RECORD_TYPES]  # type: ignore[misc]


def header_schemas() -> Json:
    """``<Kind>Headers`` for each record type: its fields as a reader gets them in ``headers``."""
    _, components = msgspec.json.schema_components(RECORD_TYPES, ref_template=REF_TEMPLATE)
    out: Json = {}
    for cls in RECORD_TYPES:
        schema = components[cls.__name__]
        schema["properties"] = {k: v for k, v in schema["properties"].items() if k not in NOT_HEADERS}
        schema["required"] = [k for k in schema.get("required", []) if k not in NOT_HEADERS]
        schema["title"] = f"{cls.__name__}Headers"
        schema["description"] = f"the headers of a {cls.__struct_config__.tag} record (a field at its default is left out)"
        out[f"{cls.__name__}Headers"] = schema
    return out


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
