"""Redis restarts under edge: every route answers 503 with Retry-After (never 500) while it is
down, and once it is back no request fails on a pooled connection from before the restart."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from castlog import CastStore
from edge import Config, create_app
from servicekit import client_for
from streamtts.redisserver import RedisServer, start_server
from tests.edge.conftest import UNLIMITED
from tests.edge.edge_helpers import cast_id, write_cast
from tests.support.apps import app_clients


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[RedisServer]:
    server = start_server(tmp_path / "redis", aof=True, appendfsync="always")
    yield server
    server.stop()


def routes(cid: str) -> list[str]:
    return [f"/api/casts/{cid}", f"/api/casts/{cid}/records", f"/api/casts/{cid}/events",
            f"/api/casts/{cid}/audio.mp3", f"/s2/records?stream=pub/casts/{cid}"]


@pytest.mark.rule("unavailable-503")
async def test_every_route_answers_503_while_redis_is_down_and_all_succeed_once_it_is_back(
    own_redis: RedisServer,
) -> None:
    cid = cast_id("restart")
    writer = client_for(own_redis.url)
    await write_cast(CastStore(writer), cid, ["One.", "Two."])
    await writer.aclose()
    cfg = Config(redis_url=own_redis.url, redis_connect_attempts=3, **UNLIMITED)  # type: ignore[arg-type]
    async with app_clients(create_app, cfg) as make:
        edge = await make()
        for path in routes(cid) * 3:  # several pooled connections, all of them to this server
            resp = await edge.get(path)
            assert resp.status == 200, path
            await resp.read()
        own_redis.stop()
        for path in routes(cid):
            resp = await edge.get(path)
            body = await resp.json()
            assert resp.status == 503 and resp.headers["Retry-After"] == "2", (path, body)
            assert body["error"] == "unavailable"
        back = start_server(own_redis.data_dir, port=own_redis.port, aof=True, appendfsync="always")
        own_redis.process = back.process
        for path in routes(cid) * 3:  # each meets a connection that died with the old server
            resp = await edge.get(path)
            assert resp.status == 200, (path, await resp.text())
            await resp.read()
