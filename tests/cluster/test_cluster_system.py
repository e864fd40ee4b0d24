"""The system's core on a real Redis Cluster, as processes with the real model: a submit over
HTTP (acknowledged once a replica has it), synthesized by synth, followed by SSE and as MP3 on
edge, archived, and played again from the archive: the same code as on one Redis, found from
REDIS_URL alone."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from aiohttp import ClientSession, ClientTimeout
from redis.asyncio import Redis

import castlog
from servicekit import connect
from tests.support.cluster import Cluster
from tests.support.system import running_system

pytestmark = [pytest.mark.model, pytest.mark.timeout(300)]


async def sse_records(http: ClientSession, url: str) -> list[dict]:  # type: ignore[type-arg]
    records = []
    async with http.get(url) as response:
        assert response.status == 200
        async for raw in response.content:
            line = raw.decode().rstrip("\n")
            if line.startswith("data:"):
                records.append(json.loads(line[5:].strip()))
    return records


async def archived(redis: Redis, cast_id: str) -> None:
    while await redis.xlen(castlog.cast_key(cast_id)) != 1:  # the eos entry alone stays in Redis
        await asyncio.sleep(0.2)


async def test_submit_synth_sse_mp3_and_archive_on_a_cluster(
    redis_cluster: Cluster, tmp_path: Path, model_dir: Path, texts: dict[str, str]
) -> None:
    redis_cluster.flushall()
    env = {"REDIS_URL": redis_cluster.url, "KOKORO_MODEL_DIR": str(model_dir),
           "INTAKE_WAIT_REPLICAS": "1", "SYNTH_WAIT_REPLICAS": "1",
           "ARCHIVE_URL": (tmp_path / "archive").as_uri(), "ARCHIVE_DELAY_S": "0"}
    with running_system(tmp_path, **env) as system:
        async with ClientSession(timeout=ClientTimeout(total=240)) as http:
            text = texts["short"].strip()
            async with http.post(system.url("intake", "/api/casts"), json={"text": text}) as response:
                assert response.status == 201, await response.text()
                cast_id = (await response.json())["id"]
            records = await sse_records(http, system.url("edge", f"/api/casts/{cast_id}/events?seq_num=0"))
            assert [r["kind"] for r in records][:2] == ["meta", "start"] and records[-1]["kind"] == "eos"
            audio = [r for r in records if r["kind"] == "audio"]
            assert " ".join(a["headers"]["t"] for a in audio).split() == text.split()
            async with http.get(system.url("edge", f"/api/casts/{cast_id}/audio.mp3")) as response:
                mp3 = await response.read()
            assert mp3
            redis = await connect(redis_cluster.url)
            try:
                await asyncio.wait_for(archived(redis, cast_id), 60)
            finally:
                await redis.aclose()
            async with http.get(system.url("edge", f"/api/casts/{cast_id}/audio.mp3")) as response:
                assert await response.read() == mp3  # the same bytes, from the archive
