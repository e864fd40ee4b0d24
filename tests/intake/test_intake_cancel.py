"""Cancel through intake: `POST /api/casts/{id}/cancel` (the admin token or an API key), the live
WebSocket's `cancel`, and a disconnect that cancels unless the client asked to keep the cast.
The worker's side is tests/synth/test_worker_cancel.py; here a test plays the worker."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import msgspec
import pytest
from aiohttp.test_utils import TestClient
from redis.asyncio import Redis

import castlog
from castlog import CastStore, Eos, LogReader

from .conftest import MakeClient
from .test_intake_live import receive_json, start, text_of, until_cancelled, worker_writes

Client = TestClient[Any, Any]
ADMIN = "admin-token-for-tests-0123456789abcdef"


async def announced(redis: Redis) -> list[str]:
    return [fields[b"id"].decode() for _, fields in await redis.xrange(castlog.CANCELS)]


@pytest.mark.rule("cancel-cuts-short")
async def test_post_cancel_wants_the_admin_token_or_a_key_and_flags_the_cast(
    make_client: MakeClient, redis: Redis
) -> None:
    client = await make_client(admin_token=ADMIN, api_keys=frozenset({"key-1-bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"}))
    resp = await client.post("/api/casts", json={"text": "Cancel me. Please."}, headers={"Authorization": "Bearer key-1-bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"})
    cast_id = (await resp.json())["id"]
    path = f"/api/casts/{cast_id}/cancel"
    for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": f"Basic {ADMIN}"}):
        resp = await client.post(path, headers=headers)
        assert resp.status == 401 and (await resp.json())["error"] == "unauthorized"
    assert not await castlog.is_cancelled(redis, cast_id)
    resp = await client.post(path, headers={"Authorization": f"Bearer {ADMIN}"})
    assert resp.status == 202 and await resp.json() == {"id": cast_id, "url": f"/c/{cast_id}", "cancelled": True}
    assert await castlog.is_cancelled(redis, cast_id) and await announced(redis) == [cast_id]
    resp = await client.post(path, headers={"Authorization": "Bearer key-1-bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"})
    assert resp.status == 202, "an API key may cancel too"
    tail = await LogReader(redis).tail(cast_id)
    await CastStore(redis).append(cast_id, tail, [Eos(sentences=0, audio_ms=0, attempts=1, cancelled=True)])
    resp = await client.post(path, headers={"Authorization": f"Bearer {ADMIN}"})
    assert resp.status == 409 and (await resp.json())["error"] == "cast_ended"
    for missing in ("AAAAAAAAAAAA", "not-an-id"):
        resp = await client.post(f"/api/casts/{missing}/cancel", headers={"Authorization": f"Bearer {ADMIN}"})
        assert resp.status == 404


@pytest.mark.rule("auth-failures-limited")
async def test_wrong_tokens_on_cancel_are_counted_and_limited(make_client: MakeClient, redis: Redis) -> None:
    """The cancel route compares the admin token and every key: guessing them there runs at
    INTAKE_AUTH_FAILURES_PER_MIN like on every other guarded route."""
    client = await make_client(admin_token=ADMIN, auth_failures_per_min=2)
    resp = await client.post("/api/casts", json={"text": "Keep me."})
    path = f"/api/casts/{(await resp.json())['id']}/cancel"
    wrong = {"Authorization": "Bearer " + "g" * 32}
    statuses = [(await client.post(path, headers=wrong)).status for _ in range(4)]
    assert statuses == [401, 401, 429, 429]
    resp = await client.post(path, headers={"Authorization": f"Bearer {ADMIN}"})
    assert resp.status == 429 and (await resp.json())["error"] == "too_many_failures"  # not even compared
    metrics = await (await client.get("/metrics")).text()
    assert 'streamtts_intake_auth_failures_total{credential="admin_token"} 3.0' in metrics


@pytest.mark.rule("cancel-cuts-short")
async def test_websocket_cancel_drops_the_text_and_done_says_cancelled(client: Client, redis: Redis) -> None:
    ws, cast_id = await start(client)
    await ws.send_json({"type": "text", "text": "One sentence. And a second one that"})
    await ws.send_json({"type": "cancel"})
    assert await until_cancelled(redis, cast_id)
    await ws.send_json({"type": "text", "text": " goes on."})
    assert (await receive_json(ws))["error"] == "cast_closed", "no text after a cancel"
    await worker_writes(CastStore(redis), cast_id, [("One sentence.", b"mp3-one")], end=False)
    tail = await LogReader(redis).tail(cast_id)
    await CastStore(redis).append(cast_id, tail, [Eos(sentences=1, audio_ms=24, attempts=1, cancelled=True)])
    got = [msg.data if msg.type == aiohttp.WSMsgType.BINARY else msgspec.json.decode(msg.data) async for msg in ws]
    assert got[-1] == {"type": "done", "sentences": 1, "audio_ms": 24, "cancelled": True}
    assert b"mp3-one" in got


@pytest.mark.rule("cancel-cuts-short")
async def test_a_client_that_disconnects_mid_cast_cancels_it_unless_it_keeps_it(client: Client, redis: Redis) -> None:
    ws, cast_id = await start(client)
    await ws.send_json({"type": "text", "text": "Talking over me. Stop"})
    await asyncio.sleep(0.1)
    await ws.close()
    assert await until_cancelled(redis, cast_id)
    assert (await text_of(redis, cast_id)).closed is None, "the text is dropped, not closed"
    kept, kept_id = await start(client, keep=True)
    await kept.send_json({"type": "text", "text": "Keep going."})
    await asyncio.sleep(0.1)
    await kept.close()
    for _ in range(100):
        if (await text_of(redis, kept_id)).closed is not None:
            break
        await asyncio.sleep(0.02)
    assert (await text_of(redis, kept_id)).closed is not None and not await castlog.is_cancelled(redis, kept_id)
