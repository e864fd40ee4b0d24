"""A lane: the way of a synthesized chunk into its cast's log.

A lane is a bounded queue of chunks from the model thread and an encoder thread of its own; its
loop encodes each chunk to MP3 (overlapping the next inference), appends it by conditional
append at the tail the cast expects, and finishes the cast once it is complete. A chunk that
failed in the model travels the same queue, so the chunks before it are appended first.

The worker has two lanes: whole-text casts, and open casts, whose sentences never wait behind
whole-text chunks in the encoder (one in flight per open cast keeps each in order).
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial

import numpy as np
import numpy.typing as npt
from redis.exceptions import RedisError

from castlog import SeqMismatch

from .cast import ActiveCast
from .crew import Crew
from .model import SAMPLE_RATE
from .model.timing import Word
from .mp3 import EncodedChunk, encode_chunk
from .outcomes import Outcomes
from .scheduler import Encoded

PCM = npt.NDArray[np.float32]
# Synthesized chunks waiting for the encoder: one, so the model runs ahead by exactly a chunk.
PIPELINE_DEPTH = 1

NO_PCM: PCM = np.zeros(0, dtype=np.float32)


@dataclass
class Synthesized:
    """A chunk between the model thread and its append, or the news that it failed: failures
    travel the same queue so that the chunks before them are appended first, in order."""

    cast: ActiveCast
    index: int
    pcm: PCM
    failure: str | None = None
    words: list[Word] = field(default_factory=list)  # (text, start ms, end ms) in ``pcm``
    encoded: asyncio.Event = field(default_factory=asyncio.Event)  # set once encoded (or dropped)


def made_ms(pcm: PCM) -> int:
    """A chunk's length as the model made it: the lead's estimate until it is encoded (the
    encoder trims silence)."""
    return len(pcm) * 1000 // SAMPLE_RATE


class Lane:
    """One queue of synthesized chunks, drained by :meth:`run` through one encoder thread."""

    def __init__(self, crew: Crew, outcomes: Outcomes, name: str) -> None:
        self.crew, self.outcomes = crew, outcomes
        self.queue: asyncio.Queue[Synthesized | None] = asyncio.Queue(PIPELINE_DEPTH)
        self.pool = ThreadPoolExecutor(1, thread_name_prefix=name)

    async def put(self, item: Synthesized | None) -> None:
        """Queue a chunk (None: no more, the loop ends); waits while the lane is full."""
        await self.queue.put(item)

    async def warm(self) -> None:
        """The encoder's first use loads the codec: not on a listener's first chunk."""
        await asyncio.get_running_loop().run_in_executor(self.pool, encode_chunk, NO_PCM)

    def shutdown(self) -> None:
        self.pool.shutdown(wait=False)

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        crew = self.crew
        while (item := await self.queue.get()) is not None:
            cast = item.cast
            if cast.closed or cast.cancelled:  # a cancelled cast's chunks in flight are dropped
                item.encoded.set()
                continue
            if item.failure is not None:
                await self.outcomes.fail(cast, item.failure)
                continue
            started = crew.clock()
            try:
                encode = partial(encode_chunk, item.pcm, crew.cfg.bitrate, trim_lead=cast.trims_lead(item.index))
                encoded = await loop.run_in_executor(self.pool, encode)
            except Exception as exc:  # noqa: BLE001 - an encoder failure fails the attempt
                item.encoded.set()
                await self.outcomes.fail(cast, f"sentence {item.index}: encoding failed: {exc!r}")
                continue
            item.encoded.set()
            crew.metrics.chunk_seconds.labels(stage="encode").observe(crew.clock() - started)
            if cast.closed or cast.cancelled:  # lost or cancelled while encoding
                continue
            cast.note(Encoded(made_ms(item.pcm), encoded.duration_ms), crew.clock())
            try:
                await self._append(cast, item, encoded)
            except SeqMismatch as exc:
                self.outcomes.lose(cast, f"append refused ({exc})")
            except RedisError as exc:  # not the cast's fault: try again soon, uncounted
                self.outcomes.requeue(cast, f"sentence {item.index}: Redis error ({exc!r})")

    async def _append(self, cast: ActiveCast, item: Synthesized, encoded: EncodedChunk) -> None:
        crew = self.crew
        audio = cast.audio_record(item.index, encoded.duration_ms, encoded.data, item.words)
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
