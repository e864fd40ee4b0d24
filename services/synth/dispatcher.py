"""The synth loop: ask the schedule which cast goes next, run one chunk of it on the model thread.

The schedule is a pure function of the casts (:func:`livesched.pick_next`, over
:mod:`scheduler`); this loop applies its decision (newcomers that yielded are noted), marks the
chunk as in hand (a worker's death now counts against it), runs the model in its own thread, and
puts the chunk, or the news that it failed, on the cast's appender. An attempt's first chunk, which
a listener waits for, is encoded on the model thread straight after its inference and put in the
log before the next inference starts: no hop through the event loop and the appender's queue between
the model and the encoder, and no inference sharing the CPU with the encoder and the append.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import numpy as np

from castlog import SAMPLE_RATE

from . import chunkcache, jobs, seams
from .appender import NO_PCM, Appender, Encoding, Synthesized, encoder, made_ms
from .cast import ActiveCast, heads
from .crew import Crew
from .hand import quietly, wait
from .livesched import Rotation, pick_next
from .model import Audio, Synthesizer
from .model.timing import Word
from .scheduler import ramp_cut

log = logging.getLogger(__name__)


def infer(synth: Synthesizer, text: str, voice: str, speed: float = 1.0) -> tuple[Audio, list[Word]]:
    """One chunk through the model (on the model thread): mono PCM and, where timed, its words."""
    timed = getattr(synth, "synthesize_timed", None)  # a Synthesizer may not time words
    if timed is not None:
        audio, words = timed(text, voice, speed)
    else:
        audio, words = synth.synthesize(text, voice, speed), []
    pcm = np.asarray(audio, dtype=np.float32)
    if pcm.ndim != 1:
        raise ValueError(f"the model returned audio of shape {pcm.shape}, expected mono")
    return pcm, words


def read_and_encode(read: Callable[[], tuple[Audio, list[Word]]], item: Synthesized, encode: Encoding | None) -> None:
    """On the model thread: the chunk into ``item``, then, given ``encode``, its MP3 at once
    (:meth:`Synthesized.encode_with`). A model failure raises."""
    item.pcm, item.words = read()
    if encode is not None:
        item.encode_with(encode)


class Dispatcher:
    """Picks and synthesizes chunks, one at a time, until the worker stops."""

    def __init__(self, crew: Crew, synth: Synthesizer, appenders: tuple[Appender, Appender]) -> None:
        self.crew, self.synth = crew, synth
        self.appenders = appenders  # whole-text casts, open casts
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="synth-model")
        self.rotation = Rotation()  # which client's open casts had the model last (livesched)
        self.cache = chunkcache.ChunkCache(crew.redis, crew.cfg.chunk_cache_bytes)
        self.model = chunkcache.model_tag(synth)  # in every chunk's cache key

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        crew, hand = self.crew, self.crew.hand
        while not hand.stopping:
            cast = self.next_cast()
            if cast is None or (hand.admitting and cast.pace.first_audio_at is not None):
                # nothing to do, or jobs read together are still being admitted: their first
                # chunks go before anyone's next one
                await wait(hand.work, crew.cfg.poll_s)
                continue
            if cast.pace.first_audio_at is not None:
                crew.metrics.lead_seconds.observe(cast.pace.lead(crew.clock()))
            gap_s = crew.cfg.live_gap_s if cast.live else None  # a live turn's audio keeps coming
            reads = partial(seams.read_text, self.synth)  # what the model reads for a piece of it
            cut = ramp_cut(crew.speed, cast.pace, crew.clock(), cast.whole_cut(reads), partial(cast.cuts, reads),
                           cast.reading_speed, gap_s)
            if (taken := await self._take(cast, None if cut is None else cast.heads()[cut])) is None:
                continue
            index, text, key, hit = taken
            await quietly(jobs.mark_in_hand(crew.redis, cast.job.entry_id, index))  # a death now counts against it
            first = index == cast.resume_from  # its listener waits: encoded and appended at once
            speed = cast.reading_speed
            behind, ahead = cast.context(index)  # a seam inside a sentence: see seams.read
            seen = seams.read_text(self.synth, text, ahead, behind)  # what the model reads for it
            started = crew.clock()
            item = Synthesized(cast, index, NO_PCM, cached=hit is not None)
            encode = encoder(crew.cfg, cast, index) if first else None
            try:
                read = (partial(seams.read, infer, self.synth, text, cast.voice, speed, ahead, behind, seen=seen)
                        if hit is None else hit.output)
                await loop.run_in_executor(self.pool, read_and_encode, read, item, encode)
            except Exception as exc:  # noqa: BLE001 - any model failure fails the attempt
                log.warning("cast %s: chunk %d failed: %r", cast.cast_id, index, exc)
                cast.failing = True
                item.failure = f"sentence {index}: {exc!r}"
                await self.appender(cast).queue.put(item)
                continue
            took = max(0.0, crew.clock() - started - item.encode_s)  # the model's share
            if cast.closed or cast.cancelled:  # a cancel threw this chunk away
                continue
            self._observe(cast, took, len(text), len(seen), len(item.pcm) / SAMPLE_RATE, speed, hit)
            cast.pace = cast.pace.made(made_ms(item.pcm), crew.clock())  # in the lead at once: see scheduler.Pace
            if encode is None:
                await self.appender(cast).queue.put(item)
            else:
                # In the log before the next inference, which on a CPU would share the cores with
                # the append and with edge's delivery to the listener.
                await self.appender(cast).land(item)
            if hit is None:  # kept after its append: never on a listener's path
                await self.cache.put(key, item.pcm, item.words, took)
                crew.metrics.cache_bytes.set(self.cache.held)
        for appender in self.appenders:  # the chunk in hand is queued: the append loops drain, end
            await appender.queue.put(None)

    async def _take(self, cast: ActiveCast, cut: str | None) -> tuple[int, str, str, chunkcache.Hit | None] | None:
        """The next chunk of ``cast``, its cache key and what the cache has of it: cut where an
        earlier cast cut the same sentence when the cache has that (a hit costs no model time,
        whatever the lead), else to the ramp's head ``cut`` (None: as it is). None when a cancel
        took the chunk meanwhile."""
        chunk, found = cast.chunks[cast.next_synth], None
        if self.cache.on:
            for head in heads(chunk):
                key = self._key(cast, head, *cast.context_if(head))
                hit = await self.cache.get(key)
                if not cast.wants_chunk or cast.chunks[cast.next_synth] != chunk:
                    return None  # cancelled (or cut) while the cache answered: the next head has no chunk
                if hit is not None:
                    found = (head, key, hit)
                    break
        if found is not None:
            head, key, hit = found
            return (*cast.take_chunk(head=head), key, hit)
        index, text = cast.take_chunk(cut)
        return index, text, self._key(cast, text, *cast.context(index)), None

    def _key(self, cast: ActiveCast, text: str, behind: str, ahead: str) -> str:
        """The cache key of ``text`` read by ``cast`` with these words around it."""
        return chunkcache.chunk_key(self.model, text, cast.voice, cast.reading_speed, ahead, behind)

    def next_cast(self) -> ActiveCast | None:
        """Ask the schedule (a pure function of the casts, which it only reads) and apply its decision."""
        casts = self.crew.hand.casts.values()
        first_chunk_s = self.crew.speed.first_chunk_s(listeners=sum(1 for c in casts if c.wants_chunk))
        now = self.crew.clock()
        decision = pick_next(casts, now, first_chunk_s=first_chunk_s, hold_lead_s=self.crew.cfg.live_hold_lead_s,
                             rotation=self.rotation.last)
        for newcomer in decision.yielded:
            newcomer.pace = newcomer.pace.yielding()
        if decision.cast is not None and decision.cast.live:
            self.rotation.served(decision.cast.client)
        return decision.cast

    def appender(self, cast: ActiveCast) -> Appender:
        whole, live = self.appenders
        return live if cast.live else whole

    def _observe(
        self, cast: ActiveCast, took: float, chars: int, seen: int, audio_s: float, speed: float,
        hit: chunkcache.Hit | None,
    ) -> None:
        """The model's speed on this chunk of ``chars`` characters (read at ``speed``, ``seen`` read
        with its neighbours' words): for the schedule, the metrics and the receipt. A chunk from the cache says nothing of the model's speed: it counts what it saved."""
        metrics = self.crew.metrics
        if hit is not None:
            metrics.cache_hits.inc()
            metrics.cache_saved_seconds.inc(hit.model_s)
            return
        if self.cache.on:
            metrics.cache_misses.inc()
        self.crew.speed.observe(took, chars, audio_s, speed, read_chars=seen)
        metrics.chunk_seconds.labels(stage="synth").observe(took)
        if audio_s > 0:
            metrics.rtf.observe(took / audio_s)
            # the two sums' ratio is the true mean RTF; the histogram's mean weighs a short chunk as a long one
            metrics.synth_seconds.inc(took)
            metrics.audio_seconds.inc(audio_s)
        cast.synth_s += took
