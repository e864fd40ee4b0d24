"""The archiver: a finished cast's audio moves to the store, Redis keeps the index; every step
is idempotent and a failure at any step leaves a readable copy."""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any

import pytest
from jobstreams import read_jobs
from redis.asyncio import Redis

from blobstore import BlobStore
from castlog import PROGRESS_DONE, CastStore, Done, LogReader, announce_done, archive, cast_key, catalog_key
from castlog.streams import read_recipe
from synth.archiver import ArchiveError
from tests.edge.edge_helpers import cast_id, meta, write_cast

from .archive_helpers import archiver, finished, raw_rows, retried, without_p


async def blob(store: BlobStore, key: str) -> bytes:
    return b"".join([p async for p in store.read(key)])


async def descriptor(redis: Redis, cid: str) -> archive.Descriptor:
    last: Any = await redis.xrevrange(cast_key(cid), count=1)
    d = archive.descriptor_of(last[0][1])
    assert d is not None
    return d


async def restored(redis: Redis, store: BlobStore, cid: str) -> list[Any]:
    """The log's rows rebuilt from the index and the blob."""
    d = await descriptor(redis, cid)
    data = await blob(store, d.key)
    bodies = {seq: data[off : off + size] for seq, (off, size) in archive.spans(d, range(d.tail)).items()}
    return archive.rows(d, 0, d.tail - 1, bodies)


@pytest.mark.parametrize("make", [finished, retried])
@pytest.mark.rule("archive-same-answers")
async def test_archived_log_keeps_ids_and_restores_every_row(redis: Redis, store: CastStore,
                                                             blob_store: BlobStore, make: Any) -> None:
    cast = await make(store)
    before = await raw_rows(redis, cast.id)
    assert await archiver(redis, blob_store).archive_cast(cast.id) == "archived"
    after = await raw_rows(redis, cast.id)
    assert len(after) == 1 and after[0][0] == before[-1][0]  # the eos at its own id
    assert {k: v for k, v in after[0][1].items() if k not in (b"a", b"k")} == before[-1][1]
    assert await LogReader(store.redis).tail(cast.id) == len(before)
    assert await restored(redis, blob_store, cast.id) == without_p(before)


async def test_blob_starts_with_the_playable_audio(redis: Redis, store: CastStore, blob_store: BlobStore) -> None:
    cast = await retried(store)
    entries, _ = await LogReader(store.redis).read_all(cast.id)
    from castlog import playable

    heard = b"".join(e.record.body for e in playable(entries))  # type: ignore[union-attr]
    await archiver(redis, blob_store).archive_cast(cast.id)
    d = await descriptor(redis, cast.id)
    data = await blob(blob_store, d.key)
    assert d.playable == len(heard) and data[: d.playable] == heard
    assert d.size == len(data) > d.playable  # the first attempt's third sentence is kept after it
    assert d.sha256 == hashlib.sha256(data).hexdigest()


async def test_redis_keeps_one_small_entry_per_archived_cast(redis: Redis, store: CastStore,
                                                            blob_store: BlobStore) -> None:
    cast = await finished(store)
    before = await redis.memory_usage(cast_key(cast.id)) or 0
    await archiver(redis, blob_store).archive_cast(cast.id)
    d = await descriptor(redis, cast.id)
    last: Any = await redis.xrevrange(cast_key(cast.id), count=1)
    assert last[0][1][b"k"].decode() == d.key  # where, beside the index (size and digest in it)
    assert await redis.exists(catalog_key(cast.id)) == 0 and await read_recipe(store.redis, cast.id) is None
    after = await redis.memory_usage(cast_key(cast.id)) or 0
    assert after < 2048 < before  # the stream's node is sized to its one entry


async def test_identical_submit_of_archived_cast_is_existing(redis: Redis, store: CastStore,
                                                             blob_store: BlobStore) -> None:
    cast = await finished(store)
    await archiver(redis, blob_store).archive_cast(cast.id)
    assert await store.submit(cast.id, f"text of {cast.id}", "af_heart", meta(4)) == "existing"
    assert len(await read_jobs(redis)) == 1  # only the first submit's job


@pytest.mark.rule("archive-crash-safe")
async def test_archiving_twice_changes_nothing(redis: Redis, store: CastStore, blob_store: BlobStore) -> None:
    cast = await finished(store)
    worker = archiver(redis, blob_store)
    assert await worker.archive_cast(cast.id) == "archived"
    rows = await raw_rows(redis, cast.id)
    assert await worker.archive_cast(cast.id) == "already"
    assert await raw_rows(redis, cast.id) == rows


@pytest.mark.rule("archive-only-eos")
async def test_live_error_and_missing_casts_are_not_archived(redis: Redis, store: CastStore,
                                                             blob_store: BlobStore) -> None:
    live = await write_cast(store, cast_id("live"), ["a.", "b."], finish=False, body_bytes=100)
    worker = archiver(redis, blob_store)
    assert await worker.archive_cast(live.id) == "unfinished"
    assert await worker.archive_cast(cast_id("nobody")) == "gone"
    assert len(await raw_rows(redis, live.id)) == 4


async def test_waits_archive_delay_after_eos(redis: Redis, store: CastStore, blob_store: BlobStore) -> None:
    cast = await finished(store)
    assert await archiver(redis, blob_store, delay_s=60).archive_cast(cast.id) == "later"
    assert len(await raw_rows(redis, cast.id)) > 1


class Crash(Exception):
    """A process dying at this step."""


class CrashingStore:
    """A store that dies at one step: ``put`` (half a temp file), ``verify`` (reading back),
    ``corrupt`` (keeps a truncated blob: the read-back check must catch it)."""

    def __init__(self, store: BlobStore, step: str) -> None:
        self.store, self.step, self.url = store, step, store.url

    async def put(self, key: str, data: bytes) -> None:
        if self.step == "put":
            raise Crash("died while writing")
        await self.store.put(key, data[:-1] if self.step == "corrupt" else data)

    async def size(self, key: str) -> int | None:
        return await self.store.size(key)

    def read(self, key: str, start: int = 0, end: int | None = None) -> Any:
        if self.step == "verify":
            raise Crash("died before reading back")
        return self.store.read(key, start, end)

    async def delete(self, key: str) -> None:
        await self.store.delete(key)

    async def close(self) -> None:
        pass


@pytest.mark.parametrize("step", ["put", "verify", "corrupt", "commit"])
@pytest.mark.rule("archive-crash-safe")
async def test_a_crash_at_any_step_leaves_redis_copy_then_a_retry_archives(
    redis: Redis, store: CastStore, blob_store: BlobStore, step: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    cast = await finished(store)
    before = await raw_rows(redis, cast.id)
    crashing = archiver(redis, CrashingStore(blob_store, step))  # type: ignore[arg-type]
    if step == "commit":
        async def die(*_: Any) -> int:
            raise Crash("died before the archive script")
        monkeypatch.setattr(archive, "commit", die)
    with pytest.raises(ArchiveError if step == "corrupt" else Crash):
        await crashing.archive_cast(cast.id)
    monkeypatch.undo()
    assert await raw_rows(redis, cast.id) == before  # the Redis copy, whole
    assert await archiver(redis, blob_store).archive_cast(cast.id) == "archived"  # the restart
    assert await restored(redis, blob_store, cast.id) == without_p(before)


@pytest.mark.rule("archive-crash-safe")
async def test_log_changed_between_pack_and_commit_is_left_alone(redis: Redis, store: CastStore,
                                                                 blob_store: BlobStore) -> None:
    cast = await finished(store)
    packed = archive.pack(cast.id, await raw_rows(redis, cast.id))
    await redis.delete(cast_key(cast.id))  # deleted meanwhile
    assert await archive.commit(redis, cast.id, packed) == -1
    assert await redis.exists(cast_key(cast.id)) == 0


async def pending(redis: Redis) -> int:
    info: Any = await redis.xpending(PROGRESS_DONE, "archiver")
    return int(info["pending"])


async def test_receipts_drive_archiving_and_a_restart_resumes_its_pending(
    redis: Redis, store: CastStore, blob_store: BlobStore
) -> None:
    first, second = await finished(store, 1), await finished(store, 2)
    for cast in (first, second):
        await announce_done(redis, Done(id=cast.id))
    crashed = archiver(redis, blob_store)
    await crashed.receipts.create()
    assert len(await crashed.receipts.take(10)) == 2  # taken, then the process dies before archiving
    assert await pending(redis) == 2
    restarted = archiver(redis, blob_store)  # same consumer name: re-reads its pending first
    await restarted.round()
    assert await pending(redis) == 0
    for cast in (first, second):
        assert await redis.xlen(cast_key(cast.id)) == 1


async def test_receipts_left_by_a_gone_archiver_are_taken_over(
    redis: Redis, store: CastStore, blob_store: BlobStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    cast = await finished(store)
    await announce_done(redis, Done(id=cast.id))
    gone = archiver(redis, blob_store, consumer="synth-old-pid")
    await gone.receipts.create()
    assert len(await gone.receipts.take(10)) == 1  # then that process died
    from synth import archiver as module

    monkeypatch.setattr(module, "CLAIM_IDLE_MS", 0)
    await archiver(redis, blob_store).round()  # a new consumer name
    assert await pending(redis) == 0 and await redis.xlen(cast_key(cast.id)) == 1


async def test_a_receipt_not_yet_due_stays_pending(redis: Redis, store: CastStore, blob_store: BlobStore) -> None:
    cast = await finished(store)
    await announce_done(redis, Done(id=cast.id))
    worker = archiver(redis, blob_store, delay_s=0.4)
    await worker.receipts.create()
    await worker.round()
    assert await pending(redis) == 1 and await redis.xlen(cast_key(cast.id)) > 1
    await asyncio.sleep(0.4)
    await worker.round()
    assert await pending(redis) == 0 and await redis.xlen(cast_key(cast.id)) == 1
