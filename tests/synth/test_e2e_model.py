"""The worker with the real Kokoro model (onnx backend, 2 threads): whole casts, concurrency,
crashes, lease take-over, failures. Small texts: the model runs at about half real time here."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from jobstreams import enqueue, read_dead, read_done
from modelwrap import Wrapped
from mp3decode import decode_mp3
from redis.asyncio import Redis

import castlog
import chunking
from castlog import Audio, CastStore, Entry, LogReader, Start
from castlog.lanes import LaneMover
from streamtts.redisserver import free_port
from synth.model import Synthesizer
from synth.model.base import Word
from synth.worker import Worker
from tests.synth.support import (
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

pytestmark = pytest.mark.model

REPO = Path(__file__).resolve().parents[2]
FOUR = (
    "The night train left the station a few minutes after eleven. Most of the passengers were "
    "already asleep. A conductor walked the length of the carriage twice. Nobody got on, and "
    "nobody got off."
)


def voice_of(synth: Synthesizer) -> str:
    voices = synth.voices()
    return "af_heart" if "af_heart" in voices else voices[0]


class Flaky(Wrapped):
    """The real model, except that chosen chunks raise (a test-only seam, not a setting)."""

    def __init__(self, real: Synthesizer, fails: str) -> None:
        super().__init__(real)
        self.fails = fails
        self.calls: list[str] = []

    def watch(self, text: str) -> None:
        self.calls.append(text)
        if text == self.fails:
            raise RuntimeError("injected failure")

    def synthesize(self, text: str, voice: str, speed: float = 1.0) -> np.ndarray:
        self.watch(text)
        return self.real.synthesize(text, voice, speed)

    def synthesize_timed(self, text: str, voice: str, speed: float = 1.0) -> tuple[np.ndarray, list[Word]]:
        self.watch(text)  # the worker's path, as in production
        return super().synthesize_timed(text, voice, speed)


class Paused(Flaky):
    """The real model behind a gate: a worker whose process stalls in the middle of a chunk."""

    def __init__(self, real: Synthesizer) -> None:
        super().__init__(real, fails="")
        self.gate, self.entered = threading.Event(), threading.Event()

    def watch(self, text: str) -> None:
        self.entered.set()
        self.gate.wait()


def audio_of(entries: list[Entry]) -> list[Audio]:
    return [e.record for e in entries if isinstance(e.record, Audio)]


def starts_of(entries: list[Entry]) -> list[tuple[int, int]]:
    return [(e.record.attempt, e.record.resume_from) for e in entries if isinstance(e.record, Start)]


def assert_plays_every_sentence_once(entries: list[Entry], text: str) -> None:
    chunks = chunking.split_text(text)
    played = [e.record for e in castlog.playable(entries) if isinstance(e.record, Audio)]
    # the worker may cut a chunk further while its listener's buffer is thin (synth's ramp), so
    # the played chunks are the planned ones, each cut into one or more pieces, in order
    assert [a.i for a in played] == list(range(len(played))) and len(played) >= len(chunks)
    assert " ".join(a.t for a in played).split() == " ".join(chunks).split()
    assert [a.o for a in played] == [sum(p.d for p in played[:k]) for k in range(len(played))]
    assert entries[-1].kind == "eos"


async def test_one_cast_end_to_end_with_the_real_model(
    redis: Redis, store: CastStore, synthesizer: Synthesizer, texts: dict[str, str]
) -> None:
    text = texts["short"]
    cast_id = await submit(store, text, voice_of(synthesizer))
    model = Flaky(synthesizer, fails="")
    async with running(Worker(config(), redis, model)):
        entries = await terminal(store, cast_id)
        # A job for the now finished cast is acknowledged and skipped.
        await enqueue(redis, castlog.streams.Job(id=cast_id, voice=voice_of(synthesizer), enqueued_at=1))
        await wait_until(lambda: delivered_all(redis))
    assert [e.seq_num for e in entries] == list(range(len(entries)))
    chunks = chunking.split_text(text)
    assert [e.kind for e in entries] == ["meta", "start"] + ["audio"] * len(chunks) + ["eos"]
    audio = audio_of(entries)
    assert [a.i for a in audio] == list(range(len(chunks)))
    assert " ".join(a.t for a in audio) == " ".join(text.split())  # `t` joins back to the text
    for a in audio:
        assert len(decode_mp3(a.body)) == a.d * 24  # exact: 24 samples per ms at 24 kHz
    whole = decode_mp3(b"".join(a.body for a in audio))  # the chunks are one valid stream
    assert len(whole) == sum(a.d for a in audio) * 24
    assert float(np.sqrt(np.mean(np.square(whole)))) > 0.01  # speech, not silence
    assert entries[-1].record.audio_ms == sum(a.d for a in audio)
    assert len(model.calls) == len(chunks)  # the duplicate job synthesized nothing
    assert await LogReader(store.redis).tail(cast_id) == len(entries)
    assert len(await read_done(redis)) == 1


async def test_three_concurrent_casts_each_get_first_audio_before_any_finishes(
    redis: Redis, store: CastStore, synthesizer: Synthesizer, texts: dict[str, str]
) -> None:
    voice = voice_of(synthesizer)
    bodies = ["Hello there. A two sentence cast.", texts["short"], FOUR]
    ids = [await submit(store, body, voice) for body in bodies]
    mover = LaneMover(redis, "mover", lease_ms=30_000, single_redis=True)
    await mover.open()
    assert await mover.sweep(10) == len(ids)  # all three in `jobs` for the worker's first read
    worker = Worker(config(), redis, synthesizer)
    # A model measured fast enough for three listeners (a GPU's), so that admission takes all three
    # at once: on this CPU it feeds about one, and would start each after the one before. The first
    # chunk made here replaces the figure (a slower chunk counts at once), after the three are in.
    worker.crew.speed.slow_rtf, worker.crew.speed.measured_s = 0.1, 60.0
    async with running(worker):
        logs = [await terminal(store, cast_id, 120) for cast_id in ids]
    first_audio = [next(e.ts for e in entries if e.kind == "audio") for entries in logs]
    finished = [entries[-1].ts for entries in logs]
    assert max(first_audio) < min(finished)
    for entries, body in zip(logs, bodies):
        assert_plays_every_sentence_once(entries, body)


async def test_chunk_that_always_fails_with_the_real_model_ends_in_error_and_dead_letter(
    redis: Redis, store: CastStore, synthesizer: Synthesizer, texts: dict[str, str]
) -> None:
    text = texts["short"]
    chunks = chunking.split_text(text)
    cast_id = await submit(store, text, voice_of(synthesizer))
    model = Flaky(synthesizer, fails=chunks[1])
    async with running(Worker(config(max_attempts=3), redis, model)):
        entries = await terminal(store, cast_id)
        await wait_until(lambda: delivered_all(redis))
    assert starts_of(entries) == [(1, 0), (2, 1), (3, 1)]
    assert entries[-1].kind == "error" and entries[-1].record.attempts == 3
    assert model.calls == [chunks[0]] + [chunks[1]] * 3  # sentence 0 was never redone
    assert [dead.id for dead in await read_dead(redis)] == [cast_id]
    assert await pending_count(redis) == 0


@pytest.mark.rule("append-fenced")
async def test_second_worker_takes_over_after_the_lease_and_the_late_append_is_refused(
    redis: Redis, store: CastStore, synthesizer: Synthesizer, caplog: pytest.LogCaptureFixture
) -> None:
    cast_id = await submit(store, FOUR, voice_of(synthesizer))
    stalled = Paused(synthesizer)
    old = Worker(config("old", lease_s=600), redis, stalled)  # never refreshes within the test
    caplog.set_level(logging.WARNING, logger="synth.outcomes")  # where "append refused" is logged
    async with running(old):
        await wait_until(lambda: stalled.entered.is_set())
        async with running(Worker(config("new", lease_s=2.0), redis, synthesizer)):
            entries = await terminal(store, cast_id, 90)
            await wait_until(lambda: delivered_all(redis))
        stalled.gate.set()  # the old worker comes back with its chunk
        await wait_until(lambda: not old.casts, 30)
    assert any("append refused" in r.getMessage() for r in caplog.records)
    assert await log_of(store, cast_id) == entries
    assert starts_of(entries) == [(1, 0), (2, 0)]
    assert_plays_every_sentence_once(entries, FOUR)


@pytest.fixture
def spawn(redis_url: str, model_cache: Path, model_dir: Path, tmp_path: Path) -> Iterator[Spawner]:
    spawner = Spawner(redis_url, model_cache, tmp_path, model_dir)
    yield spawner
    spawner.kill_all()


class Spawner:
    """`python -m synth` subprocesses with their settings in the environment."""

    def __init__(self, redis_url: str, model_cache: Path, folder: Path, model_dir: Path) -> None:
        self.redis_url, self.model_cache, self.folder = redis_url, model_cache, folder
        self.model_dir = model_dir  # the English packs, as in the in-process synthesizer
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, consumer: str, **env: str) -> subprocess.Popen[bytes]:
        settings = {
            **os.environ,
            "REDIS_URL": self.redis_url,
            "SYNTH_CONSUMER": consumer,
            "SYNTH_BACKEND": "onnx",
            "SYNTH_THREADS": "2",
            "SYNTH_CACHE_DIR": str(self.model_cache),
            "KOKORO_MODEL_DIR": str(self.model_dir),
            "SYNTH_METRICS_PORT": str(free_port()),
            "SYNTH_POLL_S": "0.1",
            **env,
        }
        log = open(self.folder / f"{consumer}-{len(self.procs)}.log", "wb")
        proc = subprocess.Popen(
            [sys.executable, "-m", "synth"], cwd=REPO, env=settings, stdout=log, stderr=subprocess.STDOUT
        )
        log.close()
        self.procs.append(proc)
        return proc

    def kill_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


async def test_kill_9_mid_cast_then_restart_resumes_with_attempt_two_and_no_sentence_twice(
    redis: Redis, store: CastStore, synthesizer: Synthesizer, spawn: Spawner
) -> None:
    cast_id = await submit(store, FOUR, voice_of(synthesizer))
    first = spawn.start("box-1")
    await wait_until(lambda: has_audio(store, cast_id, 1), 60)
    first.send_signal(signal.SIGKILL)
    first.wait()
    killed = await log_of(store, cast_id)
    done = len(audio_of(killed))
    assert killed[-1].kind != "eos"  # killed mid-cast
    assert await pending_count(redis) == 1  # the job survived the crash

    spawn.start("box-1")  # the same consumer name: a restart re-reads its own pending entry
    entries = await terminal(store, cast_id, 90)
    assert starts_of(entries) == [(1, 0), (2, done)]
    assert_plays_every_sentence_once(entries, FOUR)
    # every chunk once, none missing (the ramp may cut a planned chunk into more pieces)
    made = sorted(a.i for a in audio_of(entries))
    assert made == list(range(len(made))) and len(made) >= len(chunking.split_text(FOUR))
    await wait_until(lambda: delivered_all(redis))


async def test_sigterm_finishes_the_chunk_in_hand_and_exits_within_the_grace_period(
    redis: Redis, store: CastStore, synthesizer: Synthesizer, spawn: Spawner
) -> None:
    cast_id = await submit(store, FOUR, voice_of(synthesizer))
    proc = spawn.start("box-2", SYNTH_GRACE_S="20")
    await wait_until(lambda: has_audio(store, cast_id, 1), 60)
    stopped_at = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert await asyncio.to_thread(proc.wait, 25) == 0
    assert time.monotonic() - stopped_at < 20
    entries = await log_of(store, cast_id)
    assert entries[-1].kind == "audio"  # stopped between chunks, nothing half-written
    assert await pending_count(redis) == 1  # left pending: it resumes elsewhere

    spawn.start("box-3", SYNTH_LEASE_S="1")  # another worker takes it over after the lease
    entries = await terminal(store, cast_id, 90)
    assert [a for a, _ in starts_of(entries)] == [1, 2]
    assert_plays_every_sentence_once(entries, FOUR)
