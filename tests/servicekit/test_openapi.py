"""The public origin's OpenAPI document as servicekit builds it for both services."""

from __future__ import annotations

import dataclasses

import jsonschema
import msgspec
import pytest
from openapi_spec_validator import validate

from castlog import Audio, CastState, Eos, Error, Meta, Queued, Record, Start
from castlog.records import encode_headers
from durablestreams.openapi import durable_part
from servicekit.openapi import EdgeLimits, IntakeLimits, document

INTAKE = IntakeLimits(max_chars=1000, max_title_chars=50, max_body_bytes=9000)
EDGE = EdgeLimits(max_records_limit=25, max_wait_s=12.5)


@pytest.mark.parametrize(("intake", "edge"), [(None, None), (INTAKE, None), (None, EDGE), (INTAKE, EDGE)])
def test_document_is_valid_whichever_limits_are_known(intake: IntakeLimits | None, edge: EdgeLimits | None) -> None:
    doc = document(intake, edge, [durable_part()])
    validate(doc)
    operation_ids = [op["operationId"] for ops in doc["paths"].values() for op in ops.values()]
    # 15, the live casts' 4 (WebRTC's offer), the cancel, /v1/speak's 2, the delete, /v1's 5, captions, /docs 2, /readyz,
    # /v1/stream's 10
    assert len(operation_ids) == len(set(operation_ids)) == 42


def test_known_limits_are_numbers_and_unknown_ones_are_named() -> None:
    known = document(INTAKE, EDGE)
    text = known["components"]["schemas"]["CastRequest"]["properties"]["text"]
    assert text["maxLength"] == 1000 and "at most 1000 characters" in text["description"]
    limit = known["paths"]["/s2/records"]["get"]["parameters"][2]
    assert limit["name"] == "limit" and limit["schema"]["maximum"] == 25
    unknown = document()
    text = unknown["components"]["schemas"]["CastRequest"]["properties"]["text"]
    assert "maxLength" not in text and "INTAKE_MAX_CHARS" in text["description"]
    assert unknown["paths"]["/generate"]["post"]["requestBody"]["description"] == "At most INTAKE_MAX_BODY_BYTES bytes."


def test_each_document_is_fresh_data_sharing_nothing() -> None:
    doc = document(INTAKE, EDGE)
    doc["paths"]["/api/casts/{id}"]["get"]["parameters"][0]["name"] = "changed"
    doc["paths"]["/extra"] = {}
    assert doc["paths"]["/c/{id}"]["get"]["parameters"][0]["name"] == "id"  # not the same object
    assert document(INTAKE, EDGE) != doc
    assert document(INTAKE, EDGE) == document(INTAKE, EDGE)


def test_record_and_state_schemas_follow_castlogs_types() -> None:
    schemas = document()["components"]["schemas"]
    assert schemas["Record"]["properties"]["kind"]["enum"] == ["meta", "start", "audio", "eos", "error", "queue"]
    state = schemas["CastState"]
    public = [f.name for f in dataclasses.fields(CastState) if not f.name.startswith("_")]
    assert set(public) <= set(state["properties"]) and set(public) <= set(state["required"])
    assert "_audio" not in state["properties"]
    assert state["properties"]["status"]["enum"] == sorted(["queued", "generating", "done", "error"])


@pytest.mark.parametrize("record", [
    Meta(title="t", voice="af_heart", chars=5, sentences=1, created_at=1, speed=1.5),
    Start(attempt=1, resume_from=0, at=2),
    Audio(i=0, t="Hello.", d=800, o=0, w=(("Hello", 0, 400),), body=b"mp3"),
    Eos(sentences=1, audio_ms=800, attempts=1),
    Error(reason="boom", attempts=3),
    Queued(pos=2, eta_ms=12_000),
])
def test_stored_headers_validate_against_their_generated_schema(record: Record) -> None:
    doc = document()
    headers = msgspec.json.decode(encode_headers(record))
    headers.pop("e")
    schema = {**doc["components"]["schemas"][f"{type(record).__name__}Headers"], "components": doc["components"]}
    jsonschema.validate(headers, schema)
    with pytest.raises(jsonschema.ValidationError):  # a required field missing is caught
        jsonschema.validate({}, schema)
