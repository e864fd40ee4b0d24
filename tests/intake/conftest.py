"""Intake test fixtures: the real app factory on a loopback TestServer over the session's Redis."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from redis.asyncio import Redis

from castlog import VOICES, VoiceList, publish_voices
from intake import Config, create_app
from tests.support.apps import MakeClient, app_clients

# What a worker with the English and Japanese packs publishes at start-up: intake accepts only
# published voices, so every test but those about warming up starts with this list in Redis.
PUBLISHED_VOICES = ["af_heart", "jf_alpha", "jf_gongitsune", "jf_nezumi", "jf_tebukuro", "jm_kumo"]


async def publish(redis: Redis, voices: list[str], default: str, backend: str = "onnx") -> None:
    """What a synth worker does at start-up."""
    offer = VoiceList(voices=tuple(voices), default=default, backend=backend, worker="w1", at=1)
    await publish_voices(redis, offer, maxlen=100)


# Tests that are not about rate limiting must never meet it.
UNLIMITED = {"rate": 100_000.0, "burst": 1_000_000}


@pytest.fixture
def intake_config(redis_url: str) -> Config:
    return Config(redis_url=redis_url, redis_connect_attempts=3, **UNLIMITED)  # type: ignore[arg-type]


@pytest.fixture
async def make_client(intake_config: Config, redis: Redis) -> AsyncIterator[MakeClient]:
    """Start an intake app with the base config changed by keyword arguments (after FLUSHALL and
    a published voice list)."""
    await publish(redis, PUBLISHED_VOICES, "af_heart")
    async with app_clients(create_app, intake_config) as make:
        yield make


@pytest.fixture
async def client(make_client: MakeClient) -> TestClient[Any, Any]:
    return await make_client()


async def key_names(redis: Redis) -> set[str]:
    """Every key but the workers' voice list (a fixture publishes it)."""
    return {k.decode() for k in await redis.keys("*")} - {VOICES}


async def keys_besides_rate_limits(redis: Redis) -> set[str]:
    return {k for k in await key_names(redis) if not k.startswith("rl/")}
