"""Helpers shared by the worker tests (no tests here): a stand-in synthesizer, a worker run in
the test's event loop, submitting casts, waiting for a log to end. (The real model comes from
the ``synthesizer`` fixture of tests/synth/conftest.py.)"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import replace

import numpy as np
from redis.asyncio import Redis

import castlog
import chunking
from castlog import SAMPLE_RATE, CastStore, Entry, LogReader, Meta
from synth.config import SynthConfig
from synth.worker import Worker
from tests.support.waiting import wait_until  # the worker tests import it from here with the rest

STANDIN_VOICES = ["af_heart", "jf_alpha"]
# The stand-in speaks 50 ms of tone per character, like a brisk reader.
MS_PER_CHAR = 50


class StandIn:
    """A synthesizer without a model: a tone whose length follows the text, after sleeping
    ``rtf`` times that length. ``fail`` makes chosen chunks raise; ``gate`` (when set up) holds
    every inference until it is opened, like a paused process."""

    name = "standin"

    def __init__(
        self,
        rtf: float = 0.0,
        fail: Callable[[str], bool] | None = None,
        gate: threading.Event | None = None,
    ) -> None:
        self.rtf = rtf
        self.fail = fail
        self.gate = gate
        self.calls: list[str] = []  # chunk texts in the order they were synthesized
        self.started = threading.Event()  # set once an inference has begun

    def voices(self) -> list[str]:
        return list(STANDIN_VOICES)

    def warm_up(self) -> None:
        pass

    def phonemize(self, text: str, voice: str) -> str:
        return text.lower()

    def synthesize(self, text: str, voice: str, speed: float = 1.0) -> np.ndarray:
        self.started.set()
        if self.gate is not None:
            self.gate.wait()
        self.calls.append(text)
        if self.fail is not None and self.fail(text):
            raise RuntimeError(f"stand-in failure on {text!r}")
        seconds = len(text) * MS_PER_CHAR / 1000
        time.sleep(self.rtf * seconds)
        t = np.arange(int(seconds * SAMPLE_RATE), dtype=np.float32) / SAMPLE_RATE
        return (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)

    def synthesize_phonemes(self, phonemes: str, voice: str, speed: float = 1.0) -> np.ndarray:
        return self.synthesize(phonemes, voice, speed)


def config(consumer: str = "test-worker", **overrides: object) -> SynthConfig:
    """Limits that make tests quick: short polls and backoffs; the lease stays long unless a
    test is about leases."""
    base = SynthConfig(consumer=consumer, poll_s=0.1, retry_backoff_s=0.05, stats_interval_s=0.2)
    return replace(base, **overrides)  # type: ignore[arg-type]


@contextlib.asynccontextmanager
async def running(worker: Worker) -> AsyncIterator[asyncio.Task[None]]:
    """Run ``worker`` in this loop for the block; stop it (gracefully) at the end."""
    task = asyncio.create_task(worker.run())
    try:
        yield task
    finally:
        worker.stop()
        await asyncio.wait_for(asyncio.gather(task, return_exceptions=True), 30)


async def submit(store: CastStore, text: str, voice: str = "af_heart", title: str = "t") -> str:
    cast_id = castlog.content_id(text, voice)
    meta = Meta(title=title, voice=voice, chars=len(text), sentences=chunking.count_chunks(text), created_at=0)
    await store.submit(cast_id, text, voice, meta)
    return cast_id


async def log_of(store: CastStore, cast_id: str) -> list[Entry]:
    return await LogReader(store.redis).read(cast_id, 0, 10_000)


async def terminal(store: CastStore, cast_id: str, timeout_s: float = 60.0) -> list[Entry]:
    """The log once it ends in `eos` or `error`."""
    async def done() -> bool:
        last = await LogReader(store.redis).last(cast_id)
        return last is not None and castlog.is_terminal(last.record)

    await wait_until(done, timeout_s)
    return await log_of(store, cast_id)


async def pending_count(redis: Redis) -> int:
    info = await redis.xpending(castlog.JOBS, castlog.GROUP)
    return int(info["pending"])


async def delivered_all(redis: Redis) -> bool:
    """Every job of `jobs` was read by the group and acknowledged (no lag, nothing pending)."""
    groups = await redis.xinfo_groups(castlog.JOBS) if await redis.exists(castlog.JOBS) else []
    return bool(groups) and int(groups[0]["lag"] or 0) == 0 and int(groups[0]["pending"]) == 0


async def has_audio(store: CastStore, cast_id: str, n: int) -> bool:
    """The cast's log holds at least ``n`` audio records (of any attempt)."""
    return sum(1 for e in await log_of(store, cast_id) if e.kind == "audio") >= n
