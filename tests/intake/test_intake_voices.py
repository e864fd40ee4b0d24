"""Voices: intake accepts only what a worker published (the newest well-formed `synth/voices`
entry); before any worker has published, a submit is answered 503 warming_up."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from redis.asyncio import Redis

from castlog import VOICES, content_id
from intake.context import INTAKE

from .conftest import PUBLISHED_VOICES, MakeClient, keys_besides_rate_limits, publish

Client = TestClient[Any, Any]


@pytest.mark.rule("voices-published")
async def test_before_any_worker_published_submits_and_voices_answer_warming_up(
    client: Client, redis: Redis
) -> None:
    await redis.delete(VOICES)  # a new deployment: the model is still loading
    answers = [await client.post("/api/casts", json={"text": "Hi."}), await client.get("/api/voices"),
               await client.post("/api/casts", json={"live": True})]  # a live cast too
    for resp in answers:
        body = await resp.json()
        assert resp.status == 503 and body["error"] == "warming_up" and "loading" in body["message"]
        assert int(resp.headers["Retry-After"]) > 0
    assert await keys_besides_rate_limits(redis) == set()
    ready = await client.get("/readyz")
    assert ready.status == 200 and (await ready.json())["voices"] is None
    for resp in (await client.post("/v1/audio/speech", json={"model": "kokoro", "input": "Hi.", "voice": "jf_alpha"}),
                 await client.get("/v1/audio/voices")):  # the OpenAI-compatible routes, in their own shape
        assert resp.status == 503 and int(resp.headers["Retry-After"]) > 0, await resp.text()
        assert "warming_up" in await resp.text()


async def test_the_published_list_is_offered(client: Client) -> None:
    resp = await client.get("/api/voices")
    assert resp.status == 200
    body = await resp.json()
    assert body.pop("details")[0] == {
        "id": "af_heart", "language": "American English", "lang": "en-US", "gender": "female", "name": "Heart",
    }
    assert body == {"voices": PUBLISHED_VOICES, "default": "af_heart", "source": "worker", "backend": "onnx"}
    ready = await (await client.get("/readyz")).json()
    assert ready == {"status": "ok", "voices": len(PUBLISHED_VOICES), "default": "af_heart"}


@pytest.mark.rule("voices-published")
async def test_published_voices_replace_the_older_ones(client: Client, redis: Redis) -> None:
    await publish(redis, ["af_bella", "af_heart"], "af_bella", backend="torch")
    body = await (await client.get("/api/voices")).json()
    assert [(d["id"], d["language"], d["gender"]) for d in body.pop("details")] == [
        ("af_bella", "American English", "female"), ("af_heart", "American English", "female")]
    assert body == {"voices": ["af_bella", "af_heart"], "default": "af_bella", "source": "worker", "backend": "torch"}
    ok = await client.post("/api/casts", json={"text": "Hi."})
    assert ok.status == 201 and (await ok.json())["id"] == content_id("Hi.", "af_bella")
    refused = await client.post("/api/casts", json={"text": "Hi.", "voice": "jm_kumo"})
    assert refused.status == 422 and (await refused.json())["error"] == "unknown_voice"


async def test_the_configured_default_wins_when_a_worker_has_it(make_client: MakeClient, redis: Redis) -> None:
    client = await make_client(default_voice="jf_alpha")
    assert (await (await client.get("/api/voices")).json())["default"] == "jf_alpha"
    await redis.delete(VOICES)
    await publish(redis, ["jf_nezumi", "jm_kumo"], "jm_kumo")
    await client.server.app[INTAKE].voices.refresh()
    body = await (await client.get("/api/voices")).json()
    assert body["default"] == "jm_kumo"  # no worker has jf_alpha: the workers' default, never a missing one
    ok = await client.post("/api/casts", json={"text": "Hi."})
    assert ok.status == 201 and (await ok.json())["id"] == content_id("Hi.", "jm_kumo")


async def test_a_voice_published_just_now_is_accepted_at_once(client: Client, redis: Redis) -> None:
    assert (await client.get("/api/voices")).status == 200  # the list is cached now
    await publish(redis, ["zf_xiaobei"], "zf_xiaobei")
    resp = await client.post("/api/casts", json={"text": "你好。", "voice": "zf_xiaobei"})
    assert resp.status == 201


@pytest.mark.rule("voices-published")
async def test_the_last_published_list_stands_while_no_worker_runs(client: Client, redis: Redis) -> None:
    # Workers publish at start-up only: with all of them down the entry is still there.
    await publish(redis, ["jf_alpha"], "jf_alpha")
    resp = await client.post("/api/casts", json={"text": "こんにちは。"})
    assert resp.status == 201 and (await resp.json())["id"] == content_id("こんにちは。", "jf_alpha")


async def test_a_malformed_newest_entry_leaves_the_older_good_one(client: Client, redis: Redis) -> None:
    await redis.xadd(VOICES, {"voices": "not json", "default": "x"})
    body = await (await client.get("/api/voices")).json()
    assert body["voices"] == PUBLISHED_VOICES
    assert (await client.post("/api/casts", json={"text": "Hi."})).status == 201


async def test_only_malformed_entries_mean_warming_up(client: Client, redis: Redis) -> None:
    await redis.delete(VOICES)
    await redis.xadd(VOICES, {"voices": "not json", "default": "x"})
    resp = await client.post("/api/casts", json={"text": "Hi."})
    assert resp.status == 503 and (await resp.json())["error"] == "warming_up"


async def test_a_default_outside_the_list_becomes_the_first_voice(client: Client, redis: Redis) -> None:
    await publish(redis, ["af_sky", "af_bella"], "gone")
    body = await (await client.get("/api/voices")).json()
    assert body["default"] == "af_sky"


async def test_unknown_voice_refusal_names_the_choices_and_writes_nothing(client: Client, redis: Redis) -> None:
    await publish(redis, ["af_bella"], "af_bella")
    resp = await client.post("/api/casts", json={"text": "Hi.", "voice": "af_heart"})
    body = await resp.json()
    assert resp.status == 422 and "af_bella" in body["message"] and "/api/voices" in body["message"]
    assert await keys_besides_rate_limits(redis) == set()
