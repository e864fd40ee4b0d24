"""Tenants (API keys) apart: a key cancels only the casts submitted with it, and
/v1/audio/voices lists only the blends its own tenant used."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

import castlog
from castlog import CastStore

from .conftest import MakeClient
from .test_intake_v1_lenient import _speak

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


async def test_the_same_text_from_another_tenant_does_not_make_the_cast_theirs(
    make_client: MakeClient, redis: Redis
) -> None:
    client = await make_client(admin_token=ADMIN, api_keys=frozenset({KEY_A, KEY_B}))
    text = {"text": "A shared text. Cast once."}
    first = await client.post("/api/casts", json=text, headers=bearer(KEY_A))
    again = await client.post("/api/casts", json=text, headers=bearer(KEY_B))
    assert (first.status, again.status) == (201, 200)
    cast_id = (await first.json())["id"]
    assert (await client.post(f"/api/casts/{cast_id}/cancel", headers=bearer(KEY_B))).status == 404
    assert (await client.post(f"/api/casts/{cast_id}/cancel", headers=bearer(ADMIN))).status == 202  # any cast


@pytest.mark.rule("blend-is-a-voice")
async def test_a_tenants_blends_are_not_listed_to_another(make_client: MakeClient, store: CastStore) -> None:
    client = await make_client(api_keys=frozenset({KEY_A, KEY_B}))
    client.session.headers.update(bearer(KEY_A))
    resp, _ = await _speak(client, store, voice="jf_alpha(1)+af_heart(2)")
    assert resp.status == 200
    blend = {"id": "af_heart(0.667)+jf_alpha(0.333)", "name": "af_heart(0.667)+jf_alpha(0.333) (blend)"}
    own = await (await client.get("/v1/audio/voices", headers=bearer(KEY_A))).json()
    other = await (await client.get("/v1/audio/voices", headers=bearer(KEY_B))).json()
    assert blend in own["voices"]
    assert blend not in other["voices"]
