"""DELETE /api/casts/{id} (admin only) and retention: a deleted cast leaves nothing behind, and
an identical submit synthesizes it again."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from jobstreams import read_jobs
from redis.asyncio import Redis
from redis.exceptions import RedisError

from blobstore import BlobStore
from castlog import DELETES, VOICES, CastStore, archive, cast_key, catalog_key, newest_id
from castlog.deletes import delete_proof
from castlog.keys import Fields, lane_jobs_of
from fanout import stop_tasks
from intake import Config, create_app
from synth.broadcasts import DeleteHandler, stream_loop
from tests.intake.conftest import PUBLISHED_VOICES, UNLIMITED, publish
from tests.support.apps import app_clients
from tests.support.waiting import wait_until

from .archive_helpers import archiver, finished

TOKEN = "an-admin-token-of-32-characters-0000"
TEXT = "A cast that will be deleted, then made again."


@pytest.fixture
async def intake(redis_url: str, redis: Redis) -> AsyncIterator[Any]:
    # delete_wait_s: long, as the answer comes once the worker deleted (a test of 202 sets it short)
    cfg = Config(redis_url=redis_url, redis_connect_attempts=3, delete_wait_s=30.0, **UNLIMITED)  # type: ignore[arg-type]
    await publish(redis, PUBLISHED_VOICES, "af_heart")  # intake takes voices a worker published
    async with app_clients(create_app, cfg) as make:
        yield make


@contextlib.asynccontextmanager
async def deleting(redis: Redis, token: str | None = TOKEN) -> AsyncIterator[DeleteHandler]:
    """A worker's delete handler (the part of synth that carries out the admin's deletes), begun."""
    handler = DeleteHandler(redis, token)
    task = asyncio.create_task(stream_loop(redis, 0.05, handler).run())
    try:
        await wait_until(lambda: handler.after is not None)
        yield handler
    finally:
        await stop_tasks(task)  # a loop on a blocking read may outlive one cancel


def admin(token: str = TOKEN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def submit(client: TestClient[Any, Any]) -> tuple[int, str]:
    resp = await client.post("/api/casts", json={"text": TEXT})
    return resp.status, (await resp.json())["id"]


async def test_delete_then_identical_submit_synthesizes_again(intake: Any, redis: Redis, store: CastStore,
                                                              blob_store: BlobStore) -> None:
    client = await intake(admin_token=TOKEN)
    status, cid = await submit(client)
    assert status == 201
    assert (await submit(client))[0] == 200  # the claim holds
    async with deleting(redis):
        resp = await client.delete(f"/api/casts/{cid}", headers=admin())
    assert resp.status == 200 and (await resp.json()) == {"id": cid, "deleted": True}
    assert await redis.exists(cast_key(cid), catalog_key(cid)) == 0
    assert await submit(client) == (201, cid)  # synthesized again
    assert len(await read_jobs(redis)) == 2


async def test_delete_of_archived_cast_removes_its_blob(intake: Any, redis: Redis, store: CastStore,
                                                        blob_store: BlobStore) -> None:
    cast = await finished(store)
    worker = archiver(redis, blob_store)
    await worker.archive_cast(cast.id)
    last: Any = await redis.xrevrange(cast_key(cast.id), count=1)
    d = archive.descriptor_of(last[0][1])
    assert d is not None and await blob_store.size(d.key) == d.size
    client = await intake(admin_token=TOKEN)
    async with deleting(redis):
        assert (await client.delete(f"/api/casts/{cast.id}", headers=admin())).status == 200
    await worker.empty_trash()
    assert await blob_store.size(d.key) is None
    assert await redis.xlen(archive.TRASH) == 0
    assert {k.decode() for k in await redis.keys("*")} <= {"jobs", lane_jobs_of(cast.id), archive.TRASH, VOICES, DELETES}


@pytest.mark.parametrize("token,given", [(None, TOKEN), (None, ""), (TOKEN, "wrong"), (TOKEN, "")])
async def test_delete_without_the_token_is_404_and_deletes_nothing(intake: Any, redis: Redis, token: str | None,
                                                                   given: str) -> None:
    client = await intake(admin_token=token)
    _, cid = await submit(client)
    resp = await client.delete(f"/api/casts/{cid}", headers=admin(given) if given else {})
    assert resp.status == 404 and (await resp.json())["error"] == "not_found"
    assert await redis.exists(cast_key(cid), catalog_key(cid)) == 2
    assert await redis.exists(DELETES) == 0  # nothing asked of the workers


@pytest.mark.parametrize("cid", ["nosuchcast00", "bad..id"])
async def test_delete_of_unknown_or_malformed_cast_is_404(intake: Any, redis: Redis, cid: str) -> None:
    client = await intake(admin_token=TOKEN)
    resp = await client.delete(f"/api/casts/{cid}", headers=admin())
    assert resp.status == 404
    assert await redis.exists(archive.TRASH, DELETES) == 0


@pytest.mark.rule("delete-by-worker")
async def test_a_delete_request_without_the_admin_tokens_proof_deletes_nothing(redis: Redis, store: CastStore) -> None:
    """Intake's Redis user may only add requests to `deletes`: one added without the admin token
    (a flaw in the public service) is refused by the worker, as is any by a worker without it."""
    kept, marker = await finished(store, 1), await finished(store, 2)
    async with deleting(redis):
        await redis.xadd(DELETES, {"id": kept.id, "proof": delete_proof("a-guess-" + "x" * 32, kept.id)})
        await redis.xadd(DELETES, {"id": kept.id})  # no proof: it does not decode
        await redis.xadd(DELETES, {"id": marker.id, "proof": delete_proof(TOKEN, marker.id)})
        await wait_until(lambda: _gone(redis, marker.id))  # read in order: the two before it were refused
    assert await redis.exists(cast_key(kept.id), catalog_key(kept.id)) == 2
    blind = DeleteHandler(redis, None)  # no STREAMTTS_ADMIN_TOKEN: nothing is proven
    await blind.handle({b"id": kept.id.encode(), b"proof": delete_proof(TOKEN, kept.id).encode()})
    assert await redis.exists(cast_key(kept.id)) == 1  # refused


class FlakyHandler(DeleteHandler):
    """A delete handler whose first delete meets a Redis failure (the connection lost mid-batch)."""

    failed = False

    async def handle(self, fields: Fields) -> None:
        if not self.failed:
            self.failed = True
            raise RedisError("connection lost")
        await super().handle(fields)


@pytest.mark.rule("delete-by-worker")
async def test_a_batch_a_redis_error_cut_short_is_read_again(redis: Redis, store: CastStore) -> None:
    """A Redis error while carrying out a batch of requests leaves none of it skipped."""
    first, second = await finished(store, 1), await finished(store, 2)
    handler = FlakyHandler(redis, TOKEN)
    handler.after = await newest_id(redis, DELETES)
    for cast_id in (first.id, second.id):
        await redis.xadd(DELETES, {"id": cast_id, "proof": delete_proof(TOKEN, cast_id)})
    task = asyncio.create_task(stream_loop(redis, 0.05, handler).run())
    try:
        await wait_until(lambda: _gone(redis, first.id))
        await wait_until(lambda: _gone(redis, second.id))
    finally:
        await stop_tasks(task)
    assert handler.failed


async def _gone(redis: Redis, cast_id: str) -> bool:
    return not await redis.exists(cast_key(cast_id))


@pytest.mark.rule("delete-by-worker")
async def test_a_delete_no_worker_carries_out_is_answered_202_and_can_be_sent_again(intake: Any, redis: Redis) -> None:
    client = await intake(admin_token=TOKEN, delete_wait_s=0.2)
    _, cid = await submit(client)
    resp = await client.delete(f"/api/casts/{cid}", headers=admin())
    assert resp.status == 202 and (await resp.json())["deleted"] is False
    assert await redis.exists(cast_key(cid)) == 1
    async with deleting(redis):  # a worker that starts later does not carry out an old request...
        await asyncio.sleep(0.2)
        assert await redis.exists(cast_key(cid)) == 1
        resp = await client.delete(f"/api/casts/{cid}", headers=admin())  # ...the same DELETE again does
    assert resp.status == 200 and await redis.exists(cast_key(cid), catalog_key(cid)) == 0


async def test_retention_deletes_unplayed_casts_and_keeps_played(redis: Redis, store: CastStore,
                                                                 blob_store: BlobStore) -> None:
    old, played = await finished(store, "old"), await finished(store, "played")
    worker = archiver(redis, blob_store, retention_days=0.5 / 86_400)  # half a second
    await worker.archive_cast(old.id)
    await asyncio.sleep(0.7)
    seconds, micros = await redis.time()
    await redis.zadd(archive.PLAYED, {played.id: seconds * 1000 + micros // 1000})  # as edge's flush does
    await worker.scan()
    await worker.empty_trash()
    assert await redis.exists(cast_key(old.id)) == 0
    assert await redis.exists(cast_key(played.id)) == 1
    left = [p async for p in _files(blob_store)]
    assert len(left) == 1 and f"/{played.id}/" in left[0]  # the scan archived it; old's blob went


async def test_retention_off_by_default_keeps_everything(redis: Redis, store: CastStore,
                                                         blob_store: BlobStore) -> None:
    cast = await finished(store)
    await asyncio.sleep(0.05)
    await archiver(redis, blob_store).scan()  # the scan archives what receipts missed
    assert await redis.xlen(cast_key(cast.id)) == 1
    assert [p async for p in _files(blob_store)]


async def _files(store: BlobStore) -> AsyncIterator[str]:
    """Blob keys left in a store (the directory's files, or the prefix's objects)."""
    from blobstore import FileStore

    if isinstance(store, FileStore):
        for path in store.root.rglob("*") if store.root.exists() else []:
            if path.is_file():
                yield str(path)
        return
    client: Any = store._client  # type: ignore[attr-defined]
    reply = await client.list_objects_v2(Bucket=store.bucket, Prefix=store.prefix + "/")  # type: ignore[attr-defined]
    for item in reply.get("Contents", []):
        yield item["Key"]


async def test_edge_flushes_reads_of_casts_for_retention(redis_url: str, redis: Redis, store: CastStore) -> None:
    from edge import Config as EdgeConfig
    from edge import create_app as create_edge
    from tests.edge.conftest import UNLIMITED as EDGE_UNLIMITED

    read, unread = await finished(store, "read"), await finished(store, "unread")
    cfg = EdgeConfig(redis_url=redis_url, redis_connect_attempts=3, played_flush_s=0.2, **EDGE_UNLIMITED)  # type: ignore[arg-type]
    async with app_clients(create_edge, cfg) as make:
        edge = await make()
        assert (await edge.get(f"/api/casts/{read.id}/events")).status == 200
        await asyncio.sleep(0.6)
        assert await redis.zscore(archive.PLAYED, read.id) is not None
        assert await redis.zscore(archive.PLAYED, unread.id) is None
        assert await redis.zcard(archive.PLAYED) == 1  # one sorted set, one member per cast read
