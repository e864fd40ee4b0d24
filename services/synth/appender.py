"""An appender: the way of a synthesized chunk into its cast's log.

An appender is a bounded queue of chunks from the model thread and an encoder thread of its own; its
loop encodes each chunk to MP3 (overlapping the next inference), appends it by conditional
append at the tail the cast expects, and finishes the cast once it is complete. A chunk that
failed in the model travels the same queue, so the chunks before it are appended first.

The worker has two appenders: whole-text casts, and open casts, whose sentences never wait behind
whole-text chunks in the encoder (one in flight per open cast keeps each in order).

An attempt's first chunk comes encoded (the synth loop encodes it on the model thread at once)
and lands past the queue (:meth:`Appender.land`): nothing of its attempt is before it, and its
listener waits for it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial

import numpy as np
from redis.exceptions import RedisError

from castlog import SAMPLE_RATE, SeqMismatch

from .cast import ActiveCast
from .config import SynthConfig
from .crew import Crew
from .model import Audio
from .model.timing import Word
from .mp3 import EncodedChunk, encode_chunk
from .outcomes import Outcomes

# Synthesized chunks waiting for the encoder: one, so the model runs ahead by exactly a chunk.
PIPELINE_DEPTH = 1

NO_PCM: Audio = np.zeros(0, dtype=np.float32)
Encoding = Callable[[Audio], EncodedChunk]  # how a chunk is encoded (see encoder())


@dataclass
class Synthesized:
    """A chunk between the model thread and its append, or the news that it failed: failures
    travel the same queue so that the chunks before them are appended first, in order."""

    cast: ActiveCast
    index: int
    pcm: Audio
    failure: str | None = None
    words: list[Word] = field(default_factory=list)  # (text, start ms, end ms) in ``pcm``
    ready: EncodedChunk | None = None  # its MP3, once encoded
    encode_s: float = 0.0  # how long that took
    cached: bool = False  # its PCM came from the chunk cache, not the model

    def encode_with(self, encode: Encoding) -> None:
        """On an encoder's thread (or the model's): its MP3, or the news that the encoder failed
        (which fails the attempt), and how long that took."""
        started = time.perf_counter()
        try:
            self.ready = encode(self.pcm)
        except Exception as exc:  # noqa: BLE001 - an encoder failure fails the attempt
            self.failure = f"sentence {self.index}: encoding failed: {exc!r}"
        self.encode_s = time.perf_counter() - started


def encoder(cfg: SynthConfig, cast: ActiveCast, index: int) -> Encoding:
    """How chunk ``index`` of ``cast`` is encoded; an attempt's first, which its listener waits
    for, at ``SYNTH_FIRST_MP3_QUALITY``."""
    quality = cfg.first_mp3_quality if index == cast.resume_from else None
    return partial(encode_chunk, bitrate=cfg.bitrate, trim_lead=cast.trims_lead(index), quality=quality)


def made_ms(pcm: Audio) -> int:
    """A chunk's length as the model made it: the lead's estimate until it is encoded (the
    encoder trims silence)."""
    return len(pcm) * 1000 // SAMPLE_RATE


class Appender:
    """One queue of synthesized chunks, drained by :meth:`run` through one encoder thread."""

    def __init__(self, crew: Crew, outcomes: Outcomes, name: str) -> None:
        self.crew, self.outcomes = crew, outcomes
        # Chunks from the synth loop (None: no more, the loop ends); a put waits while it is full.
        self.queue: asyncio.Queue[Synthesized | None] = asyncio.Queue(PIPELINE_DEPTH)
        self.pool = ThreadPoolExecutor(1, thread_name_prefix=name)

    async def warm(self) -> None:
        """The encoder's first use loads the codec: not on a listener's first chunk."""
        await asyncio.get_running_loop().run_in_executor(self.pool, encode_chunk, NO_PCM)

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while (item := await self.queue.get()) is not None:
            cast = item.cast
            if item.failure is None and not (cast.closed or cast.cancelled):
                await loop.run_in_executor(self.pool, item.encode_with, encoder(self.crew.cfg, cast, item.index))
            await self.land(item)

    async def land(self, item: Synthesized) -> None:
        """An encoded chunk (or its failure) into its cast's log, and the cast finished when it
        is complete: from the appender's loop, or at once from the synth loop for an attempt's first
        chunk (nothing of its attempt is in the queue before it)."""
        crew, cast, encoded = self.crew, item.cast, item.ready
        if cast.closed or cast.cancelled:  # lost or cancelled meanwhile: its chunks are dropped
            return
        if item.failure is not None or encoded is None:
            await self.outcomes.fail(cast, item.failure or f"sentence {item.index}: not encoded")
            return
        crew.metrics.chunk_seconds.labels(stage="encode").observe(item.encode_s)
        cast.pace = cast.pace.encoded(made_ms(item.pcm), encoded.duration_ms)
        try:
            await self._append(cast, item, encoded)
        except SeqMismatch as exc:
            self.outcomes.lose(cast, f"append refused ({exc})")
        except RedisError as exc:  # not the cast's fault: try again soon, uncounted
            self.outcomes.requeue(cast, f"sentence {item.index}: Redis error ({exc!r})")

    async def _append(self, cast: ActiveCast, item: Synthesized, encoded: EncodedChunk) -> None:
        crew = self.crew
        audio = cast.audio_record(item.index, encoded.duration_ms, encoded.data, item.words, cached=item.cached)
        if cast.pace.dry(crew.clock()):
            crew.metrics.underruns.inc()
        first_ever = cast.first_audio_ts is None
        cast.appending = True  # a cancel now keeps this chunk: it is on its way to the log
        try:
            stamped = await crew.store.append_stamped(cast.cast_id, cast.tail, [audio])  # its ts: the receipt's
        finally:
            cast.appending = False
        cast.appended(audio, stamped, crew.clock())
        if first_ever and cast.job.enqueued_at and not cast.live:  # an open cast waits for its text first
            crew.metrics.time_to_first_audio.observe(max(0.0, time.time() - cast.job.enqueued_at / 1000))
        if cast.complete:
            await self.outcomes.finish(cast)
