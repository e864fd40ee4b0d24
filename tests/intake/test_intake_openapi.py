"""The OpenAPI document: valid, lists every route, and describes what the routes really answer."""

from __future__ import annotations

import copy
from typing import Any

from aiohttp.test_utils import TestClient
from openapi_schema_validator import OAS31Validator
from openapi_spec_validator import validate

from intake.openapi import document

Client = TestClient[Any, Any]


def schema_of(doc: dict[str, Any], path: str, method: str, status: str, ctype: str = "application/json") -> Any:
    return doc["paths"][path][method]["responses"][status]["content"][ctype]["schema"]


def assert_matches(doc: dict[str, Any], schema: dict[str, Any], instance: Any) -> None:
    # The components travel with the schema so that its "#/components/..." references resolve.
    OAS31Validator({**schema, "components": doc["components"]}).validate(instance)


def test_document_is_a_valid_openapi_31_document() -> None:
    doc = document()
    validate(doc)
    assert doc["openapi"].startswith("3.1")


def test_document_is_fresh_data_a_caller_may_change() -> None:
    doc = document()
    doc["paths"]["/edge"] = {}
    assert "/edge" not in document()["paths"]
    assert copy.deepcopy(document()) == document()


async def test_document_lists_every_route_of_the_app(client: Client) -> None:
    served = await (await client.get("/api/openapi.json")).json()
    assert client.app is not None
    routes = {
        (route.resource.canonical, route.method.lower())
        for route in client.app.router.routes()
        if route.resource is not None and route.method != "HEAD"
    }
    documented = {(path, method) for path, ops in served["paths"].items() for method in ops}
    assert routes == documented
    assert len(routes) == 6


async def test_served_document_carries_the_configured_limits(make_client: Any) -> None:
    client = await make_client(max_chars=1234, max_title_chars=99)
    served = await (await client.get("/api/openapi.json")).json()
    validate(served)
    props = served["components"]["schemas"]["CastRequest"]["properties"]
    assert props["text"]["maxLength"] == 1234 and props["title"]["maxLength"] == 99


async def test_answers_match_their_documented_schemas(client: Client) -> None:
    doc = document()
    created = await client.post("/api/casts", json={"text": "Hello."})
    assert_matches(doc, schema_of(doc, "/api/casts", "post", "201"), await created.json())
    existing = await client.post("/generate", json={"text": "Hello."})
    assert_matches(doc, schema_of(doc, "/generate", "post", "200"), await existing.json())
    refused = await client.post("/api/casts", json={"text": 1})
    assert_matches(doc, schema_of(doc, "/api/casts", "post", "422"), await refused.json())
    voices = await client.get("/api/voices")
    assert_matches(doc, schema_of(doc, "/api/voices", "get", "200"), await voices.json())
    health = await client.get("/healthz")
    assert_matches(doc, schema_of(doc, "/healthz", "get", "200"), await health.json())
