"""Voices: the newest `synth/voices` entry once a worker published, else INTAKE_VOICES."""

from __future__ import annotations

import json
from typing import Any

from aiohttp.test_utils import TestClient
from redis.asyncio import Redis

from castlog import VOICES, content_id

from .conftest import MakeClient, keys_besides_rate_limits

Client = TestClient[Any, Any]
CONFIG_VOICES = ["af_heart", "jf_alpha", "jf_gongitsune", "jf_nezumi", "jf_tebukuro", "jm_kumo"]


async def publish(redis: Redis, voices: list[str], default: str, backend: str = "onnx") -> None:
    """What a synth worker does at start-up."""
    await redis.xadd(
        VOICES,
        {"voices": json.dumps(voices), "default": default, "backend": backend, "worker": "w1", "at": 1},
        maxlen=100,
        approximate=True,
    )


async def test_before_any_worker_the_configured_voices_are_offered(client: Client) -> None:
    resp = await client.get("/api/voices")
    assert resp.status == 200
    body = await resp.json()
    assert body.pop("details")[0] == {
        "id": "af_heart", "language": "American English", "lang": "en-US", "gender": "female", "name": "Heart",
    }
    assert body == {"voices": CONFIG_VOICES, "default": "af_heart", "source": "config", "backend": None}


async def test_configured_voice_list_comes_from_the_config(make_client: MakeClient) -> None:
    client = await make_client(voices=("bf_emma", "am_adam"), default_voice="am_adam")
    body = await (await client.get("/api/voices")).json()
    assert body["voices"] == ["bf_emma", "am_adam"] and body["default"] == "am_adam"
    assert (await client.post("/api/casts", json={"text": "Hi.", "voice": "af_heart"})).status == 422


async def test_published_voices_replace_the_configured_ones(client: Client, redis: Redis) -> None:
    await publish(redis, ["af_bella", "af_heart"], "af_bella", backend="torch")
    body = await (await client.get("/api/voices")).json()
    assert [(d["id"], d["language"], d["gender"]) for d in body.pop("details")] == [
        ("af_bella", "American English", "female"), ("af_heart", "American English", "female")]
    assert body == {
        "voices": ["af_bella", "af_heart"], "default": "af_bella", "source": "worker", "backend": "torch"
    }
    ok = await client.post("/api/casts", json={"text": "Hi."})
    assert ok.status == 201 and (await ok.json())["id"] == content_id("Hi.", "af_bella")
    refused = await client.post("/api/casts", json={"text": "Hi.", "voice": "jm_kumo"})
    assert refused.status == 422 and (await refused.json())["error"] == "unknown_voice"


async def test_a_voice_published_just_now_is_accepted_at_once(client: Client, redis: Redis) -> None:
    assert (await client.get("/api/voices")).status == 200  # the list is cached now
    await publish(redis, ["zf_xiaobei"], "zf_xiaobei")
    resp = await client.post("/api/casts", json={"text": "你好。", "voice": "zf_xiaobei"})
    assert resp.status == 201


async def test_the_newest_entry_wins(client: Client, redis: Redis) -> None:
    await publish(redis, ["af_bella"], "af_bella")
    await publish(redis, ["am_adam", "af_bella"], "am_adam")
    body = await (await client.get("/api/voices")).json()
    assert body["voices"] == ["am_adam", "af_bella"] and body["default"] == "am_adam"


async def test_malformed_entry_falls_back_to_the_config(client: Client, redis: Redis) -> None:
    await redis.xadd(VOICES, {"voices": "not json", "default": "x"})
    body = await (await client.get("/api/voices")).json()
    assert body["source"] == "config" and body["voices"] == CONFIG_VOICES
    assert (await client.post("/api/casts", json={"text": "Hi."})).status == 201


async def test_a_default_outside_the_list_becomes_the_first_voice(client: Client, redis: Redis) -> None:
    await publish(redis, ["af_sky", "af_bella"], "gone")
    body = await (await client.get("/api/voices")).json()
    assert body["default"] == "af_sky"


async def test_unknown_voice_refusal_names_the_choices_and_writes_nothing(client: Client, redis: Redis) -> None:
    await publish(redis, ["af_bella"], "af_bella")
    resp = await client.post("/api/casts", json={"text": "Hi.", "voice": "af_heart"})
    body = await resp.json()
    assert resp.status == 422 and "af_bella" in body["message"] and "/api/voices" in body["message"]
    assert await keys_besides_rate_limits(redis) == {VOICES}
