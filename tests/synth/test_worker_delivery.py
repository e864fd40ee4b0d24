"""The worker's delivery rules with a stand-in synthesizer and a real Redis: records, attempts,
retries, dead letters, skipping, fencing, leases and the graceful stop."""

from __future__ import annotations

import asyncio
import threading

import pytest
from jobstreams import enqueue, read_dead, read_done, read_jobs
from mp3decode import decode_mp3
from redis.asyncio import Redis

import castlog
import chunking
from castlog import Audio, CastStore, Eos, Error, LogReader, Start
from synth.worker import Worker
from tests.synth.support import (
    StandIn,
    config,
    delivered_all,
    has_audio,
    log_of,
    pending_count,
    running,
    submit,
    terminal,
    wait_until,
)

TEXT = "Hello there. This is a post deployment check. It has three sentences."


@pytest.mark.rule("ack-after-terminal")
async def test_one_cast_gets_start_audio_in_order_and_eos_then_receipt_and_ack(
    redis: Redis, store: CastStore
) -> None:
    cast_id = await submit(store, TEXT)
    async with running(Worker(config(), redis, StandIn())):
        entries = await terminal(store, cast_id)
    chunks = chunking.split_text(TEXT)
    kinds = [e.kind for e in entries]
    assert kinds == ["meta", "start"] + ["audio"] * len(chunks) + ["eos"]
    assert entries[1].record == Start(attempt=1, resume_from=0, at=entries[1].record.at)
    audio = [e.record for e in entries if isinstance(e.record, Audio)]
    assert [a.i for a in audio] == list(range(len(chunks)))
    assert [a.t for a in audio] == chunks
    offset = 0
    for a in audio:
        assert a.o == offset
        assert abs(len(decode_mp3(a.body)) / 24 - a.d) <= 1  # d is the decoded duration
        offset += a.d
    assert entries[-1].record == Eos(sentences=len(chunks), audio_ms=offset, attempts=1)
    (receipt,) = await read_done(redis)
    assert receipt.id == cast_id and receipt.attempts == 1
    assert receipt.sentences == len(chunks) and receipt.audio_ms == offset
    enqueued_at = (await read_jobs(redis))[0].enqueued_at
    first_audio = next(e for e in entries if e.kind == "audio")
    assert receipt.first_audio_ms == first_audio.ts - enqueued_at  # Redis's clock, both ends
    assert receipt.finished_at >= entries[-1].ts - 1000  # the eos's stamp (Redis's clock)
    await wait_until(lambda: _no_pending(redis))


@pytest.mark.rule("unknown-kind-skipped")
async def test_a_log_ending_in_a_kind_this_version_skips_still_gets_its_audio(
    redis: Redis, store: CastStore
) -> None:
    cast_id = await submit(store, TEXT)
    # a newer writer's record right after `meta`: the worker must append after it, not over it
    await redis.xadd(castlog.cast_key(cast_id), {"e": "chapter", "h": '{"e":"chapter"}'}, id="0-2")
    async with running(Worker(config(), redis, StandIn())):
        entries = await terminal(store, cast_id)
    assert [e.seq_num for e in entries[:2]] == [0, 2]
    assert entries[1].kind == "start" and entries[-1].kind == "eos"


async def test_job_for_finished_cast_is_acknowledged_and_skipped(redis: Redis, store: CastStore) -> None:
    cast_id = await submit(store, TEXT)
    synth = StandIn()
    async with running(Worker(config(), redis, synth)):
        await terminal(store, cast_id)
        await wait_until(lambda: _no_pending(redis))
        calls, tail = len(synth.calls), await LogReader(store.redis).tail(cast_id)
        # A duplicate job for the same (finished) cast, as a re-delivery would bring it.
        await enqueue(redis, castlog.streams.Job(id=cast_id, voice="af_heart", enqueued_at=1))
        await wait_until(lambda: _no_pending(redis))
        await wait_until(lambda: delivered_all(redis))
    assert len(synth.calls) == calls
    assert await LogReader(store.redis).tail(cast_id) == tail
    assert len(await read_done(redis)) == 1


@pytest.mark.rule("attempts-count-failures")
async def test_chunk_that_always_fails_gets_three_attempts_then_error_dead_letter_and_ack(
    redis: Redis, store: CastStore
) -> None:
    cast_id = await submit(store, TEXT)
    synth = StandIn(fail=lambda text: text.startswith("It has"))
    async with running(Worker(config(max_attempts=3), redis, synth)):
        entries = await terminal(store, cast_id)
        await wait_until(lambda: _no_pending(redis))
    starts = [e.record for e in entries if isinstance(e.record, Start)]
    assert [(s.attempt, s.resume_from) for s in starts] == [(1, 0), (2, 2), (3, 2)]
    assert isinstance(entries[-1].record, Error) and entries[-1].record.attempts == 3
    assert "sentence 2" in entries[-1].record.reason
    played = castlog.playable(entries)
    assert [e.record.i for e in played] == [0, 1]  # the finished sentences were never redone
    (dead,) = await read_dead(redis)
    assert dead.id == cast_id and dead.attempts == 3 and dead.consumer == "test-worker"
    assert "stand-in failure" in dead.error and dead.failed_at > 0


async def test_unknown_voice_fails_at_once_without_retries(redis: Redis, store: CastStore) -> None:
    cast_id = await submit(store, TEXT, voice="zz_nobody")
    synth = StandIn()
    async with running(Worker(config(), redis, synth)):
        entries = await terminal(store, cast_id)
        await wait_until(lambda: _no_pending(redis))
    assert [e.kind for e in entries] == ["meta", "error"]
    assert "unknown voice 'zz_nobody'" in entries[-1].record.reason
    assert synth.calls == []
    assert len(await read_dead(redis)) == 1


@pytest.mark.rule("error-is-retried")
async def test_resubmitted_failed_cast_continues_attempt_numbers(redis: Redis, store: CastStore) -> None:
    failing = threading.Event()
    failing.set()
    synth = StandIn(fail=lambda text: failing.is_set() and text.startswith("This is"))
    cast_id = await submit(store, TEXT)
    async with running(Worker(config(max_attempts=2), redis, synth)):
        await terminal(store, cast_id)
        failing.clear()
        assert await submit(store, TEXT) == cast_id  # intake re-enqueues a cast that ended in error
        await wait_until(lambda: _ends_in(store, cast_id, "eos"))
    entries = await log_of(store, cast_id)
    starts = [e.record for e in entries if isinstance(e.record, Start)]
    assert [(s.attempt, s.resume_from) for s in starts] == [(1, 0), (2, 1), (3, 1)]
    assert [e.record.i for e in castlog.playable(entries)] == [0, 1, 2]


@pytest.mark.rule("pending-taken-over")
async def test_restarted_worker_resumes_its_own_pending_job_with_attempt_two(
    redis: Redis, store: CastStore
) -> None:
    text = " ".join(f"Sentence number {n} is here." for n in range(6))
    cast_id = await submit(store, text)
    # Stopped after two sentences: the job stays pending under this consumer name.
    async with running(Worker(config(), redis, StandIn(rtf=0.3))):
        await wait_until(lambda: has_audio(store, cast_id, 2))
    entries = await log_of(store, cast_id)
    done = len([e for e in entries if e.kind == "audio"])
    assert await pending_count(redis) == 1
    async with running(Worker(config(), redis, StandIn())):  # same consumer name: a restart
        entries = await terminal(store, cast_id)
    starts = [e.record for e in entries if isinstance(e.record, Start)]
    assert [(s.attempt, s.resume_from) for s in starts] == [(1, 0), (2, done)]
    played = [e.record for e in castlog.playable(entries)]
    assert [a.i for a in played] == list(range(len(chunking.split_text(text))))
    assert [a.o for a in played] == [sum(p.d for p in played[:k]) for k in range(len(played))]


@pytest.mark.rule("receipt-at-least-once")
async def test_a_resumed_casts_receipt_times_its_first_audio_from_the_first_attempt(
    redis: Redis, store: CastStore
) -> None:
    """The receipt's stamps come from the appends (the finishing attempt's own) and, for audio
    of an earlier attempt, from the log read at admission: nothing is read back for them."""
    text = " ".join(f"Sentence number {n} is here." for n in range(4))
    cast_id = await submit(store, text)
    async with running(Worker(config(), redis, StandIn(rtf=0.3))):
        await wait_until(lambda: has_audio(store, cast_id, 1))
    async with running(Worker(config(), redis, StandIn())):  # a restart: attempt 2 finishes it
        entries = await terminal(store, cast_id)
        await wait_until(lambda: _no_pending(redis))
    (receipt,) = await read_done(redis)
    enqueued_at = (await read_jobs(redis))[0].enqueued_at
    first_audio = next(e for e in entries if e.kind == "audio")
    assert [e.kind for e in entries].index("audio") < [e.kind for e in entries].index("start", 2)  # attempt 1's
    assert receipt.attempts == 2 and receipt.first_audio_ms == first_audio.ts - enqueued_at
    assert receipt.finished_at == entries[-1].ts  # the eos's stamp


@pytest.mark.rule("ack-after-terminal")
async def test_stop_finishes_the_chunk_in_hand_and_leaves_the_job_pending(
    redis: Redis, store: CastStore
) -> None:
    text = " ".join(f"Sentence number {n} is here." for n in range(8))
    cast_id = await submit(store, text)
    synth = StandIn(rtf=0.5)  # about 0.7 s per chunk
    worker = Worker(config(), redis, synth)
    task = asyncio.create_task(worker.run())
    await wait_until(lambda: has_audio(store, cast_id, 1))
    await asyncio.sleep(0.2)  # the next chunk is in hand
    worker.stop()
    await asyncio.wait_for(task, 5)
    entries = await log_of(store, cast_id)
    audio = [e.record for e in entries if isinstance(e.record, Audio)]
    assert len(audio) == len(synth.calls)  # every chunk begun was appended, none after
    assert entries[-1].kind == "audio"
    assert await pending_count(redis) == 1


@pytest.mark.rule("append-fenced")
async def test_second_worker_takes_over_after_the_lease_and_the_old_append_is_refused(
    redis: Redis, store: CastStore
) -> None:
    cast_id = await submit(store, TEXT)
    gate = threading.Event()
    stuck = StandIn(gate=gate)  # a worker that hangs inside its first chunk ...
    old = Worker(config("old", lease_s=600), redis, stuck)
    async with running(old):
        await wait_until(lambda: stuck.started.is_set())
        new = Worker(config("new", lease_s=1.0), redis, StandIn())
        async with running(new):  # ... loses its lease, and the cast is finished elsewhere
            entries = await terminal(store, cast_id)
            await wait_until(lambda: _no_pending(redis))
            gate.set()  # the old worker wakes up and tries to append its chunk
            await wait_until(lambda: not old.casts)
    assert await log_of(store, cast_id) == entries  # the late append was refused
    starts = [e.record for e in entries if isinstance(e.record, Start)]
    assert [(s.attempt, s.resume_from) for s in starts] == [(1, 0), (2, 0)]
    assert [e.record.i for e in castlog.playable(entries)] == [0, 1, 2]


@pytest.mark.rule("pending-taken-over")
async def test_lease_refresh_keeps_a_slow_job_from_being_taken_over(redis: Redis, store: CastStore) -> None:
    text = " ".join(f"Sentence number {n} is here." for n in range(4))
    cast_id = await submit(store, text)
    slow = StandIn(rtf=1.0)  # about 1.4 s per chunk: longer than the lease
    deliveries = []
    async with running(Worker(config("slow", lease_s=0.9), redis, slow)):
        await wait_until(lambda: slow.started.is_set())
        async with running(Worker(config("thief", lease_s=0.9), redis, StandIn())):
            while (last := await LogReader(store.redis).last(cast_id)) is None or last.kind != "eos":
                rows = await redis.xpending_range(castlog.JOBS, castlog.GROUP, "-", "+", 1)
                deliveries += [(r["consumer"], r["times_delivered"]) for r in rows]
                await asyncio.sleep(0.1)
            entries = await log_of(store, cast_id)
    assert [e.record.attempt for e in entries if isinstance(e.record, Start)] == [1]
    # Refreshed, never re-delivered: neither taken by the thief nor re-claimed by its owner.
    assert len(deliveries) > 20 and set(deliveries) == {(b"slow", 1)}


async def test_malformed_job_is_dead_lettered_and_acknowledged(redis: Redis) -> None:
    async with running(Worker(config(), redis, StandIn())):
        await redis.xadd(castlog.JOBS, {"id": "../etc", "voice": "af_heart"})
        await wait_until(lambda: delivered_all(redis))
    (dead,) = await read_dead(redis)
    assert dead.id == "../etc" and dead.error == "malformed job entry"


async def _no_pending(redis: Redis) -> bool:
    return await pending_count(redis) == 0


async def _ends_in(store: CastStore, cast_id: str, kind: str) -> bool:
    last = await LogReader(store.redis).last(cast_id)
    return last is not None and last.kind == kind



async def test_duplicate_job_for_an_active_cast_is_acknowledged_without_restarting_it(
    redis: Redis, store: CastStore
) -> None:
    text = " ".join(f"Sentence number {n} is here." for n in range(5))
    cast_id = await submit(store, text)
    async with running(Worker(config(), redis, StandIn(rtf=0.3))):
        await wait_until(lambda: has_audio(store, cast_id, 1))
        await enqueue(redis, castlog.streams.Job(id=cast_id, voice="af_heart", enqueued_at=1))
        entries = await terminal(store, cast_id)
        await wait_until(lambda: delivered_all(redis))
    assert [(s.attempt, s.resume_from) for s in (e.record for e in entries) if isinstance(s, Start)] == [(1, 0)]
    assert [e.record.i for e in castlog.playable(entries)] == list(range(5))


async def test_worker_recreates_its_group_when_redis_lost_its_data(redis: Redis, store: CastStore) -> None:
    async with running(Worker(config(), redis, StandIn())):
        # the queue's group and the key lanes' group are both made (keys.jobs_lane_key: the mover's)
        async def both_groups() -> bool:
            return await redis.exists(castlog.JOBS, castlog.keys.jobs_lane_key(castlog.keys.LANES - 1)) == 2

        await wait_until(both_groups)
        await redis.flushall()  # a Redis restart without persistence
        cast_id = await submit(store, TEXT)
        entries = await terminal(store, cast_id)
    assert entries[-1].kind == "eos"


async def test_job_with_an_id_that_is_not_utf8_is_dead_lettered_and_the_worker_goes_on(
    redis: Redis, store: CastStore
) -> None:
    async with running(Worker(config(), redis, StandIn())) as task:
        await redis.xadd(castlog.JOBS, {"id": b"\xff\xfe", "voice": "af_heart"})
        await wait_until(lambda: delivered_all(redis))
        assert not task.done()  # a worker that died on it would die again on every restart
        cast_id = await submit(store, TEXT)
        assert (await terminal(store, cast_id))[-1].kind == "eos"
    (dead,) = await read_dead(redis)
    assert dead.error == "malformed job entry"
