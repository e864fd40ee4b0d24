"""The claim path and the archive on a real Redis Cluster: intake's submits over HTTP (answered
once a replica has them), an open (live) cast and its text, and a finished cast archived and read
back through the archive, on the same code as a single Redis."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from jobstreams import read_jobs

import castlog
from blobstore import StoreConfig, open_blob_store
from castlog import CastStore, LogReader, Meta
from intake import Config, create_app
from servicekit import connect
from tests.archive.archive_helpers import archiver, finished
from tests.intake.conftest import PUBLISHED_VOICES, UNLIMITED, publish
from tests.support.apps import app_clients
from tests.support.cluster import Cluster


@pytest.fixture
async def cluster_redis(redis_cluster: Cluster) -> AsyncIterator[Any]:
    redis_cluster.flushall()
    redis = await connect(redis_cluster.url)
    await publish(redis, PUBLISHED_VOICES, "af_heart")
    yield redis
    await redis.aclose()


@pytest.fixture
async def intake(redis_cluster: Cluster, cluster_redis: Any) -> AsyncIterator[TestClient[Any, Any]]:
    cfg = Config(redis_url=redis_cluster.url, redis_connect_attempts=3, wait_replicas=1,  # type: ignore[arg-type]
                 **UNLIMITED)
    async with app_clients(create_app, cfg) as make:
        yield await make()


async def test_submits_over_http_are_claimed_once_in_their_lanes(intake: TestClient[Any, Any],
                                                                 cluster_redis: Any) -> None:
    ids = []
    for i in range(6):
        resp = await intake.post("/api/casts", json={"text": f"Submitted to the cluster, number {i}."})
        assert resp.status == 201, await resp.text()
        ids.append((await resp.json())["id"])
    again = await intake.post("/api/casts", json={"text": "Submitted to the cluster, number 0."})
    assert again.status == 200 and (await again.json())["id"] == ids[0]
    assert sorted(j.id for j in await read_jobs(cluster_redis)) == sorted(ids)
    for cast_id in ids:
        assert await cluster_redis.xlen(castlog.keys.lane_jobs_of(cast_id)) == 1
        assert len(await LogReader(cluster_redis).read(cast_id)) == 1  # its meta


async def open_live(intake: TestClient[Any, Any]) -> tuple[str, dict[str, str]]:
    resp = await intake.post("/api/casts", json={"live": True})
    assert resp.status == 201, await resp.text()
    body = await resp.json()
    return body["id"], {"Authorization": f"Bearer {body['write_token']}"}


async def test_an_open_cast_takes_its_text(intake: TestClient[Any, Any], cluster_redis: Any) -> None:
    cast_id, auth = await open_live(intake)
    sent = await intake.post(f"/api/casts/{cast_id}/text", json={"text": "Hello there. ", "offset": 0}, headers=auth)
    assert sent.status == 200, await sent.text()
    text = await castlog.LiveStore(cluster_redis).read_text(cast_id)
    assert text is not None and "Hello there." in text.text
    assert [j.id for j in await read_jobs(cluster_redis, castlog.JOBS_LIVE)] == [cast_id]
    after = await castlog.newest_id(cluster_redis, castlog.CANCELS)
    assert await castlog.cancel(cluster_redis, cast_id) == "ok"  # the key lane's flag, then the word
    assert await castlog.is_cancelled(cluster_redis, cast_id)
    [(_, rows)] = await cluster_redis.xread({castlog.CANCELS: after}, count=10, block=10)  # as a worker's loop
    assert [fields[b"id"] for _, fields in rows] == [cast_id.encode()]


@pytest.mark.rule("open-cap-own-slot")
async def test_a_clients_cap_of_open_casts_holds_across_lanes(redis_cluster: Cluster, cluster_redis: Any) -> None:
    """#21's cap, counted in the client's slot while its casts lie in many lanes (on masters
    other than the client's set): the third open is refused, a closed cast frees its place."""
    cfg = Config(redis_url=redis_cluster.url, redis_connect_attempts=3, live_max_open_per_client=2,  # type: ignore[arg-type]
                 **UNLIMITED)
    async with app_clients(create_app, cfg) as make:
        intake = await make()
        (first, auth), _ = await open_live(intake), await open_live(intake)
        refused = await intake.post("/api/casts", json={"live": True})
        assert (refused.status, (await refused.json())["error"]) == (429, "too_many_open_casts")
        closed = await intake.post(f"/api/casts/{first}/close", headers=auth)
        assert closed.status == 200, await closed.text()
        await open_live(intake)  # the closed cast's place is free again


async def test_a_finished_cast_is_archived_and_reads_the_same(cluster_redis: Any, tmp_path: Path) -> None:
    store = CastStore(cluster_redis)
    cast = await finished(store, "cluster-archive")
    before = await LogReader(cluster_redis).read(cast.id)
    blobs = await open_blob_store(StoreConfig((tmp_path / "archive").as_uri()))
    try:
        worker = archiver(cluster_redis, blobs)
        assert await worker.archive_cast(cast.id) == "archived"
        assert await cluster_redis.xlen(castlog.cast_key(cast.id)) == 1  # its eos alone stays in Redis
        assert await LogReader(cluster_redis, blobs).read(cast.id) == before
        await worker.scan()  # SCAN over every master: finds nothing more to do
        assert await castlog.archive.delete(cluster_redis, cast.id)
        assert not await cluster_redis.exists(castlog.cast_key(cast.id))
    finally:
        await blobs.close()


async def test_concurrent_submits_share_round_trips_for_their_tokens_and_bells(cluster_redis: Any) -> None:
    """Submits made at once take their tokens and ring jobs/bell in shared round trips (taken and
    rung one by one, these steps cost more than the submit: bench_cluster.py), and each new job
    is still rung exactly once, for its own lane."""
    store = CastStore(cluster_redis)
    limiter = castlog.RateLimiter(cluster_redis, castlog.INTAKE_SCOPE, 1000.0, 1000)
    texts = [f"Submitted together, number {i}." for i in range(24)]
    ids = [castlog.content_id(text, "af_heart") for text in texts]
    answers = await asyncio.gather(*(
        store.submit(cast_id, text, "af_heart", Meta(title=text, voice="af_heart", chars=len(text), sentences=1,
                                                     created_at=0), limit=(limiter, f"client-{i % 3}"))
        for i, (cast_id, text) in enumerate(zip(ids, texts))))
    assert answers == ["new"] * len(ids)
    bells = [fields[b"s"].decode() for _, fields in await cluster_redis.xrange(castlog.keys.JOBS_BELL)]
    assert sorted(bells) == sorted(castlog.keys.lane_jobs_of(cast_id) for cast_id in ids)
    assert store.bell.rings is not None  # a cluster: every new job is rung
    assert store.bell.rings.calls == len(ids) and store.bell.rings.round_trips < len(ids)
    assert limiter.takes.calls == len(ids) and limiter.takes.round_trips < len(ids)
