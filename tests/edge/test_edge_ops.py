"""Operations: OpenAPI, metrics names, health, graceful shutdown, settings, the pages."""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path
from typing import Any

import pytest
from aiohttp import ClientSession
from aiohttp.test_utils import TestClient, TestServer
from openapi_spec_validator import validate

from castlog import CastStore
from edge import Config, create_app
from edge.config import ConfigError
from edge.openapi import SPEC
from edge_helpers import cast_id, read_events, write_cast

METRICS_DOC = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"


def edge_metric_names() -> list[str]:
    """The names the edge section of docs/metrics.md promises."""
    section = METRICS_DOC.read_text().split("## edge", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `(streamtts_edge_[a-z_]+)`", section, re.MULTILINE)


async def test_openapi_document_is_valid_and_lists_every_route(edge: TestClient[Any, Any]) -> None:
    resp = await edge.get("/api/edge/openapi.json")
    assert resp.status == 200
    spec = await resp.json()
    validate(spec)
    assert spec == SPEC
    routes = {r.resource.canonical for r in edge.server.app.router.routes() if r.method == "GET"}
    documented = set(spec["paths"])
    pages = {"/", "/c/{id}", "/static"}
    assert routes - pages <= documented


async def test_metrics_endpoint_has_every_documented_edge_metric(edge: TestClient[Any, Any], store: CastStore) -> None:
    cid = cast_id()
    await write_cast(store, cid, ["One.", "Two."])
    await read_events(await edge.get(f"/api/casts/{cid}/events"))
    text = await (await edge.get("/metrics")).text()
    names = edge_metric_names()
    assert len(names) == 7
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
