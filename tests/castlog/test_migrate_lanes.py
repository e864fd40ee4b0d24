"""Data written before lanes (pub/casts/<id>, catalog/<id>, cancel/<id>) is moved to the lane layout by
castlog.migrate (``streamtts up`` at start, ``streamtts migrate-keys``) and reads as before."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from jobstreams import read_jobs
from redis.asyncio import Redis

from castlog import CastStore, Eos, LogReader, Meta, Start, cast_key, catalog_key, content_id, is_cancelled
from castlog.migrate import migrate_to_lanes
from castlog.records import encode_headers
from streamtts.launcher import migrate_keys
from streamtts.redisserver import free_port

TEXT, VOICE = "Written before lanes.", "af_heart"
CAST = content_id(TEXT, VOICE)


# The keys as castlog wrote them before #24, without a lane: what migrate.py renames.
def legacy_cast_key(cast_id: str) -> str:
    return "pub/casts/" + cast_id


def legacy_catalog_key(cast_id: str) -> str:
    return "catalog/" + cast_id


def legacy_cancel_key(cast_id: str) -> str:
    return "cancel/" + cast_id


async def write_the_old_layout(redis: Redis) -> None:
    """What the submit script and a worker wrote before #24, key for key."""
    await redis.xadd(legacy_catalog_key(CAST), {"text": TEXT, "voice": VOICE, "title": "Old", "created_at": "1"})
    meta = Meta(title="Old", voice=VOICE, chars=len(TEXT), sentences=1, created_at=1)
    # the records themselves are unchanged: write them through today's store, then rename back
    store = CastStore(redis)
    await redis.xadd(cast_key(CAST), {"e": "meta", "h": encode_headers(meta), "ts": "1"}, id="0-1")
    await store.append(CAST, 1, [Start(attempt=1, resume_from=0, at=0), Eos(sentences=0, audio_ms=0, attempts=1)])
    await redis.rename(cast_key(CAST), legacy_cast_key(CAST))
    await redis.xadd("jobs", {"id": CAST, "voice": VOICE, "enqueued_at": "1"})  # a job still waiting
    await redis.set(legacy_cancel_key(CAST), "1", ex=60)  # a cancel not admitted yet


@pytest.mark.rule("keys-migrate")
async def test_old_keys_are_renamed_and_read_as_before(redis: Redis) -> None:
    await write_the_old_layout(redis)
    assert await LogReader(redis).read(CAST) == []  # before: today's code does not see them
    assert await migrate_to_lanes(redis) == 3
    assert await is_cancelled(redis, CAST)
    entries = await LogReader(redis).read(CAST)
    assert [e.seq_num for e in entries] == [0, 1, 2] and isinstance(entries[-1].record, Eos)
    assert await redis.exists(legacy_cast_key(CAST), legacy_catalog_key(CAST)) == 0
    assert await redis.xlen(catalog_key(CAST)) == 1
    meta = Meta(title="Old", voice=VOICE, chars=len(TEXT), sentences=1, created_at=1)
    assert await CastStore(redis).submit(CAST, TEXT, VOICE, meta) == "existing"
    assert [j.id for j in await read_jobs(redis)] == [CAST]  # the old waiting job is still taken from `jobs`
    assert await migrate_to_lanes(redis) == 0  # idempotent


async def test_a_key_already_under_its_new_name_is_not_overwritten(redis: Redis) -> None:
    await redis.xadd(legacy_catalog_key(CAST), {"text": "old"})
    await redis.xadd(catalog_key(CAST), {"text": "new"})
    assert await migrate_to_lanes(redis) == 0
    assert (await redis.xrange(catalog_key(CAST)))[0][1] == {b"text": b"new"}


async def test_the_migrate_keys_command(redis: Redis, redis_url: str) -> None:
    await write_the_old_layout(redis)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-m", "streamtts", "migrate-keys", "--redis-url", redis_url],
                          capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "3 key(s) moved" in done.stdout
    assert len(await LogReader(redis).read(CAST)) == 3

    # nobody listens there: one line, no traceback
    done = subprocess.run([sys.executable, "-m", "streamtts", "migrate-keys", "--redis-url",
                           f"redis://127.0.0.1:{free_port()}/0"], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.splitlines()[-1].startswith("streamtts: Redis at redis://127.0.0.1:"), done.stderr


@pytest.mark.rule("keys-migrate")
async def test_the_command_s_step_moves_casts_and_durable_streams_together(redis: Redis) -> None:
    await write_the_old_layout(redis)
    await redis.hset("ds/meta/notes", mapping={"ct": "text/plain", "created": "1"})
    await redis.xadd("ds/log/notes", {"d": b"a"}, id="1001-0")
    assert await migrate_keys(redis) == 3 + 1
    assert not await redis.keys("ds/meta/*") and await redis.keys("ds/{notes}/meta/notes")
    assert await LogReader(redis).read(CAST)
    assert await migrate_keys(redis) == 0
