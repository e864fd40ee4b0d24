"""A repeat of an archived cast through intake's `/v1/audio/speech` answers the same audio as
before it was archived: intake reads an archived log through the archive, as edge does."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from redis.asyncio import Redis

from blobstore import BlobStore
from castlog import CastStore, LogReader, cast_key, content_id
from intake import Config, create_app
from tests.archive.test_edge_archived import _config_of
from tests.intake.conftest import PUBLISHED_VOICES, UNLIMITED, publish
from tests.intake.test_intake_v1 import CHUNKS, SPEECH, play_worker
from tests.support.apps import MakeClient, app_clients

from .archive_helpers import archiver


@pytest.fixture
async def make_intake(redis_url: str, redis: Redis, blob_store: BlobStore) -> AsyncIterator[MakeClient]:
    await redis.flushall()
    await publish(redis, PUBLISHED_VOICES, "af_heart")
    cfg = Config(redis_url=redis_url, redis_connect_attempts=3, archive=_config_of(blob_store), **UNLIMITED)  # type: ignore[arg-type]
    async with app_clients(create_app, cfg) as make:
        yield make


async def speech(client: Any, fmt: str) -> bytes:
    resp = await client.post("/v1/audio/speech", json={**SPEECH, "response_format": fmt})
    assert resp.status == 200, await resp.text()
    return bytes(await resp.read())


@pytest.mark.rule("archive-same-answers")
@pytest.mark.parametrize("fmt", ["mp3", "pcm"])
async def test_speech_of_an_archived_cast_is_the_audio_it_had_before(
    make_intake: MakeClient, store: CastStore, redis: Redis, blob_store: BlobStore, fmt: str,
) -> None:
    client = await make_intake()
    cast_id = content_id(SPEECH["input"], "jf_alpha")
    worker = asyncio.create_task(play_worker(store, cast_id, CHUNKS))
    before = await speech(client, fmt)
    await worker
    assert before
    if fmt == "mp3":
        assert before == b"".join(CHUNKS)
    tail = await LogReader(redis).tail(cast_id)
    assert await archiver(redis, blob_store).archive_cast(cast_id) == "archived"
    assert await redis.xlen(cast_key(cast_id)) == 1  # the log is its eos alone now
    assert await LogReader(redis).tail(cast_id) == tail
    assert await speech(client, fmt) == before
