"""Nothing changes for readers: an archived cast answers the same records, events and bytes as
before it was archived, through edge's real app, from a directory and from SeaweedFS."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from redis.asyncio import Redis

from blobstore import BlobStore
from castlog import CastStore, LogReader, cast_key
from durablestreams.streams import offset_of
from edge import Config, create_app
from tests.edge.conftest import UNLIMITED
from tests.edge.edge_helpers import read_events, write_cast
from tests.support.apps import MakeClient, app_clients

from .archive_helpers import TEXTS, archiver, retried

RANGES = ["bytes=0-0", "bytes=10-2000", "bytes=-700", "bytes=3000-", "bytes=0-"]
# Headers that must match (Date and the like differ by nature).
SAME_HEADERS = ("Content-Type", "Content-Length", "Content-Range", "Accept-Ranges", "ETag", "Cache-Control")
DS_HEADERS = ("Content-Type", "Stream-Next-Offset", "Stream-Closed", "Stream-Up-To-Date", "ETag")


@pytest.fixture
async def make_edge(redis_url: str, redis: Redis, blob_store: BlobStore) -> AsyncIterator[MakeClient]:
    cfg = Config(redis_url=redis_url, redis_connect_attempts=3, archive=_config_of(blob_store), **UNLIMITED)  # type: ignore[arg-type]
    async with app_clients(create_app, cfg) as make:
        yield make


def _config_of(store: Any) -> Any:
    """The StoreConfig the test store was opened with (S3 needs its endpoint and keys)."""
    from blobstore import StoreConfig

    if hasattr(store, "cfg"):
        return dataclasses.replace(store.cfg, url=store.url)
    return StoreConfig(store.url)


async def answers(edge: TestClient[Any, Any], cid: str, tail: int) -> dict[str, Any]:
    """Everything a reader can ask of a cast, as bytes and headers."""
    out: dict[str, Any] = {}
    for path in [f"/api/casts/{cid}", *(f"/api/casts/{cid}/records?seq_num={s}&limit={n}"
                                        for s in (0, 1, 3, tail - 1, tail, tail + 5) for n in (1, 2, 100))]:
        resp = await edge.get(path)
        out[path] = (resp.status, await resp.read())
    for start in (None, "0", "2", str(tail - 2), str(tail - 1)):
        headers = {"Last-Event-ID": start} if start is not None else {}
        resp = await edge.get(f"/api/casts/{cid}/events", headers=headers)
        events = await read_events(resp) if resp.status == 200 else []
        out[f"sse {start}"] = (resp.status, [dataclasses.astuple(e) for e in events])
    for rng in [None, *RANGES]:
        resp = await edge.get(f"/api/casts/{cid}/audio.mp3", headers={"Range": rng} if rng else {})
        out[f"mp3 {rng}"] = (resp.status, {h: resp.headers.get(h) for h in SAME_HEADERS}, await resp.read())
    for suffix in ("", "/records"):  # the cast as a durable stream, from the start, the middle, the tail
        for offset in ("-1", offset_of("0-3"), offset_of("0-1001"), "now"):
            resp = await edge.get(f"/v1/stream/casts/{cid}{suffix}", params={"offset": offset})
            out[f"ds{suffix} {offset}"] = (resp.status, {h: resp.headers.get(h) for h in DS_HEADERS}, await resp.read())
    return out


@pytest.mark.parametrize("kind", ["simple", "retried"])
@pytest.mark.rule("archive-same-answers", "ds-casts")
async def test_archived_cast_answers_byte_for_byte_as_before(
    redis: Redis, store: CastStore, blob_store: BlobStore, make_edge: MakeClient, kind: str
) -> None:
    if kind == "simple":
        cast = await write_cast(store, "archivedcast", TEXTS, body_bytes=None)  # real MP3 chunks
    else:
        cast = await retried(store)
    tail = await LogReader(store.redis).tail(cast.id)
    early = await make_edge()  # reads before the archive, keeps its cached layout after it
    before = await answers(early, cast.id, tail)
    assert before[f"mp3 {None}"][0] == 200 and len(before[f"mp3 {None}"][2]) > 0
    assert await archiver(redis, blob_store).archive_cast(cast.id) == "archived"
    assert await redis.xlen(cast_key(cast.id)) == 1
    assert await answers(await make_edge(), cast.id, tail) == before  # a fresh edge
    assert await answers(early, cast.id, tail) == before  # an edge that cached the layout before


async def test_archived_audio_comes_from_the_store_in_pieces(
    redis: Redis, store: CastStore, blob_store: BlobStore, make_edge: MakeClient
) -> None:
    cast = await write_cast(store, "bigcast0000a", [f"Sentence {k}." for k in range(12)], body_bytes=40_000)
    await archiver(redis, blob_store).archive_cast(cast.id)
    edge = await make_edge()
    resp = await edge.get(f"/api/casts/{cast.id}/audio.mp3")
    pieces = [len(p) async for p in resp.content.iter_any()]
    assert sum(pieces) == 12 * 40_000 == int(resp.headers["Content-Length"])
    assert len(pieces) > 1  # streamed, not one body


async def test_archived_cast_without_a_store_is_503_not_500(redis: Redis, redis_url: str, store: CastStore,
                                                            blob_store: BlobStore) -> None:
    cast = await write_cast(store, "nostorecast0", TEXTS, body_bytes=500)
    await archiver(redis, blob_store).archive_cast(cast.id)
    cfg = Config(redis_url=redis_url, redis_connect_attempts=3, **UNLIMITED)  # type: ignore[arg-type]
    async with app_clients(create_app, cfg) as make:
        edge = await make()
        resp = await edge.get(f"/api/casts/{cast.id}/records")
        assert resp.status == 503 and (await resp.json())["error"] == "archive_unavailable"
        # #21 finding 8: the refusal echoed the store's exception (its paths, bucket, endpoint)
        message = (await resp.json())["message"]
        assert "/" not in message and "casts" not in message and "ARCHIVE" not in message, message
        state = await edge.get(f"/api/casts/{cast.id}")
        assert state.status == 200 and (await state.json())["status"] == "done"  # the index is in Redis
