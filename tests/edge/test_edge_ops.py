"""Operations: OpenAPI, metrics names, health, graceful shutdown, settings, the pages."""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest
from aiohttp import ClientSession, web
from aiohttp.test_utils import TestClient, TestServer
from openapi_schema_validator import OAS31Validator
from openapi_spec_validator import validate

from castlog import CastStore
from durablestreams.openapi import durable_part
from edge import Config, create_app
from servicekit import ConfigError, answers
from servicekit.openapi import EdgeLimits, document
from tests.edge.edge_helpers import cast_id, read_events, write_cast
from tests.support.apps import MakeClient

METRICS_DOC = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"


def edge_metric_names() -> list[str]:
    """The names the edge section of docs/metrics.md promises."""
    section = METRICS_DOC.read_text().split("## edge", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `(streamtts_edge_[a-z_]+)`", section, re.MULTILINE)


def documented_operations(doc: dict[str, Any]) -> set[tuple[str, str]]:
    return {(path, method) for path, ops in doc["paths"].items() for method in ops}


def route_path(resource: Any) -> str:
    """A route as the document names it: a static folder is one path with a {file} parameter."""
    return f"{resource.canonical}/{{file}}" if isinstance(resource, web.StaticResource) else resource.canonical


def assert_matches(doc: dict[str, Any], path: str, status: str, instance: Any) -> None:
    schema = doc["paths"][path]["get"]["responses"][status]["content"]["application/json"]["schema"]
    OAS31Validator({**schema, "components": doc["components"]}).validate(instance)


async def answers_as_documented(doc: dict[str, Any], resp: Any, path: str, answer: type[answers.Answer]) -> None:
    """A real answer against the schema generated from the Struct that encoded it (which forbids
    unknown fields), and decoded by that Struct."""
    body = await resp.read()
    assert_matches(doc, path, str(resp.status), msgspec.json.decode(body))
    msgspec.json.decode(body, type=answer)
    schema = doc["paths"][path]["get"]["responses"][str(resp.status)]["content"]["application/json"]["schema"]
    assert schema == {"$ref": f"#/components/schemas/{answer.__name__}"}


async def test_openapi_document_is_the_public_origins_and_lists_every_route(
    edge: TestClient[Any, Any], edge_config: Config
) -> None:
    resp = await edge.get("/api/edge/openapi.json")
    assert resp.status == 200
    doc = await resp.json()
    validate(doc)
    assert doc == document(edge=EdgeLimits(edge_config.max_records_limit, edge_config.max_wait_s), parts=[durable_part()])
    routes = {
        (route_path(r.resource), r.method.lower())
        for r in edge.server.app.router.routes()
        if r.resource is not None and r.method != "HEAD"
    }
    assert len(routes) == 19  # /readyz too, and /v1/stream's reads
    assert routes <= documented_operations(doc)  # the pages too
    # The same document as intake's GET /api/openapi.json: intake's routes are in it.
    assert {("/api/casts", "post"), ("/generate", "post"), ("/api/voices", "get"), ("/api/openapi.json", "get")} \
        <= documented_operations(doc)


async def test_openapi_document_carries_edges_configured_limits(make_edge: MakeClient) -> None:
    edge = await make_edge(max_records_limit=7, max_wait_s=2.5)
    doc = await (await edge.get("/api/edge/openapi.json")).json()
    validate(doc)
    params = {p["name"]: p for p in doc["paths"]["/api/casts/{id}/records"]["get"]["parameters"]}
    assert params["limit"]["schema"]["maximum"] == 7 and params["wait"]["schema"]["maximum"] == 2.5
    # Intake's limits are intake's settings, which edge cannot know: named, not guessed.
    text = doc["components"]["schemas"]["CastRequest"]["properties"]["text"]
    assert "maxLength" not in text and "INTAKE_MAX_CHARS" in text["description"]


async def test_answers_match_their_documented_schemas(edge: TestClient[Any, Any], store: CastStore) -> None:
    doc = await (await edge.get("/api/edge/openapi.json")).json()
    cid = cast_id()
    await write_cast(store, cid, ["One.", "Two."])
    await answers_as_documented(doc, await edge.get(f"/api/casts/{cid}"), "/api/casts/{id}", answers.CastState)
    page = await edge.get(f"/api/casts/{cid}/records")
    await answers_as_documented(doc, page, "/api/casts/{id}/records", answers.RecordPage)
    missing = await edge.get(f"/api/casts/{cast_id('missing')}/records")
    assert missing.status == 404
    await answers_as_documented(doc, missing, "/api/casts/{id}/records", answers.Error)
    await answers_as_documented(doc, await edge.get("/healthz"), "/healthz", answers.Health)


async def test_metrics_endpoint_has_every_documented_edge_metric(edge: TestClient[Any, Any], store: CastStore) -> None:
    cid = cast_id()
    await write_cast(store, cid, ["One.", "Two."])
    await read_events(await edge.get(f"/api/casts/{cid}/events"))
    text = await (await edge.get("/metrics")).text()
    names = edge_metric_names()
    assert len(names) == 8  # the tail rewinds counter included (docs/metrics.md lists every metric)
    for name in names:
        assert re.search(rf"^{name}(_bucket|_count|_sum)?(\{{| )", text, re.MULTILINE), name
    assert "streamtts_edge_records_delivered_total 5.0" in text
    assert 'streamtts_edge_requests_total{route="/api/casts/{id}/events",status="200"} 1.0' in text


async def test_healthz_answers_ok(edge: TestClient[Any, Any]) -> None:
    resp = await edge.get("/healthz")
    assert resp.status == 200 and (await resp.json())["status"] == "ok"


async def test_shutdown_closes_live_streams_at_once_with_a_resumable_id(edge_config: Config, store: CastStore) -> None:
    cid = cast_id()
    await write_cast(store, cid, ["One.", "Two."], finish=False)
    server = TestServer(create_app(edge_config), host="127.0.0.1")
    await server.start_server()
    async with ClientSession() as session:
        resp = await session.get(server.make_url(f"/api/casts/{cid}/events"))
        reader = asyncio.create_task(read_events(resp, timeout_s=10))
        await asyncio.sleep(0.2)
        started = time.monotonic()
        await server.close()
        events = await reader
        assert time.monotonic() - started < 2  # not the shutdown timeout, not the next heartbeat
    assert [e.id for e in events] == ["0", "1", "2", "3"]  # resume with Last-Event-ID: 3


async def test_pages_are_served(edge: TestClient[Any, Any]) -> None:
    index = await edge.get("/")
    assert index.status == 200 and "text/html" in index.headers["Content-Type"]
    assert "<form" in await index.text()
    player = await edge.get(f"/c/{cast_id()}")
    assert player.status == 200 and 'id="captions"' in await player.text()
    for asset in ("app.js", "player.js", "style.css"):
        resp = await edge.get(f"/static/{asset}")
        assert resp.status == 200, asset


def test_settings_come_from_the_environment() -> None:
    cfg = Config.from_env({"EDGE_PORT": "9999", "EDGE_LISTENER_QUEUE": "7", "REDIS_URL": "redis://r:1/2",
                           "FORWARDED_ALLOW_IPS": "10.0.0.1, 10.0.0.2"})
    assert (cfg.port, cfg.listener_queue, cfg.redis_url) == (9999, 7, "redis://r:1/2")
    assert cfg.forwarded_allow_ips == frozenset({"10.0.0.1", "10.0.0.2"})
    assert Config.from_env({}) == Config()


@pytest.mark.parametrize("env", [{"EDGE_LISTENER_QUEUE": "0"}, {"EDGE_PORT": "x"}, {"EDGE_MAX_WAIT_S": "-1"}])
def test_unusable_settings_are_named(env: dict[str, str]) -> None:
    with pytest.raises(ConfigError, match=next(iter(env))):
        Config.from_env(env)


def test_the_removed_item_cache_setting_still_set_refuses_to_start_naming_what_replaced_it() -> None:
    with pytest.raises(ConfigError, match="^EDGE_ITEM_CACHE_BYTES was removed: .*EDGE_ROW_CACHE_BYTES.*; unset it$"):
        Config.from_env({"EDGE_ITEM_CACHE_BYTES": "1000000"})
