"""The public origin's OpenAPI document as castlog builds it for both services."""

from __future__ import annotations

import pytest
from openapi_spec_validator import validate

from servicekit.openapi import EdgeLimits, IntakeLimits, document

INTAKE = IntakeLimits(max_chars=1000, max_title_chars=50, max_body_bytes=9000)
EDGE = EdgeLimits(max_records_limit=25, max_wait_s=12.5)


@pytest.mark.parametrize(("intake", "edge"), [(None, None), (INTAKE, None), (None, EDGE), (INTAKE, EDGE)])
def test_document_is_valid_whichever_limits_are_known(intake: IntakeLimits | None, edge: EdgeLimits | None) -> None:
    doc = document(intake, edge)
    validate(doc)
    operation_ids = [op["operationId"] for ops in doc["paths"].values() for op in ops.values()]
    assert len(operation_ids) == len(set(operation_ids)) == 28  # 15, the live casts' 3, the delete, /v1's 5, captions, /docs 2, /readyz


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
