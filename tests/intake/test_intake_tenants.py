"""Tenants (API keys) apart: each has a cache of its own (a guessed text tells nothing of another's
casts), a key cancels only the casts submitted with it, and /v1/audio/voices lists only the blends
its own tenant used."""

from __future__ import annotations

import asyncio

import pytest
from redis.asyncio import Redis

import castlog
from castlog import CastStore, content_id
from intake.claim import cache_key, key_tag

from .conftest import MakeClient
from .test_intake_v1 import CHUNKS, SPEECH, play_worker

ADMIN = "admin-token-for-tests-0123456789abcdef"
KEY_A = "tenant-a-key-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
KEY_B = "tenant-b-key-bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def test_a_key_cancels_its_own_casts_not_another_tenants(make_client: MakeClient, redis: Redis) -> None:
    client = await make_client(admin_token=ADMIN, api_keys=frozenset({KEY_A, KEY_B}))
    resp = await client.post("/api/casts", json={"text": "Tenant A's text. Its own."}, headers=bearer(KEY_A))
    assert resp.status == 201, await resp.text()
    cast_id = (await resp.json())["id"]
    path = f"/api/casts/{cast_id}/cancel"
    resp = await client.post(path, headers=bearer(KEY_B))
    assert resp.status == 404 and (await resp.json())["error"] == "not_found"  # as if it were not there
    assert not await castlog.is_cancelled(redis, cast_id)
    resp = await client.post(path, headers=bearer(KEY_A))
    assert resp.status == 202, await resp.text()
    assert await castlog.is_cancelled(redis, cast_id)


@pytest.mark.rule("tenant-cache")
async def test_a_guessed_text_tells_a_tenant_nothing_of_another_tenants_casts(
    make_client: MakeClient, redis: Redis
) -> None:
    client = await make_client(admin_token=ADMIN, api_keys=frozenset({KEY_A, KEY_B}))
    text = {"text": "A private letter. Its title is private too.", "title": "Dear B"}
    first = await client.post("/api/casts", json=text, headers=bearer(KEY_A))
    guess = await client.post("/api/casts", json={**text, "title": ""}, headers=bearer(KEY_B))
    # B's guess makes B's own cast: not `existing`, not A's id (nor A's title and time behind it)
    assert (first.status, guess.status) == (201, 201)
    a_id, b_id = (await first.json())["id"], (await guess.json())["id"]
    assert a_id != b_id and (await guess.json())["status"] == "new"
    again = await client.post("/api/casts", json=text, headers=bearer(KEY_A))
    assert again.status == 200 and (await again.json())["id"] == a_id, "a tenant's own repeat is a cache hit"
    assert (await client.post(f"/api/casts/{a_id}/cancel", headers=bearer(KEY_B))).status == 404
    assert (await client.post(f"/api/casts/{a_id}/cancel", headers=bearer(ADMIN))).status == 202  # any cast


@pytest.mark.rule("blend-is-a-voice")
async def test_a_tenants_blends_are_not_listed_to_another(make_client: MakeClient, store: CastStore) -> None:
    client = await make_client(api_keys=frozenset({KEY_A, KEY_B}))
    blend = "af_heart(0.667)+jf_alpha(0.333)"
    cast_id = content_id(SPEECH["input"], blend, key=cache_key(b"", key_tag(KEY_A, b"")))  # A's own cache
    worker = asyncio.create_task(play_worker(store, cast_id, CHUNKS))
    resp = await client.post("/v1/audio/speech", json={**SPEECH, "voice": "jf_alpha(1)+af_heart(2)"},
                             headers=bearer(KEY_A))
    assert resp.status == 200 and resp.headers["X-Cast-Id"] == cast_id
    await resp.read()
    await worker
    listed = {"id": blend, "name": f"{blend} (blend)"}
    own = await (await client.get("/v1/audio/voices", headers=bearer(KEY_A))).json()
    other = await (await client.get("/v1/audio/voices", headers=bearer(KEY_B))).json()
    assert listed in own["voices"]
    assert listed not in other["voices"]
