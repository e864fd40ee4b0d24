"""Redis restarts under intake: submits answer 503 with Retry-After while it is down, and once it
is back none fails on a pooled connection from before the restart."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from intake import Config, create_app
from servicekit import client_for
from streamtts.redisserver import RedisServer, start_server
from tests.intake.conftest import PUBLISHED_VOICES, UNLIMITED, publish
from tests.support.apps import app_clients


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[RedisServer]:
    server = start_server(tmp_path / "redis", aof=True)
    yield server
    server.stop()


@pytest.mark.rule("unavailable-503")
async def test_submits_get_503_while_redis_is_down_and_succeed_once_it_is_back(own_redis: RedisServer) -> None:
    writer = client_for(own_redis.url)
    await publish(writer, PUBLISHED_VOICES, "af_heart")  # a worker is up
    await writer.aclose()
    cfg = Config(redis_url=own_redis.url, redis_connect_attempts=3, **UNLIMITED)  # type: ignore[arg-type]
    async with app_clients(create_app, cfg) as make:
        intake = await make()
        for n in range(8):  # several pooled connections, all of them to this server
            resp = await intake.post("/api/casts", json={"text": f"Before the restart, number {n}."})
            assert resp.status == 201, await resp.text()
        own_redis.stop()
        resp = await intake.post("/api/casts", json={"text": "While Redis is down."})
        assert resp.status == 503 and resp.headers["Retry-After"], await resp.text()
        assert (await resp.json())["error"] == "unavailable"
        own_redis.process = start_server(own_redis.data_dir, port=own_redis.port, aof=True).process
        for n in range(8):  # each meets a connection that died with the old server
            resp = await intake.post("/api/casts", json={"text": f"After the restart, number {n}."})
            assert resp.status == 201, await resp.text()
