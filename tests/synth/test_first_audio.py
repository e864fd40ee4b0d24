"""An attempt's first chunk is on its listener's path: it is encoded on the model thread straight
after its inference, at SYNTH_FIRST_MP3_QUALITY, and is in the log before the model starts the
next chunk; later chunks go through the appender's encoder thread at LAME's default."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest
from redis.asyncio import Redis

import castlog
import chunking
import synth.appender
from castlog import Audio, CastStore, Error, Start
from synth.worker import Worker
from tests.synth.support import StandIn, config, running, submit, terminal

TEXT = "Hello there. This is a post deployment check. It has three sentences."


class Encodes:
    """Stands in for the appender's ``encode_chunk``: notes the thread and quality of every call."""

    def __init__(self, real: Any, fail_first: bool = False) -> None:
        self.real, self.fail_first = real, fail_first
        self.calls: list[tuple[str, int | None]] = []

    def __call__(self, pcm: Any, *args: Any, **kwargs: Any) -> Any:
        self.calls.append((threading.current_thread().name, kwargs.get("quality")))
        if self.fail_first and kwargs.get("quality") is not None:
            raise RuntimeError("encoder broke")
        return self.real(pcm, *args, **kwargs)


def watch(worker: Worker, synth: StandIn, events: list[tuple[str, str]]) -> None:
    """Note each inference's start (its text) and each audio append (its chunk's text), in order."""
    synthesize, append = synth.synthesize, worker.store.append_stamped

    def noted_synthesize(text: str, voice: str, speed: float = 1.0) -> np.ndarray:
        events.append(("infer", text))
        return synthesize(text, voice, speed)

    async def noted_append(cast_id: str, tail: int, records: list[Any]) -> castlog.Stamped:
        stamped = await append(cast_id, tail, records)
        events.extend(("append", r.t) for r in records if isinstance(r, Audio))
        return stamped

    synth.synthesize = noted_synthesize  # type: ignore[method-assign]
    worker.store.append_stamped = noted_append  # type: ignore[method-assign]


@pytest.mark.rule("first-audio-at-once")
async def test_first_chunk_is_in_the_log_before_the_next_inference_starts(
    redis: Redis, store: CastStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    encodes = Encodes(synth.appender.encode_chunk)
    monkeypatch.setattr(synth.appender, "encode_chunk", encodes)
    chunks = chunking.split_text(TEXT)
    standin, events = StandIn(), list[tuple[str, str]]()
    cfg = config(first_mp3_quality=7)
    worker = Worker(cfg, redis, standin)
    watch(worker, standin, events)
    cast_id = await submit(store, TEXT)
    async with running(worker):
        entries = await terminal(store, cast_id)
    assert [e.record.t for e in entries if isinstance(e.record, Audio)] == chunks
    assert events.index(("append", chunks[0])) < events.index(("infer", chunks[1]))
    warm, *calls = encodes.calls  # the appender's warm-up encodes nothing at start
    assert warm == ("synth-encode_0", None)
    model, encoder = calls[0], calls[1:]
    assert model[0].startswith("synth-model") and model[1] == 7  # no hop through the loop and the appender
    assert len(encoder) == len(chunks) - 1
    assert all(name.startswith("synth-encode") and quality is None for name, quality in encoder)


@pytest.mark.rule("first-audio-at-once")
async def test_a_resumed_attempts_first_chunk_goes_the_same_way(
    redis: Redis, store: CastStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    encodes = Encodes(synth.appender.encode_chunk)
    monkeypatch.setattr(synth.appender, "encode_chunk", encodes)
    failed = threading.Event()

    def fail_once(text: str) -> bool:
        first = text.startswith("It has") and not failed.is_set()
        failed.set() if first else None
        return first

    cast_id = await submit(store, TEXT)
    async with running(Worker(config(), redis, StandIn(fail=fail_once))):
        entries = await terminal(store, cast_id)
    starts = [e.record for e in entries if isinstance(e.record, Start)]
    assert [(s.attempt, s.resume_from) for s in starts] == [(1, 0), (2, 2)]
    on_model = [quality for name, quality in encodes.calls if name.startswith("synth-model")]
    assert on_model == [config().first_mp3_quality] * 2  # chunk 0 of attempt 1, chunk 2 of attempt 2


@pytest.mark.rule("first-audio-at-once")
async def test_a_first_chunk_the_encoder_fails_fails_the_attempt(
    redis: Redis, store: CastStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(synth.appender, "encode_chunk", Encodes(synth.appender.encode_chunk, fail_first=True))
    cast_id = await submit(store, TEXT)
    async with running(Worker(config(max_attempts=2), redis, StandIn())):
        entries = await terminal(store, cast_id)
    starts = [e.record for e in entries if isinstance(e.record, Start)]
    assert [(s.attempt, s.resume_from) for s in starts] == [(1, 0), (2, 0)]
    assert not any(e.kind == "audio" for e in entries)
    error = entries[-1].record
    assert isinstance(error, Error) and error.attempts == 2
    assert "sentence 0: encoding failed" in error.reason and "encoder broke" in error.reason
