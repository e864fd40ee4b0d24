"""Finding 6 of #21: a page on another site could drive intake through its visitor's browser (a
form post to /generate, the live WebSocket) and a rebound name reached a local instance. Each
test here was answered 303 / 101 / 201 before the guard."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestClient
from redis.asyncio import Redis

from servicekit.crosssite import host_allowed, origin_allowed

from .conftest import MakeClient, keys_besides_rate_limits

Client = TestClient[Any, Any]
EVIL = "http://evil.example"
FORM = {"text": "A form post from somewhere.", "voice": "af_heart"}


def served(client: Client) -> str:
    return f"http://127.0.0.1:{client.port}"


@pytest.mark.rule("cross-site-refused")
@pytest.mark.parametrize("origin", [EVIL, "null", "http://127.0.0.1:1"])
async def test_a_cross_site_form_post_is_refused_and_leaves_no_trace(client: Client, redis: Redis, origin: str) -> None:
    resp = await client.post("/generate", data=FORM, headers={"Origin": origin}, allow_redirects=False)
    assert (resp.status, (await resp.json())["error"]) == (403, "cross_site")
    assert await keys_besides_rate_limits(redis) == set()


@pytest.mark.rule("cross-site-refused")
async def test_a_same_origin_or_allowed_form_post_or_one_without_origin_goes_through(make_client: MakeClient) -> None:
    client = await make_client(allowed_origins=frozenset({"https://app.example"}))
    for headers in ({"Origin": served(client)}, {"Origin": "https://app.example"}, {}):
        resp = await client.post("/generate", data=FORM, headers=headers, allow_redirects=False)
        assert resp.status == 303, (headers, await resp.text())


@pytest.mark.rule("cross-site-refused")
async def test_a_cross_site_websocket_is_refused_before_it_opens_a_cast(client: Client, redis: Redis) -> None:
    with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
        await client.ws_connect("/v1/audio/speech/live", headers={"Origin": EVIL})
    assert refused.value.status == 403
    ws = await client.ws_connect("/v1/audio/speech/live", headers={"Origin": served(client)})
    await ws.send_json({"type": "start"})
    assert (await ws.receive_json(timeout=10))["type"] == "cast"
    await ws.close()


async def test_json_sent_as_text_plain_is_still_refused(client: Client, redis: Redis) -> None:
    """A cross-site page may post text/plain without a preflight: JSON routes take only JSON."""
    resp = await client.post("/api/casts", data=b'{"text": "Hi."}', headers={"Content-Type": "text/plain"})
    assert resp.status == 415
    assert await keys_besides_rate_limits(redis) == set()


@pytest.mark.rule("cross-site-refused")
async def test_a_rebound_host_name_is_refused_and_addresses_and_listed_names_pass(
    make_client: MakeClient, redis: Redis
) -> None:
    client = await make_client(allowed_hosts=frozenset({"localhost"}))
    resp = await client.post("/api/casts", json={"text": "Hi."}, headers={"Host": f"evil.example:{client.port}"})
    assert (resp.status, (await resp.json())["error"]) == (403, "unknown_host")
    assert (await client.get("/api/voices", headers={"Host": "evil.example"})).status == 403
    assert await keys_besides_rate_limits(redis) == set()
    assert (await client.get("/readyz", headers={"Host": "evil.example"})).status == 200  # a probe passes
    for host in (f"localhost:{client.port}", f"127.0.0.1:{client.port}", "[::1]:80", "LocalHost"):
        assert (await client.get("/api/voices", headers={"Host": host})).status == 200, host


def test_origin_and_host_rules() -> None:
    assert origin_allowed(None, "a:1", frozenset()) and origin_allowed("http://a:1", "a:1", frozenset())
    assert origin_allowed("https://Tts.Example", "tts.example", frozenset())
    assert not origin_allowed("http://a:2", "a:1", frozenset()) and not origin_allowed("null", "null", frozenset())
    assert not origin_allowed("http://a:1", None, frozenset()) and origin_allowed("x://y", "a", frozenset({"x://y"}))
    assert host_allowed("anything", frozenset()) and not host_allowed(None, frozenset({"a"}))
    assert host_allowed("10.0.0.5:8080", frozenset({"a"})) and not host_allowed("a.example", frozenset({"a"}))
