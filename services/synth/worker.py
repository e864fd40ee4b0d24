"""The worker: jobs in through the consumer group, one chunk at a time out to the cast logs.

Four tasks share one event loop:

- the *admitter* turns jobs into active casts: first our own pending entries (a restart), then
  retries whose backoff ran out, then entries of dead workers (XAUTOCLAIM after the lease),
  then new ones; only while the schedule has room (:func:`scheduler.admissible`);
- the *synth loop* picks the cast with the lowest lead and runs exactly one chunk of it on the
  model thread;
- the *append loop* encodes that chunk on a second thread (overlapping the next inference),
  appends it by conditional append at the tail it expects, and finishes complete casts;
- the *lease loop* refreshes the leases of the jobs this worker holds.

A conditional append that finds another tail means another worker owns the cast now: the cast
is dropped without acknowledging its job. Jobs are acknowledged only after `eos` or `error`.

Only a chunk that raises in the model or encoder is a failed attempt (counted in the job's
tally); a Redis error puts the job back to be tried again soon, uncounted, and a worker's death
counts only against the chunk it had in hand (``SYNTH_MAX_CRASHES_PER_CHUNK``). On stop, the
worker finishes the chunk in hand and hands its other jobs back at once for any worker to claim.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial

import numpy as np
import numpy.typing as npt
from redis.asyncio import Redis
from redis.exceptions import RedisError

import castlog
from castlog import CastStore, Eos, Error, LogReader, SeqMismatch, Start

from . import jobs, scheduler
from .cast import ActiveCast, Assignment, job_key, plan
from .config import SynthConfig
from .inbox import Delivery, Inbox
from .livefeed import LiveFeed, read_open_text
from .livesched import pick_next
from .metrics import SynthMetrics
from .model import SAMPLE_RATE, Synthesizer
from .model.timing import Word
from .mp3 import EncodedChunk, encode_chunk
from .scheduler import Admitted, Encoded, Made, Yielded

log = logging.getLogger(__name__)

PCM = npt.NDArray[np.float32]
# Synthesized chunks waiting for the encoder: one, so the model runs ahead by exactly a chunk.
PIPELINE_DEPTH = 1
# The longest the model waits for a cast's first chunk to be encoded before it goes on.
FIRST_ENCODE_WAIT_S = 1.0
# After a Redis error, the admitter and lease loop wait this long before trying again.
REDIS_RETRY_S = 1.0
# Longest error text kept in `error` records and `jobs/dead` entries.
MAX_REASON_CHARS = 500

_NO_PCM: PCM = np.zeros(0, dtype=np.float32)


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


class Worker:
    def __init__(
        self,
        cfg: SynthConfig,
        redis: Redis,
        synthesizer: Synthesizer,
        *,
        clock: Callable[[], float] = time.monotonic,
        metrics: SynthMetrics | None = None,
    ) -> None:
        self.cfg = cfg
        self.metrics = metrics or SynthMetrics()
        self.redis = redis
        self.store = CastStore(redis)
        self.reader = LogReader(redis)  # every read of a cast log, for admission and receipts
        self.synth = synthesizer
        self.voices = frozenset(synthesizer.voices())
        self._clock = clock
        self.casts: dict[str, ActiveCast] = {}  # job entry id -> cast, in admission order
        self._requeued: set[str] = set()  # jobs this worker put back itself after a Redis error
        self.inbox = Inbox(
            redis, cfg.consumer, lease_ms=cfg.lease_ms, claim_every_s=cfg.refresh_s, poll_s=cfg.poll_s, clock=clock
        )
        # Open casts come through their own stream, admitted apart from the others (SYNTH_MAX_LIVE).
        self.live_inbox = Inbox(
            redis, cfg.consumer, lease_ms=cfg.lease_ms, claim_every_s=cfg.refresh_s, poll_s=cfg.poll_s, clock=clock,
            stream=castlog.JOBS_LIVE,
        )
        self.feed = LiveFeed(
            redis, self.casts, idle_s=cfg.live_idle_s, poll_s=cfg.poll_s, clock=clock, on_text=self._text_came
        )
        self._pipeline: asyncio.Queue[Synthesized | None] = asyncio.Queue(PIPELINE_DEPTH)
        self._work = asyncio.Event()  # a cast was admitted, or stop() was called
        self._admitting = 0  # jobs taken from the inbox together and not yet admitted
        self.speed = scheduler.ModelSpeed()  # for the schedule: how long a first chunk takes now
        self._room = asyncio.Event()  # a cast left, or stop() was called
        self._stopping = asyncio.Event()
        self._model_pool = ThreadPoolExecutor(1, thread_name_prefix="synth-model")
        self._encode_pool = ThreadPoolExecutor(1, thread_name_prefix="synth-encode")
        # An open cast's sentence is encoded and appended on a lane of its own, so it never waits
        # behind whole-text chunks in the encoder (one in flight per open cast keeps it in order).
        self._live_pipeline: asyncio.Queue[Synthesized | None] = asyncio.Queue(PIPELINE_DEPTH)
        self._live_encode_pool = ThreadPoolExecutor(1, thread_name_prefix="synth-encode-live")

    # ---- lifecycle -------------------------------------------------------------------------

    async def run(self) -> None:
        """Work until :meth:`stop`; then finish the chunk in hand, hand the unfinished jobs back
        to the group (another worker claims them at once) and return."""
        await self.inbox.open()
        await self.live_inbox.open()
        # the encoder's first use loads the codec: not on a listener's first chunk
        await asyncio.get_running_loop().run_in_executor(self._encode_pool, encode_chunk, _NO_PCM)
        side = [asyncio.create_task(self._admit_loop()), asyncio.create_task(self._lease_loop())]
        side += [asyncio.create_task(self._admit_live_loop()), asyncio.create_task(self.feed.run())]
        main = [asyncio.create_task(self._synth_loop()), asyncio.create_task(self._append_loop())]
        main.append(asyncio.create_task(self._append_loop(self._live_pipeline, self._live_encode_pool)))
        try:
            running = set(side + main)
            while not all(task.done() for task in main):
                done, running = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    task.result()  # a loop ended by an exception is a bug: surface it
        finally:
            for task in side + main:
                task.cancel()
            await asyncio.gather(*side, *main, return_exceptions=True)
            if self.stopping:
                await self._hand_back()
            self._model_pool.shutdown(wait=False)
            self._encode_pool.shutdown(wait=False)
            self._live_encode_pool.shutdown(wait=False)
            self.metrics.active_casts.set(0)
            log.info("worker %s stopped; %d cast(s) left pending", self.cfg.consumer, len(self.casts))

    async def _hand_back(self) -> None:
        """Give every job we hold back to the group at once, and leave the group if we hold nothing."""
        handed = 0
        for inbox in (self.inbox, self.live_inbox):
            held = list(self._active(inbox)) + inbox.held()
            try:
                await jobs.release(self.redis, held)  # no chunk in hand: the next owner counts no death
                handed += await jobs.hand_back(self.redis, self.cfg.consumer, held, inbox.stream)
                await jobs.delete_consumer_if_empty(self.redis, self.cfg.consumer, inbox.stream)
            except RedisError as exc:  # they stay ours: our restart or a take-over after the lease resumes them
                log.warning("could not hand back %d job(s) (%s); they resume after the lease", len(held), exc)
                return
        if handed:
            log.info("handed back %d job(s) for other workers to take now", handed)
        self.casts.clear()

    def stop(self) -> None:
        """Stop admitting and picking chunks; :meth:`run` returns once the chunk in hand is in."""
        self._stopping.set()
        self._work.set()
        self._room.set()

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    # ---- admission ---------------------------------------------------------------------------

    async def _admit_loop(self) -> None:
        while not self.stopping:
            try:
                room = scheduler.admissible(
                    [c.view() for c in self.casts.values() if not c.live],
                    self._clock(),
                    cap=self.cfg.concurrency,
                    max_active=self.cfg.max_active,
                    threshold_s=self.cfg.lead_threshold_s,
                )
                if room == 0:  # jobs begun elsewhere go on at once, up to the hard bound
                    begun = await self.inbox.take_begun(self.cfg.max_active - len(self.casts), self._active(self.inbox))
                    await self._admit_all(begun, self.inbox)
                    if not begun:
                        await _wait(self._room, self.cfg.poll_s)
                    continue
                batch = await self.inbox.take(room, self._active(self.inbox))
                self._admitting = len(batch)
                for delivery in batch:
                    try:
                        await self._admit_all([delivery], self.inbox)  # one at a time: see _admitting
                    finally:
                        self._admitting -= 1
                        self._work.set()
            except RedisError as exc:
                self._admitting = 0
                log.warning("admitter: Redis error (%s); retrying in %.1fs", exc, REDIS_RETRY_S)
                await asyncio.sleep(REDIS_RETRY_S)
                if "NOGROUP" in str(exc):  # Redis lost its data (a restart without persistence)
                    await _quietly(jobs.ensure_group(self.redis))

    async def _admit_live_loop(self) -> None:
        """Open casts: admitted while fewer than SYNTH_MAX_LIVE are held, whatever the others do."""
        while not self.stopping:
            try:
                room = self.cfg.max_live - sum(1 for c in self.casts.values() if c.live)
                if room <= 0:
                    await _wait(self._room, self.cfg.poll_s)
                    continue
                await self._admit_all(await self.live_inbox.take(room, self._active(self.live_inbox)), self.live_inbox)
            except RedisError as exc:
                log.warning("live admitter: Redis error (%s); retrying in %.1fs", exc, REDIS_RETRY_S)
                await asyncio.sleep(REDIS_RETRY_S)
                if "NOGROUP" in str(exc):
                    await _quietly(jobs.ensure_group(self.redis, castlog.JOBS_LIVE))

    def _active(self, inbox: Inbox) -> set[str]:
        return {c.job.entry_id for c in self.casts.values() if c.job.stream == inbox.stream}

    def _inbox_of(self, job: Assignment) -> Inbox:
        return self.live_inbox if job.live else self.inbox

    async def _admit_all(self, deliveries: list[Delivery], inbox: Inbox) -> None:
        for delivery in deliveries:
            if self.stopping:  # taken but not begun: back to the group with the rest
                inbox.retry_later(delivery.entry_id, 0)
                continue
            try:
                await self._admit_delivery(delivery, inbox)
            except RedisError as exc:  # still pending with us: try it again soon, uncounted
                log.warning("job %s: Redis error while admitting (%s); retrying", delivery.entry_id, exc)
                self._retry_soon(delivery.entry_id, inbox)

    async def _admit_delivery(self, delivery: Delivery, inbox: Inbox) -> None:
        entry_id, fields, deliveries = delivery.entry_id, delivery.fields, delivery.deliveries
        if deliveries is None:
            info = (await jobs.pending(self.redis, [entry_id], inbox.stream)).get(entry_id)
            if info is None or info.consumer != self.cfg.consumer:
                return  # acknowledged or taken over meanwhile: not ours to run
            deliveries = info.deliveries
        job = jobs.parse_job(entry_id, fields, deliveries, inbox.stream)
        if job is None:
            log.warning("job %s is malformed (%r); moving it to %s", entry_id, fields, castlog.JOBS_DEAD)
            cast_id = jobs.as_str(fields.get(b"id", b"?"))[:64]
            await castlog.dead_letter(self.redis, cast_id, deliveries, "malformed job entry", self.cfg.consumer)
            self.metrics.dead_letters.inc()
            await jobs.ack(self.redis, entry_id, inbox.stream)
            return
        await self.admit(job)

    async def admit(self, job: Assignment) -> None:
        """Read the cast's log and recipe and start the next attempt, or settle the job at once."""
        if job.key in self.casts:
            return  # already ours and running
        if any(c.cast_id == job.cast_id for c in self.casts.values()):
            # A second job for a cast we are making: its first job stays pending until `eos`,
            # so this one adds nothing (and a second `start` would restart our own attempt).
            log.info("job %s duplicates active cast %s; acknowledging it", job.entry_id, job.cast_id)
            await jobs.ack(self.redis, job.entry_id, job.stream)
            return
        entries, tail = await self.reader.read_all(job.cast_id)
        last = entries[-1] if entries else None
        if last is None:
            await self._give_up(job, None, "the cast has no log (was it deleted?)", job.deliveries)
            return
        if last.kind == "eos":
            log.info("cast %s is already finished; acknowledging job %s", job.cast_id, job.entry_id)
            if job.deliveries > 1:  # this job may have written that eos and died before its receipt
                await self._publish_receipt(job, entries)
            await jobs.ack(self.redis, job.entry_id, job.stream)
            return
        if last.kind == "error" and last.ts > job.enqueued_at:
            # This job was already answered with that error (we died before the XACK).
            await jobs.ack(self.redis, job.entry_id, job.stream)
            return
        state = castlog.summarize(entries)
        tally = await jobs.tally(self.redis, job.entry_id)
        own_retry = job.entry_id in self._requeued
        self._requeued.discard(job.entry_id)
        if tally.hand >= state.next_sentence() and not own_retry:  # a worker died with that chunk in hand
            crashes = await jobs.count_death(self.redis, job.entry_id, tally)
            if crashes >= self.cfg.max_crashes_per_chunk:
                reason = f"sentence {tally.hand} was in hand when {crashes} workers died (SYNTH_MAX_CRASHES_PER_CHUNK)"
                await self._give_up(job, tail, reason, state.attempts)
                return
        recipe = await self.store.recipe(job.cast_id)
        if recipe is None:
            await self._give_up(job, tail, "the cast's recipe is missing from the catalog", job.deliveries)
            return
        open_text = await read_open_text(self.feed.store, job.cast_id, self._clock()) if job.live else None
        cast = plan(job, recipe.voice, recipe.text, entries, state, tail, open_text, tally.failures)
        if recipe.voice not in self.voices:
            known = ", ".join(sorted(self.voices))
            reason = f"unknown voice {recipe.voice!r}: this worker has {known}"
            await self._give_up(job, tail, reason, cast.attempt)
            return
        if cast.job_attempt > self.cfg.max_attempts:  # failed for good; the answer was lost
            await self._give_up(job, tail, f"gave up after {tally.failures} failed attempts", cast.attempt - 1)
            return
        start = Start(attempt=cast.attempt, resume_from=cast.resume_from, at=jobs.now_ms())
        try:
            cast.tail = await self.store.append(job.cast_id, cast.tail, [start])
        except SeqMismatch as exc:
            log.warning("cast %s moved while admitting (%s): another worker owns it", job.cast_id, exc)
            return
        self.metrics.attempts.inc()
        log.info(
            "cast %s: attempt %d from sentence %d of %d (job %s)",
            job.cast_id, cast.attempt, cast.resume_from, len(cast.chunks), job.entry_id,
        )
        if cast.complete:  # every sentence was already in the log: only `eos` is missing
            await self._finish(cast)
            return
        cast.note(Admitted(), self._clock())
        self.casts[job.key] = cast
        self.metrics.active_casts.set(len(self.casts))
        self._work.set()
        if cast.live:
            self.feed.changed()

    async def _text_came(self, cast: ActiveCast, new_chunks: int) -> None:
        """The live feed read more of an open cast's text: wake the synth loop for new chunks;
        a close that completes the cast (everything already appended) finishes it here."""
        if new_chunks:
            self._work.set()
        if cast.complete and not cast.closed:
            await self._finish(cast)

    # ---- synthesis and appends ---------------------------------------------------------------

    async def _synth_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while not self.stopping:
            cast = self._next_cast()
            if cast is None or (self._admitting and cast.pace.first_audio_at is not None):
                # nothing to do, or jobs read together are still being admitted: their first
                # chunks go before anyone's next one
                await _wait(self._work, self.cfg.poll_s)
                continue
            if cast.pace.first_audio_at is not None:
                self.metrics.lead_seconds.observe(cast.pace.lead(self._clock()))
            index, text = cast.take_chunk()
            await _quietly(jobs.hold(self.redis, cast.job.entry_id, index))  # a death now counts against it
            started = self._clock()
            try:
                speed = cast.open_text.speed if cast.open_text else cast.speed
                pcm, words = await loop.run_in_executor(self._model_pool, self._infer, text, cast.voice, speed)
            except Exception as exc:  # noqa: BLE001 - any model failure fails the attempt
                log.warning("cast %s: chunk %d failed: %r", cast.cast_id, index, exc)
                cast.failing = True
                await self._lane(cast).put(Synthesized(cast, index, _NO_PCM, f"sentence {index}: {exc!r}"))
                continue
            took = self._clock() - started
            if cast.closed:
                continue
            audio_s = len(pcm) / SAMPLE_RATE
            self.speed.observe(took, len(text), audio_s)
            self.metrics.chunk_seconds.labels(stage="synth").observe(took)
            if audio_s > 0:
                self.metrics.rtf.observe(took / audio_s)
                self.metrics.observe_synthesis(took, audio_s)
            cast.synth_s += took
            cast.note(Made(_made_ms(pcm)), self._clock())  # in the lead at once: see scheduler.Pace
            item = Synthesized(cast, index, pcm, words=words)
            await self._lane(cast).put(item)
            if index == cast.resume_from:
                # A listener waits for this first audio: encode it before the next inference,
                # which on a CPU would share the cores with the encoder and slow it several-fold.
                await _wait(item.encoded, FIRST_ENCODE_WAIT_S)
        await self._pipeline.put(None)  # the chunk in hand is queued: the append loops drain, end
        await self._live_pipeline.put(None)

    def _next_cast(self) -> ActiveCast | None:
        """Ask the schedule (a pure function of the casts' snapshot) and apply its decision."""
        views = [c.view() for c in self.casts.values()]
        first_chunk_s = self.speed.first_chunk_s(listeners=sum(1 for v in views if v.wants_chunk))
        now = self._clock()
        decision = pick_next(views, now, first_chunk_s=first_chunk_s, hold_lead_s=self.cfg.live_hold_lead_s)
        for newcomer in decision.yielded:
            self.casts[newcomer.key].note(Yielded(), now)
        return None if decision.cast is None else self.casts[decision.cast.key]

    def _lane(self, cast: ActiveCast) -> asyncio.Queue[Synthesized | None]:
        return self._live_pipeline if cast.live else self._pipeline

    def _infer(self, text: str, voice: str, speed: float = 1.0) -> tuple[PCM, list[Word]]:
        timed = getattr(self.synth, "synthesize_timed", None)  # a Synthesizer may not time words
        if timed is not None:
            audio, words = timed(text, voice, speed)
        else:  # a stand-in may take no speed: ask for one only when it is not 1.0
            audio = self.synth.synthesize(text, voice) if speed == 1.0 else self.synth.synthesize(text, voice, speed)
            words = []
        pcm = np.asarray(audio, dtype=np.float32)
        if pcm.ndim != 1:
            raise ValueError(f"the model returned audio of shape {pcm.shape}, expected mono")
        return pcm, words

    async def _append_loop(
        self, pipeline: asyncio.Queue[Synthesized | None] | None = None, pool: ThreadPoolExecutor | None = None
    ) -> None:
        loop = asyncio.get_running_loop()
        pipeline, pool = pipeline or self._pipeline, pool or self._encode_pool
        while (item := await pipeline.get()) is not None:
            cast = item.cast
            if cast.closed:
                item.encoded.set()
                continue
            if item.failure is not None:
                await self._fail(cast, item.failure)
                continue
            started = self._clock()
            try:
                encode = partial(encode_chunk, item.pcm, self.cfg.bitrate, trim_lead=cast.trims_lead(item.index))
                encoded = await loop.run_in_executor(pool, encode)
            except Exception as exc:  # noqa: BLE001 - an encoder failure fails the attempt
                item.encoded.set()
                await self._fail(cast, f"sentence {item.index}: encoding failed: {exc!r}")
                continue
            item.encoded.set()
            self.metrics.chunk_seconds.labels(stage="encode").observe(self._clock() - started)
            if cast.closed:  # lost while encoding
                continue
            cast.note(Encoded(_made_ms(item.pcm), encoded.duration_ms), self._clock())
            try:
                await self._append_audio(cast, item, encoded)
            except SeqMismatch as exc:
                self._lose(cast, f"append refused ({exc})")
            except RedisError as exc:  # not the cast's fault: try again soon, uncounted
                self._requeue(cast, f"sentence {item.index}: Redis error ({exc!r})")

    async def _append_audio(self, cast: ActiveCast, item: Synthesized, encoded: EncodedChunk) -> None:
        audio = cast.audio_record(item.index, encoded.duration_ms, encoded.data, item.words)
        if cast.pace.dry(self._clock()):
            self.metrics.underruns.inc()
        first_ever = cast.first_audio_seq is None
        new_tail = await self.store.append(cast.cast_id, cast.tail, [audio])
        cast.appended(audio, new_tail, self._clock())
        if first_ever and cast.job.enqueued_at and not cast.live:  # an open cast waits for its text first
            self.metrics.time_to_first_audio.observe(max(0.0, time.time() - cast.job.enqueued_at / 1000))
        if cast.complete:
            await self._finish(cast)

    async def _finish(self, cast: ActiveCast) -> None:
        """`eos`, then the receipt, then XACK: a crash in between repeats only the idempotent rest."""
        eos = Eos(sentences=len(cast.chunks), audio_ms=cast.offset_ms, attempts=cast.attempt)
        try:
            cast.tail = await self.store.append(cast.cast_id, cast.tail, [eos])
        except SeqMismatch as exc:
            self._lose(cast, f"eos refused ({exc})")
            return
        self._close(cast)
        try:
            await self._settle_finished(cast)
        except RedisError as exc:  # the eos stands: the job comes back, finds it, and settles
            log.warning("cast %s: Redis error after its eos (%r); settling it again soon", cast.cast_id, exc)
            self._retry_soon(cast.job.entry_id, self._inbox_of(cast.job))

    async def _settle_finished(self, cast: ActiveCast) -> None:
        """The receipt, then XACK: a crash in between repeats the receipt (receipts may repeat)."""
        first_audio_ms = 0
        if cast.first_audio_seq is not None:
            first = await self.reader.read(cast.cast_id, cast.first_audio_seq, 1)
            if first and cast.job.enqueued_at:
                first_audio_ms = max(0, first[0].ts - cast.job.enqueued_at)
        receipt = castlog.Done(
            id=cast.cast_id,
            attempts=cast.attempt,
            sentences=len(cast.chunks),
            audio_ms=cast.offset_ms,
            synth_ms=int(cast.synth_s * 1000),
            first_audio_ms=first_audio_ms,
            finished_at=jobs.now_ms(),
        )
        await castlog.announce_done(self.redis, receipt)
        await jobs.ack(self.redis, cast.job.entry_id, cast.job.stream)
        log.info("cast %s finished: %d sentences, %d ms audio", cast.cast_id, len(cast.chunks), cast.offset_ms)

    async def _publish_receipt(self, job: Assignment, entries: list[castlog.Entry]) -> None:
        """The receipt of a cast finished earlier, from its log (receipts may repeat: their
        consumers take them as idempotent, keyed by cast id)."""
        eos = entries[-1].record
        assert isinstance(eos, Eos)
        first = next((e for e in entries if e.kind == "audio"), None)
        first_audio_ms = max(0, first.ts - job.enqueued_at) if first is not None and job.enqueued_at else 0
        await castlog.announce_done(self.redis, castlog.Done(
            id=job.cast_id, attempts=eos.attempts, sentences=eos.sentences, audio_ms=eos.audio_ms,
            synth_ms=0, first_audio_ms=first_audio_ms, finished_at=entries[-1].ts or jobs.now_ms(),
        ))

    # ---- failure ----------------------------------------------------------------------------

    async def _fail(self, cast: ActiveCast, reason: str) -> None:
        """This attempt failed in the model or encoder: count it, then retry after a backoff
        (the job stays pending) or give up."""
        if cast.closed:
            return
        self._close(cast)
        try:
            failures = await jobs.count_failure(self.redis, cast.job.entry_id)
        except RedisError as exc:
            self._retry_soon(cast.job.entry_id, self._inbox_of(cast.job))  # decided when Redis is back
            log.warning("cast %s: could not count its failure (%r); retrying", cast.cast_id, exc)
            return
        if failures < self.cfg.max_attempts:
            delay = self.cfg.backoff_s(failures)
            log.warning("cast %s: attempt %d failed (%s); retrying in %.1fs", cast.cast_id, cast.attempt, reason, delay)
            self.metrics.retries.inc()
            self._inbox_of(cast.job).retry_later(cast.job.entry_id, delay)
            return
        try:
            await self._give_up(cast.job, cast.tail, reason, cast.attempt)
        except RedisError as exc:  # the job stays pending; its lease brings it back
            log.error("cast %s: could not record the failure (%r); leaving the job pending", cast.cast_id, exc)

    async def _give_up(self, job: Assignment, tail: int | None, reason: str, attempts: int) -> None:
        """The terminal answer: `error` (when the cast has a log), `jobs/dead`, XACK."""
        reason = reason[:MAX_REASON_CHARS]
        if tail is not None:
            try:
                await self.store.append(job.cast_id, tail, [Error(reason=reason, attempts=attempts)])
            except SeqMismatch as exc:
                log.warning("cast %s: error record refused (%s): another worker owns it", job.cast_id, exc)
                return
        log.error("cast %s failed for good after %d attempt(s): %s", job.cast_id, attempts, reason)
        await castlog.dead_letter(self.redis, job.cast_id, attempts, reason, self.cfg.consumer)
        self.metrics.dead_letters.inc()
        await jobs.ack(self.redis, job.entry_id, job.stream)

    def _requeue(self, cast: ActiveCast, why: str) -> None:
        """Redis failed us, not the cast: drop the attempt and admit the job again soon (it
        plans from the log's true tail; nothing counts against the job)."""
        if not cast.closed:
            log.warning("cast %s: %s; trying the job again in %.1fs", cast.cast_id, why, REDIS_RETRY_S)
            self._close(cast)
            self._retry_soon(cast.job.entry_id, self._inbox_of(cast.job))

    def _retry_soon(self, entry_id: str, inbox: Inbox) -> None:
        """Admit the job again after a Redis error: the chunk it had in hand did not kill us."""
        self._requeued.add(entry_id)
        inbox.retry_later(entry_id, REDIS_RETRY_S)

    def _lose(self, cast: ActiveCast, why: str) -> None:
        """Another worker owns the cast now: stop, and leave its job to that worker (no XACK)."""
        if not cast.closed:
            log.warning("cast %s: lost to another worker (%s); dropping it", cast.cast_id, why)
            self._close(cast)

    def _close(self, cast: ActiveCast) -> None:
        cast.closed = True
        self.casts.pop(cast.job.key, None)
        self.metrics.active_casts.set(len(self.casts))
        self._room.set()

    # ---- leases -----------------------------------------------------------------------------

    async def _lease_loop(self) -> None:
        while True:
            await asyncio.sleep(self.cfg.refresh_s)
            try:
                await self.refresh_leases()
            except RedisError as exc:
                log.warning("lease refresh: Redis error (%s)", exc)

    async def refresh_leases(self) -> None:
        """Reset the idle time of every job we hold; drop the casts whose job is no longer ours."""
        for inbox in (self.inbox, self.live_inbox):
            await self._refresh(inbox)

    async def _refresh(self, inbox: Inbox) -> None:
        held = list(self._active(inbox)) + inbox.held()
        owners = await jobs.pending(self.redis, held, inbox.stream)
        mine = [i for i in held if i in owners and owners[i].consumer == self.cfg.consumer]
        await jobs.refresh(self.redis, self.cfg.consumer, mine, inbox.stream)
        for entry_id in set(held) - set(mine):
            inbox.forget(entry_id)
            cast = self.casts.get(job_key(inbox.stream, entry_id))
            if cast is not None:
                self._lose(cast, "its job was taken over or acknowledged elsewhere")


def _made_ms(pcm: PCM) -> int:
    """A chunk's length as the model made it: the lead's estimate until it is encoded (the
    encoder trims silence)."""
    return len(pcm) * 1000 // SAMPLE_RATE


async def _quietly(step: Awaitable[object]) -> None:
    try:
        await step
    except RedisError as exc:
        log.warning("Redis error (%s)", exc)


async def _wait(event: asyncio.Event, timeout_s: float) -> None:
    """Wait until ``event`` is set or ``timeout_s`` passed, then re-arm it."""
    try:
        await asyncio.wait_for(event.wait(), timeout_s)
    except asyncio.TimeoutError:
        pass
    event.clear()
