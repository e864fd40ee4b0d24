"""The shared streams' types: what the scripts write is what the types decode, and the fields on
the wire keep their names (the ACL and older readers rely on them)."""

from __future__ import annotations

import json

import pytest
from jobstreams import enqueue, read_dead, read_done, read_jobs
from redis.asyncio import Redis

from castlog import (
    JOBS,
    JOBS_DEAD,
    JOBS_LIVE,
    PROGRESS_DONE,
    VOICES,
    CastStore,
    Done,
    Error,
    LiveStore,
    Malformed,
    Meta,
    Start,
    VoiceList,
    announce_done,
    archive,
    cast_key,
    catalog_key,
    content_id,
    dead_letter,
    decode_job,
    publish_voices,
    read_recipe,
    read_trash,
    read_voices,
)
from castlog.keys import ARCHIVE_TRASH, lane_jobs_of, lane_live_jobs_of
from castlog.live import write_hash
from castlog.streams import DeadLetter, Job, Recipe, Trash, decode, encode

TEXT, VOICE = "Hello there. This is a test.", "af_heart"
CAST = content_id(TEXT, VOICE)


def meta(**kw: object) -> Meta:
    return Meta(title="Hello", voice=VOICE, chars=len(TEXT), sentences=2, created_at=1, **kw)  # type: ignore[arg-type]


async def test_jobs_written_by_submit_and_its_reenqueue_decode_as_jobs(store: CastStore, redis: Redis) -> None:
    assert await store.submit(CAST, TEXT, VOICE, meta()) == "new"
    await store.append(CAST, 1, [Start(attempt=1, resume_from=0, at=0), Error(reason="x", attempts=3)])
    assert await store.submit(CAST, TEXT, VOICE, meta()) == "reenqueued"
    first, again = await read_jobs(redis)
    assert first.id == again.id == CAST and first.voice == again.voice == VOICE
    assert 0 < first.enqueued_at <= again.enqueued_at
    rows = await redis.xrange(lane_jobs_of(CAST))
    assert [decode_job(fields) for _, fields in rows] == [first, again]
    assert all({k.decode() for k in fields} == set(Job.__struct_fields__) for _, fields in rows)  # no field unread
    ((_, recipe),) = await redis.xrange(catalog_key(CAST), count=1)
    assert {k.decode() for k in recipe} == set(Recipe.__struct_fields__) - {"live", "speed", "wh"}


async def test_job_and_recipe_written_by_the_open_script_decode(redis: Redis) -> None:
    opened = await LiveStore(redis).open(VOICE, meta(live=True), speed=1.25)
    cast_id = opened.cast_id
    (job,) = await read_jobs(redis, JOBS_LIVE)
    ((_, fields),) = await redis.xrange(lane_live_jobs_of(cast_id))
    assert {k.decode() for k in fields} == set(Job.__struct_fields__)
    ((_, recipe_fields),) = await redis.xrange(catalog_key(cast_id), count=1)
    assert {k.decode() for k in recipe_fields} == set(Recipe.__struct_fields__)
    assert job.id == cast_id and job.voice == VOICE and job.enqueued_at > 0
    assert await read_jobs(redis) == []
    recipe = await read_recipe(redis, cast_id)
    assert recipe is not None and recipe.live and recipe.speed == 1.25
    assert (recipe.text, recipe.voice, recipe.title) == ("", VOICE, "Hello") and recipe.created_at > 0
    assert recipe.wh == write_hash(opened.write_token) and opened.write_token not in recipe.wh


async def test_recipe_of_a_submit_is_not_live_and_none_without_a_catalog(store: CastStore, redis: Redis) -> None:
    await store.submit(CAST, TEXT, VOICE, meta())
    recipe = await read_recipe(redis, CAST)
    assert recipe == Recipe(text=TEXT, voice=VOICE, title="Hello", created_at=recipe.created_at if recipe else 0)
    assert recipe is not None and not recipe.live and recipe.speed == 1.0
    assert await read_recipe(redis, content_id("other", VOICE)) is None


def test_job_with_an_id_that_is_no_cast_id_is_malformed() -> None:
    for fields in ({b"id": b"../etc", b"voice": b"af_heart"}, {b"voice": b"af_heart"}, {b"id": b"\xff\xfe"}):
        with pytest.raises(Malformed):
            decode_job(fields)


def test_job_with_an_unreadable_time_is_a_job_of_unknown_time() -> None:
    assert decode_job({b"id": CAST.encode(), b"enqueued_at": b"soon"}) == Job(id=CAST, enqueued_at=0)


async def test_a_job_added_by_hand_has_the_scripts_fields(redis: Redis) -> None:
    await enqueue(redis, Job(id=CAST, voice=VOICE, enqueued_at=7))
    ((_, fields),) = await redis.xrange(JOBS)
    assert fields == {b"id": CAST.encode(), b"voice": VOICE.encode(), b"enqueued_at": b"7", b"client": b""}


async def test_dead_letter_keeps_its_field_names_and_reads_back(redis: Redis) -> None:
    await dead_letter(redis, "../etc", 2, "malformed job entry", "worker-1")
    ((_, fields),) = await redis.xrange(JOBS_DEAD)
    assert set(fields) == {b"id", b"attempts", b"error", b"failed_at", b"consumer"}
    (dead,) = await read_dead(redis)
    assert (dead.id, dead.attempts, dead.error, dead.consumer) == ("../etc", 2, "malformed job entry", "worker-1")
    assert dead.failed_at > 0


async def test_receipt_round_trips_and_keeps_its_field_names(redis: Redis) -> None:
    done = Done(id=CAST, attempts=1, sentences=3, audio_ms=4200, synth_ms=900, first_audio_ms=310, finished_at=99)
    await announce_done(redis, done)
    ((_, fields),) = await redis.xrange(PROGRESS_DONE)
    assert {k.decode(): v.decode() for k, v in fields.items()} == {
        "id": CAST, "attempts": "1", "sentences": "3", "audio_ms": "4200", "synth_ms": "900",
        "first_audio_ms": "310", "finished_at": "99",
    }
    assert await read_done(redis) == [done]


async def test_voices_are_published_as_json_and_read_back(redis: Redis) -> None:
    offer = VoiceList(voices=("af_heart", "jf_alpha"), default="af_heart", backend="onnx", worker="w", at=5)
    await publish_voices(redis, offer, maxlen=100)
    ((_, fields),) = await redis.xrange(VOICES)
    assert json.loads(fields[b"voices"]) == ["af_heart", "jf_alpha"]
    assert {k.decode() for k in fields} == {"voices", "default", "backend", "worker", "at"}
    assert await read_voices(redis, 10) == offer


async def test_read_voices_skips_malformed_and_empty_entries_and_reports_the_malformed(redis: Redis) -> None:
    await redis.xadd(VOICES, {"voices": json.dumps(["af_heart"]), "default": "af_heart"})
    await redis.xadd(VOICES, {"voices": "[]", "default": "x"})
    bad = await redis.xadd(VOICES, {"voices": "not json", "default": "x"})
    heard: list[bytes] = []
    offer = await read_voices(redis, 10, on_malformed=lambda entry_id, _exc: heard.append(entry_id))
    assert offer == VoiceList(voices=("af_heart",), default="af_heart") and offer.backend is None
    assert heard == [bad]
    await redis.delete(VOICES)
    assert await read_voices(redis, 10) is None


def test_an_absent_optional_field_stays_off_the_wire() -> None:
    fields = encode(VoiceList(voices=("af_heart",)))
    assert "backend" not in fields and fields["voices"] == '["af_heart"]'


def test_unknown_fields_of_a_newer_writer_are_skipped() -> None:
    wire = {k.encode(): str(v).encode() for k, v in encode(DeadLetter(id="x", attempts=1, error="e", failed_at=2,
                                                                       consumer="c")).items()}
    assert decode(DeadLetter, {**wire, b"trace": b"abc"}) == DeadLetter(
        id="x", attempts=1, error="e", failed_at=2, consumer="c"
    )


async def test_the_delete_script_trashes_what_trash_decodes_and_a_malformed_entry_is_flagged(redis: Redis) -> None:
    blob = "casts/AbCdEfGhIjKl/1-0123456789abcdef.bin"
    await redis.xadd(cast_key(CAST), {"e": "eos", "h": "{}", "ts": 1, "a": b"x", "k": blob}, id="0-3")
    assert await archive.delete(redis, CAST)
    await redis.xadd(ARCHIVE_TRASH, {"blob": "misnamed"})
    assert [trash for _, trash in await read_trash(redis, 10)] == [Trash(key=blob), None]
