"""The synth loop: ask the schedule which cast goes next, run one chunk of it on the model thread.

The schedule is a pure function of the casts' snapshot (:func:`livesched.pick_next`, over
:mod:`scheduler`); this loop applies its decision (newcomers that yielded are noted), marks the
chunk as in hand (a worker's death now counts against it), runs the model in its own thread, and
puts the chunk, or the news that it failed, on the cast's lane. A cast's first chunk is encoded
before the next inference starts: on a CPU the two would share the cores.
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import numpy as np

from . import jobs, seams
from .cast import ActiveCast
from .crew import Crew
from .holdings import quietly, wait
from .lane import NO_PCM, PCM, Lane, Synthesized, made_ms
from .livesched import Rotation, pick_next
from .model import SAMPLE_RATE, Synthesizer
from .model.timing import Word
from .scheduler import Made, Yielded

log = logging.getLogger(__name__)

# The longest the model waits for a cast's first chunk to be encoded before it goes on.
FIRST_ENCODE_WAIT_S = 1.0


def infer(synth: Synthesizer, text: str, voice: str, speed: float = 1.0) -> tuple[PCM, list[Word]]:
    """One chunk through the model (on the model thread): mono PCM and, where timed, its words."""
    timed = getattr(synth, "synthesize_timed", None)  # a Synthesizer may not time words
    if timed is not None:
        audio, words = timed(text, voice, speed)
    else:  # a stand-in may take no speed: ask for one only when it is not 1.0
        audio = synth.synthesize(text, voice) if speed == 1.0 else synth.synthesize(text, voice, speed)
        words = []
    pcm = np.asarray(audio, dtype=np.float32)
    if pcm.ndim != 1:
        raise ValueError(f"the model returned audio of shape {pcm.shape}, expected mono")
    return pcm, words


class Dispatcher:
    """Picks and synthesizes chunks, one at a time, until the worker stops."""

    def __init__(self, crew: Crew, synth: Synthesizer, lanes: tuple[Lane, Lane]) -> None:
        self.crew, self.synth = crew, synth
        self.lanes = lanes  # whole-text casts, open casts
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="synth-model")
        self.rotation = Rotation()  # which client's open casts had the model last (livesched)

    def shutdown(self) -> None:
        self.pool.shutdown(wait=False)

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        crew, held = self.crew, self.crew.held
        while not held.stopping:
            cast = self.next_cast()
            if cast is None or (held.admitting and cast.pace.first_audio_at is not None):
                # nothing to do, or jobs read together are still being admitted: their first
                # chunks go before anyone's next one
                await wait(held.work, crew.cfg.poll_s)
                continue
            if cast.pace.first_audio_at is not None:
                crew.metrics.lead_seconds.observe(cast.pace.lead(crew.clock()))
            index, text = cast.take_chunk()
            await quietly(jobs.hold(crew.redis, cast.job.entry_id, index))  # a death now counts against it
            started = crew.clock()
            try:
                speed = cast.open_text.speed if cast.open_text else cast.speed
                behind, ahead = cast.context(index)  # a seam inside a sentence: see seams.read
                read = partial(seams.read, infer, self.synth, text, cast.voice, speed, ahead, behind)
                pcm, words = await loop.run_in_executor(self.pool, read)
            except Exception as exc:  # noqa: BLE001 - any model failure fails the attempt
                log.warning("cast %s: chunk %d failed: %r", cast.cast_id, index, exc)
                cast.failing = True
                await self.lane(cast).put(Synthesized(cast, index, NO_PCM, f"sentence {index}: {exc!r}"))
                continue
            took = crew.clock() - started
            if cast.closed or cast.cancelled:  # a cancel threw this chunk away
                continue
            self._observe(cast, took, len(text), len(pcm) / SAMPLE_RATE)
            cast.note(Made(made_ms(pcm)), crew.clock())  # in the lead at once: see scheduler.Pace
            item = Synthesized(cast, index, pcm, words=words)
            await self.lane(cast).put(item)
            if index == cast.resume_from:
                # A listener waits for this first audio: encode it before the next inference,
                # which on a CPU would share the cores with the encoder and slow it several-fold.
                await wait(item.encoded, FIRST_ENCODE_WAIT_S)
        for lane in self.lanes:  # the chunk in hand is queued: the append loops drain, end
            await lane.put(None)

    def next_cast(self) -> ActiveCast | None:
        """Ask the schedule (a pure function of the casts' snapshot) and apply its decision."""
        casts = self.crew.held.casts
        views = [c.view() for c in casts.values()]
        first_chunk_s = self.crew.speed.first_chunk_s(listeners=sum(1 for v in views if v.wants_chunk))
        now = self.crew.clock()
        decision = pick_next(views, now, first_chunk_s=first_chunk_s, hold_lead_s=self.crew.cfg.live_hold_lead_s,
                             rotation=self.rotation.last)
        for newcomer in decision.yielded:
            casts[newcomer.key].note(Yielded(), now)
        if decision.cast is None:
            return None
        if decision.cast.live:
            self.rotation.served(decision.cast.client)
        return casts[decision.cast.key]

    def lane(self, cast: ActiveCast) -> Lane:
        whole, live = self.lanes
        return live if cast.live else whole

    def _observe(self, cast: ActiveCast, took: float, chars: int, audio_s: float) -> None:
        """The model's speed on this chunk: for the schedule, the metrics and the receipt."""
        self.crew.speed.observe(took, chars, audio_s)
        metrics = self.crew.metrics
        metrics.chunk_seconds.labels(stage="synth").observe(took)
        if audio_s > 0:
            metrics.rtf.observe(took / audio_s)
            metrics.observe_synthesis(took, audio_s)
        cast.synth_s += took
