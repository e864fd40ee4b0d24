"""GET /api/openapi.json: the public origin's one document (intake's and edge's routes), valid,
listing every route of intake's app, and describing what the routes really answer."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import msgspec
import pytest
from aiohttp.test_utils import TestClient
from jsonschema import ValidationError
from openapi_schema_validator import OAS31Validator
from openapi_spec_validator import validate

from durablestreams.openapi import durable_part
from intake import Config
from intake.speech.formats import CONTENT_TYPES
from intake.speech.livemessages import Invalid, decode_message
from servicekit import answers
from servicekit.openapi import IntakeLimits, document

from .conftest import MakeClient

Client = TestClient[Any, Any]
# A few of edge's routes: intake's document must carry them although intake never serves them.
EDGE_ROUTES = {
    ("/api/casts/{id}", "get"),
    ("/api/casts/{id}/records", "get"),
    ("/api/casts/{id}/events", "get"),
    ("/api/casts/{id}/audio.mp3", "get"),
    ("/api/edge/openapi.json", "get"),
    ("/c/{id}", "get"),
}


def schema_of(doc: dict[str, Any], path: str, method: str, status: str, ctype: str = "application/json") -> Any:
    return doc["paths"][path][method]["responses"][status]["content"][ctype]["schema"]


def schema_of_body(doc: dict[str, Any], path: str) -> Any:
    return doc["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]


def assert_matches(doc: dict[str, Any], schema: dict[str, Any], instance: Any) -> None:
    # The components travel with the schema so that its "#/components/..." references resolve.
    OAS31Validator({**schema, "components": doc["components"]}).validate(instance)


def operations(doc: dict[str, Any]) -> set[tuple[str, str]]:
    return {(path, method) for path, ops in doc["paths"].items() for method in ops}


async def served(client: Client) -> dict[str, Any]:
    resp = await client.get("/api/openapi.json")
    assert resp.status == 200 and resp.content_type == "application/json"
    return await resp.json()  # type: ignore[no-any-return]


async def test_served_document_is_a_valid_openapi_31_document_of_both_services(
    client: Client, intake_config: Config
) -> None:
    doc = await served(client)
    validate(doc)
    assert doc["openapi"].startswith("3.1")
    assert EDGE_ROUTES <= operations(doc)
    assert {("/api/casts", "post"), ("/generate", "post"), ("/api/voices", "get")} <= operations(doc)
    cfg = intake_config
    assert doc == document(intake=IntakeLimits(cfg.max_chars, cfg.max_title_chars, cfg.max_body_bytes),
                           parts=[durable_part()])


async def test_document_lists_every_route_of_the_app(client: Client) -> None:
    doc = await served(client)
    assert client.app is not None
    routes = {
        (route.resource.canonical, route.method.lower())
        for route in client.app.router.routes()
        if route.resource is not None and route.method != "HEAD"
    }
    assert len(routes) == 23  # 6, the live casts' text, close, WebSocket and WebRTC routes, the delete, the cancel,
    # /v1's 5, /v1/speak's WebSocket and POST, /readyz, /v1/stream's PUT, POST and DELETE
    assert routes <= operations(doc)


async def test_served_document_carries_the_configured_limits(make_client: MakeClient) -> None:
    client = await make_client(max_chars=1234, max_title_chars=99, max_body_bytes=5678)
    doc = await served(client)
    validate(doc)
    props = doc["components"]["schemas"]["CastRequest"]["properties"]
    assert props["text"]["maxLength"] == 1234 and props["title"]["maxLength"] == 99
    assert doc["paths"]["/api/casts"]["post"]["requestBody"]["description"] == "At most 5678 bytes."
    # Edge's limits are edge's settings, which intake cannot know: named, not guessed.
    limit = next(p for p in doc["paths"]["/api/casts/{id}/records"]["get"]["parameters"] if p["name"] == "limit")
    assert "maximum" not in limit["schema"] and "EDGE_MAX_RECORDS_LIMIT" in limit["description"]


async def test_answers_match_their_documented_schemas(make_client: MakeClient) -> None:
    client = await make_client(rate=0.01, burst=2)
    doc = await served(client)
    refused = await client.post("/api/casts", json={"text": 1})  # while the bucket holds tokens: a 422 spends none
    assert refused.status == 422
    assert_matches(doc, schema_of(doc, "/api/casts", "post", "422"), await refused.json())
    created = await client.post("/api/casts", json={"text": "Hello."})
    assert created.status == 201
    assert_matches(doc, schema_of(doc, "/api/casts", "post", "201"), await created.json())
    existing = await client.post("/generate", json={"text": "Hello."})
    assert existing.status == 200
    assert_matches(doc, schema_of(doc, "/generate", "post", "200"), await existing.json())
    limited = await client.post("/api/casts", json={"text": "Another."})
    assert limited.status == 429
    assert_matches(doc, schema_of(doc, "/api/casts", "post", "429"), await limited.json())
    assert "Retry-After" in doc["paths"]["/api/casts"]["post"]["responses"]["429"]["headers"]
    voices = await client.get("/api/voices")
    assert_matches(doc, schema_of(doc, "/api/voices", "get", "200"), await voices.json())
    health = await client.get("/healthz")
    assert_matches(doc, schema_of(doc, "/healthz", "get", "200"), await health.json())


def test_request_schemas_say_what_the_decoders_take() -> None:
    """The bodies' schemas are generated from the Structs that decode them: /api/casts refuses an
    unknown field and /v1/audio/speech accepts one, and so do their schemas."""
    doc = document()
    schemas = doc["components"]["schemas"]
    assert_matches(doc, schemas["CastRequest"], {"text": "Hello.", "voice": None, "speed": 1.5})
    with pytest.raises(ValidationError):
        assert_matches(doc, schemas["CastRequest"], {"text": "Hello.", "extra": 1})
    with pytest.raises(ValidationError):
        assert_matches(doc, schemas["CastRequest"], {"text": "Hello.", "speed": 9})
    assert_matches(doc, schemas["SpeechRequest"], {"model": "tts-1", "input": "Hi.", "voice": "alloy", "extra": 1})
    # Each documented format is one the route converts to.
    assert schemas["SpeechRequest"]["properties"]["response_format"]["enum"] == list(CONTENT_TYPES)
    open_body = schema_of_body(doc, "/api/casts")
    assert_matches(doc, open_body, {"live": True, "voice": "af_heart"})
    with pytest.raises(ValidationError):
        assert_matches(doc, open_body, {"live": False})
    # The live WebSocket's client messages: the union its decoder takes.
    for message in ({"type": "start", "format": "pcm", "keep": True}, {"type": "text", "text": "Hi."}, {"type": "cancel"}):
        assert_matches(doc, schemas["LiveMessage"], message)
        assert not isinstance(decode_message(json.dumps(message)), Invalid)
    with pytest.raises(ValidationError):
        assert_matches(doc, schemas["LiveMessage"], {"type": "speak", "text": "Hi."})
    assert isinstance(decode_message('{"type": "speak", "text": "Hi."}'), Invalid)


# The answers only edge gives (tests/edge/test_edge_ops.py checks them).
EDGE_ANSWERS = {answers.CastState, answers.RecordPage}
ADMIN = "admin-token-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"


async def answers_as_documented(
    doc: dict[str, Any], resp: aiohttp.ClientResponse, path: str, method: str, answer: type[answers.Answer]
) -> type[answers.Answer]:
    """A real answer: the documented schema of its route and status takes it (a field it lacks or
    one too many fails: the generated schema forbids unknown ones), the Struct that encodes it
    decodes it, and the schema is that Struct's."""
    schema = schema_of(doc, path, method, str(resp.status))
    body = await resp.read()
    assert_matches(doc, schema, json.loads(body))
    msgspec.json.decode(body, type=answer)
    refs = [schema, *schema.get("oneOf", [])]
    assert {"$ref": f"#/components/schemas/{answer.__name__}"} in refs, (path, resp.status)
    return answer


async def test_every_json_answer_is_its_structs_generated_schema(make_client: MakeClient) -> None:
    """Each JSON answer intake sends, from its app over real Redis, against the schema generated
    from the Struct that encoded it; together they are every answer but edge's."""
    client = await make_client(admin_token=ADMIN, delete_wait_s=0.05)
    doc = await served(client)
    admin = {"Authorization": f"Bearer {ADMIN}"}
    seen: set[type[answers.Answer]] = set()

    async def check(resp: aiohttp.ClientResponse, path: str, method: str, answer: type[answers.Answer]) -> Any:
        seen.add(await answers_as_documented(doc, resp, path, method, answer))
        return await resp.json()

    created = await check(await client.post("/api/casts", json={"text": "Hello."}), "/api/casts", "post", answers.Cast)
    await check(await client.post("/api/casts", json={"text": 1}), "/api/casts", "post", answers.Error)
    await check(await client.get("/api/voices"), "/api/voices", "get", answers.Voices)
    await check(await client.get("/healthz"), "/healthz", "get", answers.Health)
    ready = await check(await client.get("/readyz"), "/readyz", "get", answers.Health)
    assert ready["voices"] == 6 and ready["default"] == "af_heart"
    cancel = f"/api/casts/{created['id']}/cancel"
    await check(await client.post(cancel, headers=admin), "/api/casts/{id}/cancel", "post", answers.Cancelled)
    deleted = await client.delete(f"/api/casts/{created['id']}", headers=admin)  # no worker: asked, not confirmed
    assert (await check(deleted, "/api/casts/{id}", "delete", answers.Deleted))["status"] == "asked"
    opened = await check(await client.post("/api/casts", json={"live": True}), "/api/casts", "post", answers.LiveOpened)
    writer = {"Authorization": f"Bearer {opened['write_token']}"}
    text, close = "/api/casts/{id}/text", "/api/casts/{id}/close"
    sent = await client.post(opened["text"], json={"text": "Hi. ", "offset": 0}, headers=writer)
    await check(sent, text, "post", answers.LiveState)
    gap = await check(await client.post(opened["text"], json={"text": "x", "offset": 9}, headers=writer), text, "post",
                      answers.LiveError)
    assert gap["offset"] == 4
    await check(await client.post(opened["close"], json={}, headers=writer), close, "post", answers.LiveClosed)
    await check(await client.get("/v1/models"), "/v1/models", "get", answers.ModelList)
    await check(await client.get("/v1/audio/models"), "/v1/audio/models", "get", answers.AudioModels)
    await check(await client.get("/v1/audio/voices"), "/v1/audio/voices", "get", answers.V1Voices)
    await check(await client.get("/v1/models/whisper"), "/v1/models/{model}", "get", answers.OpenAIError)
    await check(await client.post("/v1/speak", json={"words": "Hi."}), "/v1/speak", "post", answers.DeepgramError)
    assert seen == set(answers.ANSWERS) - EDGE_ANSWERS
