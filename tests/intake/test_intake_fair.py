"""A submit's job names its client, as an opaque tag: workers admit whole texts in turn by it."""

from __future__ import annotations

from typing import Any

from aiohttp.test_utils import TestClient
from jobstreams import read_jobs
from redis.asyncio import Redis

from castlog import client_tag, content_id
from castlog.keys import lane_jobs_of
from intake import Config


async def test_a_submits_job_carries_its_clients_tag_not_its_address(
    client: TestClient[Any, Any], redis: Redis, intake_config: Config
) -> None:
    resp = await client.post("/api/casts", json={"text": "One text. For the queue.", "voice": "af_heart"})
    assert resp.status == 201, await resp.text()
    [job] = await read_jobs(redis, lane_jobs_of(content_id("One text. For the queue.", "af_heart")))
    assert job.client == client_tag("127.0.0.1", intake_config.content_key.encode())
    assert "127.0.0.1" not in job.client
